package recordbatch

// Byte offsets of the header fields.
const (
	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21
	offLastOffsetDelta      = 23
	offFirstTimestamp       = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offRecordCount          = 57
)

const (
	// HeaderSize is the size of the fixed batch header.
	HeaderSize = 61
	// LengthOverhead is the part of a batch that batchLength does not count:
	// baseOffset and batchLength itself. A batch occupies LengthOverhead +
	// batchLength bytes.
	LengthOverhead = 12
	// MinBatchLength is the smallest legal batchLength: a header with no records.
	MinBatchLength = HeaderSize - LengthOverhead
	// Magic is the only supported format version.
	Magic = 2
	// MaxBatchSize bounds a batch's total size so that positions fit an int32,
	// as in Kafka.
	MaxBatchSize = 1<<31 - 1

	// NoProducerID marks a batch from a non-idempotent producer.
	NoProducerID = -1
	// NoProducerEpoch is the producer epoch of such a batch.
	NoProducerEpoch = -1
	// NoSequence is the base sequence of such a batch.
	NoSequence = -1
	// NoPartitionLeaderEpoch is what a client writes before the leader stamps it.
	NoPartitionLeaderEpoch = -1
)

// Attribute bits.
const (
	compressionMask  = 0x07
	timestampTypeBit = 0x08
	transactionalBit = 0x10
	controlBit       = 0x20
)

// TimestampType says who set a batch's timestamps.
type TimestampType int8

const (
	// CreateTime timestamps are set by the producer.
	CreateTime TimestampType = 0
	// LogAppendTime timestamps are set by the broker.
	LogAppendTime TimestampType = 1
)
