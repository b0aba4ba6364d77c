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
	var bases []int64
	next := from
	for range n {
		next += 2
		if _, err := l.AppendAsFollower(followerBatch(next, 3, 60)); err != nil {
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
		appendWithGaps(t, l, truncatedTo, 20) // not flushed
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
