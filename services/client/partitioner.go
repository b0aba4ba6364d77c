package client

import "encoding/binary"

// murmur2 is the 32-bit MurmurHash2 with the seed Kafka's default
// partitioner uses, so that a key lands on the same partition number as
// with a Kafka client.
func murmur2(data []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// keyPartition is Kafka's key-to-partition rule: the positive part of the
// murmur2 hash modulo the partition count.
func keyPartition(key []byte, numPartitions int) int32 {
	return int32(uint32(murmur2(key)&0x7fffffff) % uint32(numPartitions))
}
