package logstore

import (
	"testing"
	"time"
)

// noTimestamp is a record timestamp of -1, Kafka's NO_TIMESTAMP: a batch
// whose records all carry it has maxTimestamp -1 and gets no time-index
// entry.
const noTimestamp = -1

// A segment whose records have no timestamp has an empty time index, as
// Kafka's has. A clean restart must trust it like any other: it rebuilt
// every such segment's indexes, reading the whole log, at every restart.
func TestACleanReopenTrustsSegmentsWhoseRecordsHaveNoTimestamp(t *testing.T) {
	fsys, clk := newMem(t), newClock()
	l := openLog(t, fsys, smallConfig(), clk)
	for range 12 {
		appendLeader(t, l, plain(1, 400, noTimestamp), 0)
	}
	leo := l.LogEndOffset()
	if n := l.Stats().Segments; n < 3 {
		t.Fatalf("%d segments; the test needs 3", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), Now: clk.Now, CleanShutdown: true})
	if got := r.Stats().RebuiltIndexes; got != 0 || r.LogEndOffset() != leo {
		t.Fatalf("a clean reopen rebuilt %d indexes (want 0); LEO %d (want %d)", got, r.LogEndOffset(), leo)
	}
	readAll(t, r, 0, leo, 1<<20)
}

// An empty time index is trusted only when no batch has a timestamp: one
// that lost its entries (a segment with timestamps) is still rebuilt.
func TestACleanReopenRebuildsAnEmptyTimeIndexOfTimestampedRecords(t *testing.T) {
	fsys, clk := newMem(t), newClock()
	l := openLog(t, fsys, smallConfig(), clk)
	appendLeader(t, l, plain(1, 400, 5000), 0)
	for range 11 {
		appendLeader(t, l, plain(1, 400, noTimestamp), 0)
	}
	first := l.segments()[0]
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Open(first.timeIndex.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), Now: clk.Now, CleanShutdown: true})
	if got := r.Stats().RebuiltIndexes; got != 1 {
		t.Fatalf("rebuilt %d indexes; want the emptied time index's segment", got)
	}
	if got := r.segments()[0].maxTS.Load(); got != 5000 {
		t.Fatalf("first segment's largest timestamp %d after the rebuild; want 5000", got)
	}
}

// segment.ms counts from the first batch's timestamp after a restart; a
// batch without one counts from the load, as Kafka counts from the
// segment's creation. Read as a time, -1 is 1970: every restart rolled
// the active segment at its next append.
func TestARestartDoesNotRollASegmentWhoseRecordsHaveNoTimestamp(t *testing.T) {
	fsys, clk := newMem(t), newClock()
	cfg := smallConfig()
	cfg.SegmentMs = time.Hour
	l := openLog(t, fsys, cfg, clk)
	appendLeader(t, l, plain(1, 10, noTimestamp), 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	r := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, Now: clk.Now, CleanShutdown: true})
	appendLeader(t, r, plain(1, 10, noTimestamp), 0)
	if n := r.Stats().Segments; n != 1 {
		t.Fatalf("%d segments a minute into a segment.ms of an hour; want 1", n)
	}
	clk.Advance(time.Hour)
	appendLeader(t, r, plain(1, 10, noTimestamp), 0)
	if n := r.Stats().Segments; n != 2 {
		t.Fatalf("%d segments once segment.ms passed; want 2", n)
	}
}
