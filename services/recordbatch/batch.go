package recordbatch

import (
	"encoding/binary"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var be = binary.BigEndian

// Batch is a zero-copy view of exactly one encoded batch. The accessors read
// the header in place; they assume len(b) >= HeaderSize, which View and
// Validate check.
type Batch []byte

// View returns buf as a Batch after checking only the framing: the header is
// present and batchLength matches len(buf). Use Validate for a full check.
func View(buf []byte) (Batch, error) {
	if err := checkFrame(buf); err != nil {
		return nil, err
	}
	return Batch(buf), nil
}

// Header accessors, one per field of the fixed header.

// BaseOffset is the offset of the first record (assigned by the leader).
func (b Batch) BaseOffset() int64 { return int64(be.Uint64(b[offBaseOffset:])) }

// BatchLength counts the bytes after the batchLength field.
func (b Batch) BatchLength() int32 { return int32(be.Uint32(b[offBatchLength:])) }

// PartitionLeaderEpoch is the epoch of the leader that appended the batch.
func (b Batch) PartitionLeaderEpoch() int32 { return int32(be.Uint32(b[offPartitionLeaderEpoch:])) }

// Magic is the format version (2).
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// CRC is the stored CRC-32C of bytes 21 to the end.
func (b Batch) CRC() uint32 { return be.Uint32(b[offCRC:]) }

// Attributes holds the compression codec and timestamp type bits.
func (b Batch) Attributes() int16 { return int16(be.Uint16(b[offAttributes:])) }

// LastOffsetDelta is the last record's offset minus BaseOffset.
func (b Batch) LastOffsetDelta() int32 { return int32(be.Uint32(b[offLastOffsetDelta:])) }

// FirstTimestamp is the timestamp record timestamp deltas are relative to.
func (b Batch) FirstTimestamp() int64 { return int64(be.Uint64(b[offFirstTimestamp:])) }

// MaxTimestamp is the largest record timestamp (or the broker's, LogAppendTime).
func (b Batch) MaxTimestamp() int64 { return int64(be.Uint64(b[offMaxTimestamp:])) }

// ProducerID is the idempotent producer's id, or NoProducerID.
func (b Batch) ProducerID() int64 { return int64(be.Uint64(b[offProducerID:])) }

// ProducerEpoch is the idempotent producer's epoch.
func (b Batch) ProducerEpoch() int16 { return int16(be.Uint16(b[offProducerEpoch:])) }

// BaseSequence is the first record's sequence number, or NoSequence.
func (b Batch) BaseSequence() int32 { return int32(be.Uint32(b[offBaseSequence:])) }

// RecordCount is the number of records.
func (b Batch) RecordCount() int32 { return int32(be.Uint32(b[offRecordCount:])) }

// Size is the number of bytes the batch occupies: LengthOverhead + batchLength.
func (b Batch) Size() int { return LengthOverhead + int(b.BatchLength()) }

// Compression returns the codec bits (0 = none, the only one supported).
func (b Batch) Compression() int { return int(b.Attributes() & compressionMask) }

// TimestampType says whether the timestamps are the producer's or the broker's.
func (b Batch) TimestampType() TimestampType {
	if b.Attributes()&timestampTypeBit != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// LastOffset is the offset of the batch's last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset is the offset just after the batch.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// HasProducerID reports whether the batch comes from an idempotent producer.
func (b Batch) HasProducerID() bool { return b.ProducerID() != NoProducerID }

// LastSequence is the sequence number of the last record. Sequences wrap at
// the int32 maximum back to 0, as in Kafka.
func (b Batch) LastSequence() int32 {
	return AddSequence(b.BaseSequence(), b.LastOffsetDelta())
}

// AddSequence returns seq+n with Kafka's wrap-around at the int32 maximum.
func AddSequence(seq, n int32) int32 {
	const maxSeq = 1<<31 - 1
	if seq > maxSeq-n {
		return n - (maxSeq - seq) - 1
	}
	return seq + n
}

// SetBaseOffset patches the base offset in place. The CRC does not cover it,
// so the batch stays valid.
func (b Batch) SetBaseOffset(off int64) { be.PutUint64(b[offBaseOffset:], uint64(off)) }

// SetPartitionLeaderEpoch patches the leader epoch in place; like the base
// offset it is outside the CRC.
func (b Batch) SetPartitionLeaderEpoch(epoch int32) {
	be.PutUint32(b[offPartitionLeaderEpoch:], uint32(epoch))
}

// computeCRC returns the CRC-32C the header should carry.
func (b Batch) computeCRC() uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }
