package client

import "testing"

func TestMurmur2MatchesKafka(t *testing.T) {
	// Values from Kafka's own tests of Utils.murmur2.
	for in, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestKeyPartitionIsPositive(t *testing.T) {
	for i := range 1000 {
		key := []byte{byte(i), byte(i >> 8), 0xff}
		if p := keyPartition(key, 7); p < 0 || p >= 7 {
			t.Fatalf("key %x: partition %d", key, p)
		}
	}
}
