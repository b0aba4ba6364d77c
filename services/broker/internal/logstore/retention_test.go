package logstore

import (
	"testing"
	"time"

	"tidemark.io/services/platform/kerr"
)

func TestRetentionByTime(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	l := openLog(t, newMem(t), cfg, clk)
	now := clk.Now().UnixMilli()
	// Old records, then fresh ones.
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, now-2*time.Hour.Milliseconds()+int64(i)), 0)
	}
	oldEnd := l.LogEndOffset()
	for i := range 20 {
		appendLeader(t, l, plain(3, 40, now+int64(i)), 0)
	}
	leo := l.LogEndOffset()
	before := l.segments()

	// Nothing passes the HW.
	n, err := l.DeleteOldSegments(0)
	if err != nil || n != 0 {
		t.Fatalf("with hw 0: deleted %d, %v", n, err)
	}
	n, err = l.DeleteOldSegments(leo)
	if err != nil {
		t.Fatal(err)
	}
	first := l.segments()[0]
	// Every segment kept holds a fresh record; every one deleted held only old ones.
	if n == 0 || first.base > oldEnd || first.maxTS.Load() < now-time.Hour.Milliseconds() {
		t.Fatalf("deleted %d; first kept segment base %d (old data ends at %d) max ts %d", n, first.base, oldEnd, first.maxTS.Load())
	}
	if len(before)-n != len(l.segments()) || l.LogStartOffset() != first.base {
		t.Fatalf("log start %d, first segment %d", l.LogStartOffset(), first.base)
	}
	if l.Stats().DeletedSegments != int64(n) {
		t.Fatalf("DeletedSegments %d", l.Stats().DeletedSegments)
	}
	readAll(t, l, l.LogStartOffset(), leo, 1<<20)
	_, err = l.Read(first.base-1, 100, leo)
	wantCode(t, err, kerr.OffsetOutOfRange)
	if e := l.EpochEntries(); len(e) != 1 || e[0].StartOffset != first.base {
		t.Fatalf("epochs not moved to the new start: %v", e)
	}
}

func TestRetentionBySizeNeverPassesHW(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionBytes = 4000
	cfg.RetentionMs = -1
	l := openLog(t, newMem(t), cfg, newClock())
	leo := fill(t, l, 60, 3, 40)
	hw := l.segments()[2].base + 1 // inside the third segment
	n, err := l.DeleteOldSegments(hw)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || l.LogStartOffset() != l.segments()[0].base || l.LogStartOffset() > hw {
		t.Fatalf("deleted %d, log start %d, hw %d", n, l.LogStartOffset(), hw)
	}
	n, err = l.DeleteOldSegments(leo)
	if err != nil {
		t.Fatal(err)
	}
	total := l.Stats().SizeBytes
	if total < cfg.RetentionBytes || total-l.segments()[0].size.Load() >= cfg.RetentionBytes {
		t.Fatalf("after size retention: %d bytes in %d segments (deleted %d)", total, len(l.segments()), n)
	}
	readAll(t, l, l.LogStartOffset(), leo, 1<<20)
}

func TestRetentionDeletesActiveSegmentByRolling(t *testing.T) {
	clk := newClock()
	cfg := smallConfig()
	cfg.RetentionMs = time.Minute
	l := openLog(t, newMem(t), cfg, clk)
	leo := fill(t, l, 5, 2, 10) // timestamps near 1970: all expired
	n, err := l.DeleteOldSegments(leo)
	if err != nil || n != 1 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if l.LogStartOffset() != leo || l.LogEndOffset() != leo || len(l.segments()) != 1 || l.active().base != leo {
		t.Fatalf("after deleting everything: %+v", l.Stats())
	}
	info := appendLeader(t, l, plain(1, 1, clk.Now().UnixMilli()), 0)
	if info.FirstOffset != leo {
		t.Fatalf("next append at %d", info.FirstOffset)
	}
}

// Segments wholly below the log start (after a crash brought back what
// retention had deleted, the log start checkpoint says where the log
// starts) are deleted by the next retention pass whatever the retention
// settings and cleanup policy, as in Kafka; the segment holding the log
// start stays.
func TestRetentionDeletesSegmentsBelowTheLogStart(t *testing.T) {
	for _, policy := range []string{"delete", "compact"} {
		fsys := newMem(t)
		cfg := smallConfig()
		cfg.RetentionMs, cfg.RetentionBytes = -1, -1
		cfg.CleanupPolicy = policy
		l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg})
		leo := fill(t, l, 40, 3, 40)
		segs := l.segments()
		if len(segs) < 4 {
			t.Fatalf("%d segments; the test needs 4", len(segs))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		start := segs[2].base + 1
		r := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, LogStartOffset: start, CleanShutdown: true})
		if got := r.segments()[0].base; got != segs[0].base {
			t.Fatalf("reopened log's first segment %d; want %d", got, segs[0].base)
		}
		n, err := r.DeleteOldSegments(leo)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 || r.segments()[0].base != segs[2].base || r.LogStartOffset() != start {
			t.Fatalf("%s: deleted %d, first segment %d, log start %d; want 2, %d, %d", policy, n, r.segments()[0].base, r.LogStartOffset(), segs[2].base, start)
		}
		if n, err := r.DeleteOldSegments(leo); err != nil || n != 0 {
			t.Fatalf("%s: a second pass deleted %d (%v)", policy, n, err)
		}
		readAll(t, r, start, leo, 1<<20)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAdvanceLogStartOffset(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	leo := fill(t, l, 40, 3, 40)
	err := l.AdvanceLogStartOffset(leo, leo-3)
	wantCode(t, err, kerr.OffsetOutOfRange)
	second := l.segments()[1].base
	if err := l.AdvanceLogStartOffset(second+1, leo); err != nil {
		t.Fatal(err)
	}
	if l.segments()[0].base != second || l.LogStartOffset() != second+1 {
		t.Fatalf("first segment %d, log start %d", l.segments()[0].base, l.LogStartOffset())
	}
	// Reading from the log start returns the batch containing it.
	res, err := l.Read(second+1, 100, leo)
	if err != nil || len(res.Records) == 0 {
		t.Fatalf("read at log start: %v", err)
	}
}
