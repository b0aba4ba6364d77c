package group

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// offsetValueV builds an offset commit value of a version as Kafka lays it
// out: v0 and v2 offset, metadata, commit timestamp; v1 those and an
// expire timestamp; v3 offset, leader epoch, metadata, commit timestamp.
func offsetValueV(version int16, v OffsetValue, expire int64) []byte {
	var w writer
	w.i16(version)
	w.i64(v.Offset)
	if version >= 3 {
		w.i32(v.LeaderEpoch)
	}
	w.str(v.Metadata)
	w.i64(v.CommitTimestamp)
	if version == 1 {
		w.i64(expire)
	}
	return w.b
}

// Every version of the offset commit value Kafka wrote before its
// flexible ones reads back, as Kafka's reader accepts them: a version
// without a leader epoch reads it as -1, and only v1 carries an expire
// timestamp (-1 is none). Before, v0 and v2 were refused and their
// offsets lost at the next load.
func TestEveryOffsetValueVersionReads(t *testing.T) {
	base := OffsetValue{Offset: 42, LeaderEpoch: 7, Metadata: "meta", CommitTimestamp: 1_700_000_000_000}
	noEpoch := base
	noEpoch.LeaderEpoch = -1
	expiring := noEpoch
	expiring.ExpireTimestamp = 1_700_000_060_000
	for _, c := range []struct {
		name  string
		value []byte
		want  OffsetValue
	}{
		{"v0", offsetValueV(0, base, 0), noEpoch},
		{"v1", offsetValueV(1, base, expiring.ExpireTimestamp), expiring},
		{"v1 without expiry", offsetValueV(1, base, -1), noEpoch},
		{"v2", offsetValueV(2, base, 0), noEpoch},
		{"v3", offsetValueV(3, base, 0), base},
		{"v3 as written", EncodeOffset(base), base},
		{"v1 as written", EncodeOffset(expiring), expiring},
	} {
		got, err := DecodeOffset(c.value)
		if err != nil || got != c.want {
			t.Errorf("%s: read %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	// What tidemark writes is v3, or v1 with an expiry, byte for byte as
	// Kafka lays them out.
	if got, want := EncodeOffset(base), offsetValueV(3, base, 0); !bytes.Equal(got, want) {
		t.Errorf("v3 written as %x, want %x", got, want)
	}
	if got, want := EncodeOffset(expiring), offsetValueV(1, base, expiring.ExpireTimestamp); !bytes.Equal(got, want) {
		t.Errorf("v1 written as %x, want %x", got, want)
	}
}

// A version this broker does not know, or a value cut short, is an error
// naming it, not a crash.
func TestAnUnknownOffsetValueVersionIsAnError(t *testing.T) {
	base := OffsetValue{Offset: 42, Metadata: "meta", CommitTimestamp: 1}
	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"v5", offsetValueV(5, base, 0), "unknown offset commit value version 5"},
		{"v-1", offsetValueV(-1, base, 0), "unknown offset commit value version -1"},
		{"empty", nil, "offset value: truncated"},
		{"v2 cut short", offsetValueV(2, base, 0)[:12], "offset value v2: truncated"},
		{"v0 with trailing bytes", append(offsetValueV(0, base, 0), 0), "offset value v0: 1 trailing bytes"},
	} {
		if got, err := DecodeOffset(c.value); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: read %+v, %v; want an error with %q", c.name, got, err, c.want)
		}
	}
}

// lockedBuffer is a log sink the coordinator's goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A load reads offsets of every version, and skips, with a warning naming
// it, a record of a version it does not know: the other groups of the
// partition load.
func TestALoadReadsEveryOffsetVersionAndSkipsAnUnknownOne(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	base := OffsetValue{Offset: 9, LeaderEpoch: 4, Metadata: "m", CommitTimestamp: time.Now().UnixMilli()}
	for i, v := range []int16{0, 1, 2, 3, 9} {
		group := "g" + string(rune('0'+v))
		h.logs[0] = append(h.logs[0], recordbatch.Record{Offset: int64(i), Key: OffsetKey(group, "orders", 0), Value: offsetValueV(v, base, -1)})
	}
	var logs lockedBuffer
	c := New(Options{Host: h, Tick: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g0"); return code == kerr.None })
	for _, g := range []string{"g0", "g1", "g2", "g3"} {
		r, code := fetchErr(s, g)
		if code != kerr.None || len(r.GetTopics()) != 1 || r.GetTopics()[0].GetPartitions()[0].GetCommittedOffset() != 9 {
			t.Errorf("%s after the load: %v %s, want offset 9", g, r, code)
		}
	}
	if r, _ := fetchErr(s, "g9"); len(r.GetTopics()) != 0 {
		t.Errorf("g9, of an unknown version, loaded: %v", r)
	}
	if out := logs.String(); !strings.Contains(out, "unknown offset commit value version 9") || !strings.Contains(out, "offset=4") {
		t.Errorf("the skipped record was not logged with its version and offset:\n%s", out)
	}
}

// An offset commit record carries its topic's id in a topic_id header
// only; its key and value stay Kafka's, and one without a known id has no
// header at all, as Kafka writes it.
func TestAnOffsetRecordCarriesItsTopicIDInAHeader(t *testing.T) {
	v := OffsetValue{Offset: 42, LeaderEpoch: 7, Metadata: "meta", CommitTimestamp: 1_700_000_000_000}
	for _, id := range []string{"id-1", ""} {
		var b recordbatch.Builder
		appendOffset(&b, "g", TP{"orders", 3}, v, id)
		for rec, err := range b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence).Records() {
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec.Key, OffsetKey("g", "orders", 3)) || !bytes.Equal(rec.Value, offsetValueV(3, v, 0)) {
				t.Errorf("id %q: key %x value %x, not Kafka's", id, rec.Key, rec.Value)
			}
			if got := offsetTopicID(rec.Headers); got != id {
				t.Errorf("topic id read back %q, want %q", got, id)
			}
			if id == "" && len(rec.Headers) != 0 {
				t.Errorf("a record without a known id has headers %v", rec.Headers)
			}
		}
	}
}
