package logstore

import (
	"testing"

	"tidemark.io/services/recordbatch"
)

// appendWithGaps appends, as a follower of a compacted leader, n batches of
// 3 records starting at from, each after a gap of 2 offsets, and returns
// their base offsets.
func appendWithGaps(t testing.TB, l *Log, from int64, n int) []int64 {
	t.Helper()
	return appendWithGapsBy(t, l.AppendAsFollower, from, n)
}

// appendWithGapsUnflushed is appendWithGaps leaving the batches unflushed.
func appendWithGapsUnflushed(t testing.TB, l *Log, from int64, n int) []int64 {
	t.Helper()
	return appendWithGapsBy(t, l.AppendAsFollowerUnflushed, from, n)
}

func appendWithGapsBy(t testing.TB, appendFn func([]byte) (AppendInfo, error), from int64, n int) []int64 {
	t.Helper()
	var bases []int64
	next := from
	for range n {
		next += 2
		if _, err := appendFn(followerBatch(next, 3, 60)); err != nil {
			t.Fatalf("AppendAsFollower(%d): %v", next, err)
		}
		bases = append(bases, next)
		next += 3
	}
	return bases
}

// A follower that fetched cleaned data (gaps between batches) and flushed
// it keeps it through a kill -9 and a power loss, though the recovery-point
// checkpoint, written once a minute, lags the flush: the data after each gap
// is known durable. Before, loading cut the log at the first gap above the
// checkpointed recovery point, flushed records and all.
func TestFlushedRecordsAfterGapsSurviveACrash(t *testing.T) {
	for _, mode := range []string{"kill -9", "power loss"} {
		t.Run(mode, func(t *testing.T) {
			for seed := range uint64(8) {
				fsys := newMem(t)
				l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig(), RecoveryPoint: 0})
				for off := int64(0); off < 12; off += 3 {
					if _, err := l.AppendAsFollower(followerBatch(off, 3, 60)); err != nil {
						t.Fatal(err)
					}
				}
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				checkpointed := l.RecoveryPoint() // the last checkpoint written
				bases := appendWithGaps(t, l, 12, 30)
				if len(l.segments()) < 3 {
					t.Fatalf("only %d segments", len(l.segments()))
				}
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				leo := l.LogEndOffset()
				after := fsys
				if mode == "kill -9" {
					l.Abandon()
				} else {
					after = fsys.CrashClone(seed)
				}
				l2 := openLogOpts(t, Options{FS: after, Dir: testDir, Config: smallConfig(), RecoveryPoint: checkpointed})
				if got := l2.LogEndOffset(); got != leo {
					t.Fatalf("seed %d: LEO %d after the crash, want %d (flushed records after a gap cut; %d recovery truncations)",
						seed, got, leo, l2.Stats().RecoveredTruncations)
				}
				for _, b := range bases {
					checkReadAt(t, l2, b)
				}
				l2.Close()
				if mode == "kill -9" {
					break // one outcome only
				}
			}
		})
	}
}

// Unflushed data after a gap above everything known durable is still not
// trusted after a power loss: the flushed prefix survives, and whatever is
// kept after it reads back valid and in order. A truncation lowers the
// flushed-offset record before new data is written over the range it
// covered, so the new, unsynced data is not trusted by the old record.
func TestGapsAboveTheFlushedOffsetAreTrustedOnlyOnceFlushed(t *testing.T) {
	for seed := range uint64(16) {
		fsys := newMem(t)
		l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: smallConfig()})
		appendWithGaps(t, l, 0, 20)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		flushed := l.LogEndOffset()
		cut := flushed - 40
		if _, err := l.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		if m, err := readFlushedOffset(fsys, testDir); err != nil || m > l.LogEndOffset() {
			t.Fatalf("seed %d: flushed offset %d (%v) above the LEO %d after a truncation", seed, m, err, l.LogEndOffset())
		}
		truncatedTo := l.LogEndOffset()
		appendWithGapsUnflushed(t, l, truncatedTo, 20)
		l2 := openLogOpts(t, Options{FS: fsys.CrashClone(seed), Dir: testDir, Config: smallConfig()})
		if got := l2.LogEndOffset(); got < truncatedTo {
			t.Fatalf("seed %d: LEO %d, below the flushed %d", seed, got, truncatedTo)
		}
		var prev recordbatch.Batch
		for off := int64(0); off < l2.LogEndOffset(); {
			res, err := l2.Read(off, 1<<20, l2.LogEndOffset())
			if err != nil {
				t.Fatalf("seed %d: Read(%d): %v", seed, off, err)
			}
			for b, err := range recordbatch.All(res.Records) {
				if err != nil || b.Validate() != nil {
					t.Fatalf("seed %d: torn or invalid batch read at %d", seed, off)
				}
				if prev != nil && b.BaseOffset() < prev.NextOffset() {
					t.Fatalf("seed %d: batch at %d overlaps the one before", seed, b.BaseOffset())
				}
				prev = b
			}
			off = res.NextOffset
		}
		l2.Close()
	}
}

