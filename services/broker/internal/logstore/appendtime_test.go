package logstore

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// A producer may not mark its batch LogAppendTime (Kafka: INVALID_TIMESTAMP,
// "Producer should not set timestamp type to LogAppendTime"): nothing stamps
// the broker's time into it, so its maxTimestamp (the producer's) would skip
// message.timestamp.after.max.ms and become the segment's largest timestamp,
// which time retention and ListOffsets trust.
func TestProducerLogAppendTimeBatchIsRefused(t *testing.T) {
	clk := newClock()
	now := clk.Now().UnixMilli()
	cfg := smallConfig()
	cfg.TimestampAfterMaxMs = 1_000
	l := openLog(t, newMem(t), cfg, clk)
	future := now + 10*365*24*3600*1000 // ten years ahead
	batch := plain(1, 10, future).build()
	binary.BigEndian.PutUint16(batch[21:], binary.BigEndian.Uint16(batch[21:])|0x08)
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	info, err := l.AppendAsLeader(batch, 0)
	if err == nil {
		t.Fatalf("producer's LogAppendTime batch accepted: stored max timestamp %d (broker time %d, after.max.ms 1000); segment max timestamp now %d",
			recordbatch.Batch(batch).MaxTimestamp(), now, l.active().maxTS.Load())
	}
	_ = info
	wantCode(t, err, kerr.InvalidTimestamp)
}
