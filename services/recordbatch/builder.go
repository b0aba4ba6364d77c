package recordbatch

import (
	"encoding/binary"
	"hash/crc32"
)

// Builder encodes records into one uncompressed CreateTime batch. The zero
// value is ready to use.
//
// Build returns a batch backed by the builder's buffer; the builder must not
// be used again until Reset, which reuses that buffer (invalidating the batch).
type Builder struct {
	buf     []byte
	count   int32
	firstTS int64
	maxTS   int64
}

// Append encodes r as the next record. r.Offset is ignored: offset deltas
// are dense. The first record's timestamp becomes the batch's firstTimestamp.
func (b *Builder) Append(r Record) {
	if len(b.buf) == 0 {
		b.buf = append(b.buf[:0], make([]byte, HeaderSize)...)
	}
	if b.count == 0 {
		b.firstTS, b.maxTS = r.Timestamp, r.Timestamp
	}
	b.maxTS = max(b.maxTS, r.Timestamp)
	tsDelta := r.Timestamp - b.firstTS

	size := 1 + varintLen(tsDelta) + varintLen(int64(b.count)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		size += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}

	buf := binary.AppendVarint(b.buf, int64(size))
	buf = append(buf, byte(r.Attributes))
	buf = binary.AppendVarint(buf, tsDelta)
	buf = binary.AppendVarint(buf, int64(b.count))
	buf = appendBytes(buf, r.Key)
	buf = appendBytes(buf, r.Value)
	buf = binary.AppendVarint(buf, int64(len(r.Headers)))
	for _, h := range r.Headers {
		buf = binary.AppendVarint(buf, int64(len(h.Key)))
		buf = append(buf, h.Key...)
		buf = appendBytes(buf, h.Value)
	}
	b.buf = buf
	b.count++
}

// Count is the number of records appended so far.
func (b *Builder) Count() int { return int(b.count) }

// Len is the size the batch would have if built now.
func (b *Builder) Len() int {
	if len(b.buf) == 0 {
		return HeaderSize
	}
	return len(b.buf)
}

// Build writes the header and returns the batch, with base offset 0 and no
// leader epoch: the leader patches both on append. Use NoProducerID,
// NoProducerEpoch and NoSequence for a non-idempotent producer.
func (b *Builder) Build(producerID int64, producerEpoch int16, baseSequence int32) Batch {
	if len(b.buf) == 0 {
		b.buf = append(b.buf[:0], make([]byte, HeaderSize)...)
	}
	h := b.buf
	be.PutUint64(h[offBaseOffset:], 0)
	be.PutUint32(h[offBatchLength:], uint32(len(h)-LengthOverhead))
	Batch(h).SetPartitionLeaderEpoch(NoPartitionLeaderEpoch)
	h[offMagic] = Magic
	be.PutUint16(h[offAttributes:], 0)
	be.PutUint32(h[offLastOffsetDelta:], uint32(max(b.count-1, 0)))
	be.PutUint64(h[offFirstTimestamp:], uint64(b.firstTS))
	be.PutUint64(h[offMaxTimestamp:], uint64(b.maxTS))
	be.PutUint64(h[offProducerID:], uint64(producerID))
	be.PutUint16(h[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(h[offBaseSequence:], uint32(baseSequence))
	be.PutUint32(h[offRecordCount:], uint32(b.count))
	be.PutUint32(h[offCRC:], crc32.Checksum(h[offAttributes:], castagnoli))
	return Batch(h)
}

// Reuse empties the builder and has it encode into buf's capacity (its
// contents are overwritten), so a buffer of about the batch's size is
// taken once instead of grown record by record.
func (b *Builder) Reuse(buf []byte) {
	b.buf = buf[:0]
	b.count = 0
}

// Release empties the builder and returns its buffer, for another builder's
// Reuse; a batch built before is invalid from then on.
func (b *Builder) Release() []byte {
	buf := b.buf
	b.buf, b.count = nil, 0
	return buf
}

// Reset empties the builder, keeping its buffer for reuse.
func (b *Builder) Reset() {
	b.buf = b.buf[:0]
	b.count = 0
}

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func bytesLen(p []byte) int {
	if p == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(p))) + len(p)
}

func appendBytes(buf, p []byte) []byte {
	if p == nil {
		return binary.AppendVarint(buf, -1)
	}
	buf = binary.AppendVarint(buf, int64(len(p)))
	return append(buf, p...)
}
