package logstore

import (
	"testing"

	"tidemark.io/services/recordbatch"
)

func TestTruncateInsideActiveSegment(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	for range 5 {
		appendLeader(t, l, plain(4, 10, 1), 0) // [0-3] [4-7] [8-11] [12-15] [16-19]
	}
	cases := []struct{ to, want int64 }{
		{25, 20}, // beyond the LEO: nothing
		{20, 20}, // at the LEO: nothing
		{16, 16}, // batch boundary
		{14, 12}, // mid-batch: the whole batch goes
		{13, 12},
	}
	for _, c := range cases {
		got, err := l.TruncateTo(c.to)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want || l.LogEndOffset() != c.want {
			t.Fatalf("TruncateTo(%d) = %d, LEO %d; want %d", c.to, got, l.LogEndOffset(), c.want)
		}
		if c.want > 0 {
			readAll(t, l, 0, c.want, 1<<20)
		}
		if _, err := l.Read(c.want+1, 100, 100); err == nil {
			t.Fatalf("read beyond the new LEO %d succeeded", c.want)
		}
	}
	info := appendLeader(t, l, plain(2, 10, 1), 1)
	if info.FirstOffset != 12 {
		t.Fatalf("append after truncation at %d", info.FirstOffset)
	}
	readAll(t, l, 0, l.LogEndOffset(), 1<<20)
}

func TestTruncateIntoOlderSegment(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	leo := fill(t, l, 40, 3, 40)
	segs := l.segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	target := segs[1].base + 4 // inside the second segment, mid-batch (batches are 3 records)
	wantLEO := target - (target-segs[1].base)%3
	got, err := l.TruncateTo(target)
	if err != nil {
		t.Fatal(err)
	}
	if got != wantLEO {
		t.Fatalf("TruncateTo(%d) = %d, want %d", target, got, wantLEO)
	}
	if n := len(l.segments()); n != 2 {
		t.Fatalf("%d segments left, want 2", n)
	}
	act := l.active()
	if act.index.mem == nil || act.timeIndex.mem == nil {
		t.Fatal("the truncated segment's indexes were not reactivated")
	}
	readAll(t, l, 0, got, 1<<20)
	// The log keeps working: appends go to the reactivated segment and roll on.
	for range 20 {
		appendLeader(t, l, plain(3, 40, 2000), 1)
	}
	readAll(t, l, 0, l.LogEndOffset(), 1<<20)
	if l.LogEndOffset() != got+60 || leo == got {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	// Truncating exactly at a segment base empties that segment.
	base := l.segments()[2].base
	if got, _ := l.TruncateTo(base); got != base || l.active().base != base || l.active().size.Load() != 0 {
		t.Fatalf("truncate to base %d: got %d, active %d size %d", base, got, l.active().base, l.active().size.Load())
	}
}

func TestTruncateUpdatesEpochsProducersAndRecoveryPoint(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	appendLeader(t, l, batchSpec{records: 2, valueSize: 5, ts: 1, pid: 7, epoch: 0, seq: 0}, 1)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	appendLeader(t, l, batchSpec{records: 2, valueSize: 5, ts: 1, pid: 7, epoch: 0, seq: 2}, 2)
	appendLeader(t, l, batchSpec{records: 2, valueSize: 5, ts: 1, pid: 7, epoch: 0, seq: 4}, 3)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if e := l.EpochEntries(); !equalEntries(e, []EpochEntry{{1, 0}}) {
		t.Fatalf("epochs after truncation %v", e)
	}
	if l.RecoveryPoint() != 2 {
		t.Fatalf("recovery point %d", l.RecoveryPoint())
	}
	// seq 2 was truncated away: sending it again is a new append, not a duplicate.
	info := appendLeader(t, l, batchSpec{records: 2, valueSize: 5, ts: 1, pid: 7, epoch: 0, seq: 2}, 3)
	if info.Duplicate || info.FirstOffset != 2 {
		t.Fatalf("re-sent batch: %+v", info)
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	l := openLog(t, newMem(t), smallConfig(), newClock())
	fill(t, l, 30, 3, 40)
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || l.RecoveryPoint() != 500 || len(l.segments()) != 1 {
		t.Fatalf("after full truncation: %+v", l.Stats())
	}
	if len(l.EpochEntries()) != 0 {
		t.Fatal("epoch cache not cleared")
	}
	if _, err := l.Read(10, 100, 1000); err == nil {
		t.Fatal("old data readable")
	}
	b := plain(2, 10, 1).build()
	recordbatch.Batch(b).SetBaseOffset(500)
	recordbatch.Batch(b).SetPartitionLeaderEpoch(9)
	if _, err := l.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	readAll(t, l, 500, 502, 100)
	// TruncateTo below the first segment does the same.
	if got, err := l.TruncateTo(100); err != nil || got != 100 || l.LogStartOffset() != 100 || l.LogEndOffset() != 100 {
		t.Fatalf("TruncateTo below the log: %d, %v, %+v", got, err, l.Stats())
	}
}

// TestTruncateAtLEODropsEmptyEpoch is a replica that led epoch 1 without
// writing and then follows a leader whose log has no epoch 1: truncating to
// its LEO removes no record, but must drop the epoch entry at the LEO (and
// persist that), or it keeps fetching with last fetched epoch 1 and the
// leader keeps answering with the same divergence.
func TestTruncateAtLEODropsEmptyEpoch(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, smallConfig(), newClock())
	appendLeader(t, l, plain(2, 10, 1), 0)
	if err := l.AssignEpochStartOffset(1); err != nil {
		t.Fatal(err)
	}
	if got := l.EpochEntries(); !equalEntries(got, []EpochEntry{{0, 0}, {1, 2}}) {
		t.Fatalf("entries %v", got)
	}
	for _, to := range []int64{2, 5} { // at the LEO, and beyond it
		leo, err := l.TruncateTo(to)
		if err != nil || leo != 2 {
			t.Fatalf("TruncateTo(%d) = %d, %v; want 2", to, leo, err)
		}
		if got := l.EpochEntries(); !equalEntries(got, []EpochEntry{{0, 0}}) {
			t.Fatalf("TruncateTo(%d): entries %v, want [{0 0}]", to, got)
		}
		got, found, err := readEpochCheckpoint(fsys, testDir)
		if err != nil || !found || !equalEntries(got, []EpochEntry{{0, 0}}) {
			t.Fatalf("TruncateTo(%d): checkpoint %v (%v %v)", to, got, found, err)
		}
	}
	readAll(t, l, 0, 2, 1<<20)
	if l.LatestEpoch() != 0 {
		t.Fatalf("latest epoch %d", l.LatestEpoch())
	}
}
