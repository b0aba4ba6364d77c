// Package recordbatch is tidemark's record-batch wire and disk format:
// encoding (Builder), a zero-copy view (Batch), validation, and helpers for
// concatenations of batches.
//
// The format is Kafka's magic-2 batch. A batch is written once, by the
// producing client, and never re-encoded: the leader assigns offsets and
// stamps its leader epoch by patching baseOffset and partitionLeaderEpoch in
// place, which the CRC does not cover, and followers store the leader's bytes
// as they arrive.
//
// Fixed header, 61 bytes, big-endian:
//
//	offset size field
//	0      8    baseOffset
//	8      4    batchLength (bytes after this field)
//	12     4    partitionLeaderEpoch
//	16     1    magic (2)
//	17     4    crc (CRC-32C of bytes 21..end)
//	21     2    attributes (bits 0-2 compression, bit 3 timestamp type)
//	23     4    lastOffsetDelta
//	27     8    firstTimestamp
//	35     8    maxTimestamp
//	43     8    producerId
//	51     2    producerEpoch
//	53     4    baseSequence
//	57     4    recordCount
//	61     ...  records
//
// Only uncompressed batches are accepted. tidemark has no log compaction, so
// record offset deltas are dense: record i has offsetDelta i.
package recordbatch