// readWithGaps is readAll for a log compaction may have left gaps in:
// offsets need only increase, and the log may end in a gap.
func readWithGaps(t testing.TB, l *Log, from, to int64, maxBytes int) []recordbatch.Batch {
	t.Helper()
	var out []recordbatch.Batch
	for next := from; next < to; {
		res, err := l.Read(next, maxBytes, to)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		if len(res.Records) == 0 {
			break // the rest is a gap: segments rolled at offsets no batch took
		}
		for b, err := range recordbatch.All(res.Records) {
			if err != nil {
				t.Fatalf("Read(%d) returned torn data: %v", next, err)
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("Read(%d) returned an invalid batch: %v", next, err)
			}
			if b.LastOffset() < next || (len(out) > 0 && b.BaseOffset() < out[len(out)-1].NextOffset()) {
				t.Fatalf("batch [%d, %d] read at %d is out of order", b.BaseOffset(), b.LastOffset(), next)
			}
			out = append(out, b)
		}
		next = res.NextOffset
	}
	return out
}

// A follower copying a compacted leader's cleaned log, with no periodic
// flush (flush.ms unset, Kafka's default), keeps every record it appended
// through a kill -9: the appends after a gap were flushed before they
// returned, so the flushed-offset checkpoint covers their gaps though the
// recovery-point checkpoint never moved. Before, loading cut the log at the
// first gap, and a kill -9 of every replica lost records the leader had
// counted as replicated.
func TestUnflushedFollowerKeepsGappedRecordsThroughAKill(t *testing.T) {
	cfg := DefaultConfig() // one segment: no roll flushes anything
	cfg.CleanupPolicy = "compact"
	fsys := newMem(t)
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg})
	bases := appendWithGaps(t, l, 0, 30)
	for range 10 { // the leader's head, not cleaned yet
		b := l.LogEndOffset()
		if _, err := l.AppendAsFollower(followerBatch(b, 3, 60)); err != nil {
			t.Fatal(err)
		}
		bases = append(bases, b)
	}
	leo := l.LogEndOffset()
	l.Abandon()
	l2 := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, RecoveryPoint: 0})
	if got := l2.LogEndOffset(); got != leo {
		t.Fatalf("LEO %d after a kill -9, want %d (%d recovery truncations)", got, leo, l2.Stats().RecoveredTruncations)
	}
	for _, b := range bases {
		checkReadAt(t, l2, b)
	}
}

// An append that puts a batch after a gap above the flushed offset is
// durable when AppendAsFollower returns, so a power loss right after it
// keeps it; AppendAsFollowerUnflushed leaves it to FlushGaps, and until then
// a power loss may still lose it, but never leaves a hole taken for a gap.
func TestFollowerAppendAfterAGapIsDurableOnReturn(t *testing.T) {
	cfg := smallConfig()
	cfg.CleanupPolicy = "compact"
	for seed := range uint64(16) {
		fsys := newMem(t)
		l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg})
		bases := appendWithGaps(t, l, 0, 20)
		leo := l.LogEndOffset()
		l2 := openLogOpts(t, Options{FS: fsys.CrashClone(seed), Dir: testDir, Config: cfg})
		if got := l2.LogEndOffset(); got != leo {
			t.Fatalf("seed %d: LEO %d after a power loss, want %d", seed, got, leo)
		}
		for _, b := range bases {
			checkReadAt(t, l2, b)
		}
		l2.Close()

		var unflushed []int64
		for off := leo + 2; off < leo+200; off += 5 {
			if _, err := l.AppendAsFollowerUnflushed(followerBatch(off, 3, 60)); err != nil {
				t.Fatal(err)
			}
			unflushed = append(unflushed, off)
		}
		l3 := openLogOpts(t, Options{FS: fsys.CrashClone(seed), Dir: testDir, Config: cfg})
		if got := l3.LogEndOffset(); got < leo {
			t.Fatalf("seed %d: LEO %d after a power loss, below the flushed %d", seed, got, leo)
		}
		kept := readWithGaps(t, l3, leo, l3.LogEndOffset(), 1<<20)
		for i, b := range kept { // a prefix: a lost batch ends the log
			if b.BaseOffset() != unflushed[i] {
				t.Fatalf("seed %d: batch %d after the flush starts at %d, want %d (a hole taken for a gap)", seed, i, b.BaseOffset(), unflushed[i])
			}
		}
		l3.Close()
		if err := l.FlushGaps(); err != nil {
			t.Fatal(err)
		}
		if got, _ := readFlushedOffset(fsys, testDir); got != l.LogEndOffset() {
			t.Fatalf("seed %d: flushed offset %d after FlushGaps, LEO %d", seed, got, l.LogEndOffset())
		}
	}
}

// A truncation below the newest gap takes that gap with it: once the log
// below the new end is flushed, FlushGaps has nothing to do until another
// gap is appended. The gap was remembered, and every fetch flushed again
// until the log end passed the truncated gap's offset.
func TestATruncatedGapLeavesNothingToFlush(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CleanupPolicy = "compact"
	l := openLogOpts(t, Options{FS: newMem(t), Dir: testDir, Config: cfg})
	bases := appendWithGapsUnflushed(t, l, 0, 10)
	if _, err := l.TruncateTo(bases[3]); err != nil {
		t.Fatal(err)
	}
	if !l.GapsUnflushed() {
		t.Fatal("the gaps below the truncation point were never flushed, but FlushGaps would skip them")
	}
	if err := l.FlushGaps(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollowerUnflushed(followerBatch(l.LogEndOffset(), 3, 60)); err != nil {
		t.Fatal(err)
	}
	if l.GapsUnflushed() {
		t.Fatalf("FlushGaps would flush again after a contiguous append: newest gap %d, flushed offset %d",
			l.newestGap.Load(), l.flushedOffset.Load())
	}
}
