package logstore

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// A record whose timestamp lies outside [now - before.max, now + after.max]
// is refused with INVALID_TIMESTAMP naming it and the bound, and the log is
// unchanged; one inside is taken (KIP-937).
func TestTimestampBoundsRefuseOutOfRangeRecords(t *testing.T) {
	clk := newClock()
	now := clk.Now().UnixMilli()
	cfg := smallConfig()
	cfg.TimestampBeforeMaxMs = 60_000
	cfg.TimestampAfterMaxMs = 1_000
	l := openLog(t, newMem(t), cfg, clk)
	appendLeader(t, l, plain(1, 10, now), 0)

	// The second record of this batch is 1 ms too old; the first is fine.
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: now - 59_000, Value: []byte("ok")})
	b.Append(recordbatch.Record{Timestamp: now - 60_001, Value: []byte("old")})
	old := b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
	for _, tc := range []struct {
		name  string
		batch []byte
		want  string
	}{
		{"too old", old, "record timestamp 1699999939999 is earlier than the broker's time 1700000000000 minus message.timestamp.before.max.ms 60000"},
		{"too far ahead", plain(2, 10, now+1_000).build(), "record timestamp 1700000001001 is later than the broker's time 1700000000000 plus message.timestamp.after.max.ms 1000"},
	} {
		_, err := l.AppendAsLeader(tc.batch, 0)
		wantCode(t, err, kerr.InvalidTimestamp)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.name, err, tc.want)
		}
		if l.LogEndOffset() != 1 {
			t.Fatalf("%s: refused batch moved the LEO to %d", tc.name, l.LogEndOffset())
		}
	}
	appendLeader(t, l, plain(2, 10, now+999-1), 0) // last record at now+999: inside
}

func TestTimestampBoundsIgnoreLogAppendTime(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.TimestampBeforeMaxMs = 1
	cfg.TimestampAfterMaxMs = 1
	l := openLog(t, newMem(t), cfg, clk)
	// A producer's batch marked LogAppendTime (attributes bit 3), with a
	// CreateTime far outside both bounds; the CRC covers the attributes.
	batch := plain(1, 10, 5).build()
	binary.BigEndian.PutUint16(batch[21:], binary.BigEndian.Uint16(batch[21:])|0x08)
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	if recordbatch.Batch(batch).TimestampType() != recordbatch.LogAppendTime {
		t.Fatal("test batch is not LogAppendTime")
	}
	_, err := l.AppendAsLeader(batch, 0)
	wantCode(t, err, kerr.InvalidTimestamp)
}
