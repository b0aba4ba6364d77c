package logstore

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"tidemark.io/services/recordbatch"
)

// TestCrashSimulation runs random appends, flushes, truncations, epoch
// changes and retention against the in-memory FS, "loses power" at a random
// point (CrashClone keeps what was synced and a random part of the rest),
// and reopens. Nothing flushed may be lost, and nothing read back may be
// garbage: every batch validates, offsets are contiguous, and each batch is
// exactly the one last appended at its offset.
//
// TIDEMARK_CRASH_RUNS=n runs n seeds instead of 300 (for a longer soak);
// the time budget still bounds a default run.
func TestCrashSimulation(t *testing.T) {
	seeds, budget := uint64(300), 8*time.Second
	if n, err := strconv.ParseUint(os.Getenv("TIDEMARK_CRASH_RUNS"), 10, 64); err == nil {
		seeds, budget = n, time.Hour
	}
	deadline := time.Now().Add(budget)
	var runs, cut, kept int
	for seed := uint64(1); seed <= seeds && time.Now().Before(deadline); seed++ {
		o := crashRun(t, seed)
		runs++
		if o.truncations > 0 {
			cut++
		}
		if o.leo > o.durable {
			kept++
		}
	}
	t.Logf("%d crash runs: %d cut a damaged tail, %d kept unflushed data", runs, cut, kept)
	// The runs must exercise recovery, not only clean reopens.
	if runs < 50 || cut == 0 || kept == 0 {
		t.Fatalf("too little variety: %d runs, %d cut, %d kept", runs, cut, kept)
	}
}

type crashOutcome struct {
	truncations  int64
	leo, durable int64
}

func crashRun(t *testing.T, seed uint64) crashOutcome {
	rng := rand.New(rand.NewPCG(seed, 7))
	mem := newMem(t)
	cfg := smallConfig()
	cfg.SegmentBytes = int64(1024 + rng.IntN(3000))
	cfg.IndexIntervalBytes = int64(rng.IntN(600))
	if rng.IntN(4) == 0 {
		cfg.FlushMessages = int64(1 + rng.IntN(20))
	}
	clk := newClock()
	// Three seeds in four run with a cache of one to three descriptors,
	// so files are closed and reopened between nearly all operations.
	files := NewFileCache(int(seed % 4))
	l, err := Open(Options{FS: mem, Files: files, Dir: testDir, Config: cfg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	history := map[int64][]byte{} // base offset -> batch last appended there
	epoch := int32(0)
	ops := 10 + rng.IntN(120)
	for range ops {
		switch r := rng.IntN(100); {
		case r < 60:
			spec := plain(1+rng.IntN(5), rng.IntN(180), clk.Now().UnixMilli())
			if rng.IntN(3) == 0 {
				spec.pid, spec.epoch, spec.seq = 1, 0, nextSeq(l)
			}
			info, err := l.AppendAsLeader(spec.build(), epoch)
			if err != nil {
				t.Fatalf("seed %d: append: %v", seed, err)
			}
			if !info.Duplicate {
				res, err := l.Read(info.FirstOffset, 1, l.LogEndOffset())
				if err != nil {
					t.Fatal(err)
				}
				history[info.FirstOffset] = bytes.Clone(res.Records)
			}
		case r < 75:
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		case r < 82:
			if leo := l.LogEndOffset(); leo > 0 {
				if _, err := l.TruncateTo(rng.Int64N(leo + 1)); err != nil {
					t.Fatalf("seed %d: truncate: %v", seed, err)
				}
			}
		case r < 90:
			epoch++
			if err := l.AssignEpochStartOffset(epoch); err != nil {
				t.Fatal(err)
			}
		case r < 94:
			clk.Advance(time.Duration(rng.IntN(3)) * time.Hour)
		default:
			if _, err := l.DeleteOldSegments(l.RecoveryPoint()); err != nil {
				t.Fatal(err)
			}
		}
	}
	durable := l.RecoveryPoint()
	start := l.LogStartOffset()
	// The checkpoint the Manager would hold may be older than the real
	// recovery point, never newer.
	rp := rng.Int64N(durable + 1)
	crashed := mem.CrashClone(seed)
	r, err := Open(Options{FS: crashed, Files: files, Dir: testDir, Config: cfg, Now: clk.Now, RecoveryPoint: rp, LogStartOffset: start})
	if err != nil {
		t.Fatalf("seed %d: reopen after crash: %v", seed, err)
	}
	defer r.Close()
	if r.LogEndOffset() < durable {
		t.Fatalf("seed %d: lost flushed data: LEO %d after crash, %d was flushed", seed, r.LogEndOffset(), durable)
	}
	got := readAll(t, r, r.LogStartOffset(), r.LogEndOffset(), 1+rng.IntN(5000))
	cache := r.EpochEntries()
	for _, b := range got {
		want, ok := history[b.BaseOffset()]
		if !ok || !bytes.Equal(b, want) {
			t.Fatalf("seed %d: batch at %d after the crash is not the one last written there", seed, b.BaseOffset())
		}
		if !epochKnown(cache, b) {
			t.Fatalf("seed %d: batch at %d has epoch %d, which the cache %v does not cover", seed, b.BaseOffset(), b.PartitionLeaderEpoch(), cache)
		}
	}
	for _, e := range cache {
		if e.StartOffset > r.LogEndOffset() {
			t.Fatalf("seed %d: epoch entry %v beyond LEO %d", seed, e, r.LogEndOffset())
		}
	}
	out := crashOutcome{truncations: r.Stats().RecoveredTruncations, leo: r.LogEndOffset(), durable: durable}
	// The recovered log takes appends and reads them back.
	appendLeader(t, r, plain(2, 10, 1), epoch+1)
	readAll(t, r, r.LogStartOffset(), r.LogEndOffset(), 1<<20)
	return out
}

// nextSeq is the next sequence of producer 1 in l, or 0.
func nextSeq(l *Log) int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.producers.producers[1]
	if !ok || len(e.Batches) == 0 {
		return 0
	}
	return recordbatch.AddSequence(e.Batches[len(e.Batches)-1].LastSeq, 1)
}

// epochKnown reports whether the cache has b's epoch starting at or before it.
func epochKnown(cache []EpochEntry, b recordbatch.Batch) bool {
	for _, e := range cache {
		if e.Epoch == b.PartitionLeaderEpoch() && e.StartOffset <= b.BaseOffset() {
			return true
		}
	}
	return false
}
