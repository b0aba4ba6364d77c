package client

import (
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// decodeRecords turns fetched batches into records at or after from, and
// returns the offset after the last whole batch and that batch's leader
// epoch (-1 when there was none). A batch may start before
// from (the broker sends whole batches); its earlier records are skipped. A
// partial batch at the end (cut by the size limit) is ignored and fetched
// again next time.
func decodeRecords(topic string, partition int32, buf []byte, from int64) ([]Record, int64, int32, error) {
	whole, torn := recordbatch.SplitTorn(buf)
	if len(whole) == 0 && len(torn) > 0 {
		return nil, from, -1, kerr.New(kerr.CorruptMessage, "%s-%d: fetched data at offset %d holds no whole batch", topic, partition, from)
	}
	next, lastEpoch := from, int32(-1)
	// Room for every record up front: grown record by record, the slice
	// was a consumer's largest allocation (twice the records' size, copied).
	// A batch header's count may lie; then append still grows it.
	n := 0
	for b, err := range recordbatch.All(whole) {
		if err != nil {
			break
		}
		if b.NextOffset() > from {
			n += int(max(0, min(b.RecordCount(), int32(len(b)))))
		}
	}
	out := make([]Record, 0, n)
	for b, err := range recordbatch.All(whole) {
		if err != nil {
			return out, next, lastEpoch, err
		}
		if b.NextOffset() <= from {
			continue
		}
		// A compacted topic's batches may have lost records.
		if err := b.ValidateStored(); err != nil {
			return out, next, lastEpoch, err
		}
		epoch := b.PartitionLeaderEpoch()
		logAppend := b.TimestampType() == recordbatch.LogAppendTime
		for r, err := range b.Records() {
			if err != nil {
				return out, next, lastEpoch, err
			}
			if r.Offset < from {
				continue
			}
			ts := r.Timestamp
			if logAppend {
				ts = b.MaxTimestamp()
			}
			out = append(out, Record{
				Topic: topic, Partition: partition, Offset: r.Offset, LeaderEpoch: epoch,
				Timestamp: time.UnixMilli(ts), Key: r.Key, Value: r.Value, Headers: r.Headers,
			})
		}
		next, lastEpoch = b.NextOffset(), b.PartitionLeaderEpoch()
	}
	return out, next, lastEpoch, nil
}
