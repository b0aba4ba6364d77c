package logstore

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// TestManagerCrashSimulation runs random appends, flushes, checkpoints,
// DeleteRecords, truncations (to an offset, and full ones), epoch changes,
// retention and deletions with re-creation against a Manager on the
// in-memory FS, loses power at the end (CrashClone) and reopens the data
// dir. The partition must open; nothing flushed and checkpointed may be
// lost; the log start may not rise past what the log had (hiding records),
// nor fall below the checkpointed one; every batch read is the one last
// written at its offset; the log takes appends. It found a recreated
// partition taking the deleted one's log start, and a damaged segment below
// the log start emptying the log.
//
// TIDEMARK_CRASH_RUNS=n runs n seeds (for a longer soak); by default a
// time budget bounds the run.
func TestManagerCrashSimulation(t *testing.T) {
	seeds, budget := uint64(math.MaxUint64), 8*time.Second
	if n, err := strconv.ParseUint(os.Getenv("TIDEMARK_CRASH_RUNS"), 10, 64); err == nil {
		seeds, budget = n, time.Hour
	}
	deadline := time.Now().Add(budget)
	runs := 0
	for seed := uint64(1); seed <= seeds && time.Now().Before(deadline); seed++ {
		managerCrashRun(t, seed, false)
		runs++
	}
	if runs < 50 {
		t.Fatalf("only %d runs", runs)
	}
	t.Logf("%d crash runs", runs)
}

// TestManagerCrashSimulationOfAFollower is TestManagerCrashSimulation with
// the log a follower's copying a compacted leader: batches fetched with gaps
// between them. Nothing flushed may be lost either, though the checkpointed
// recovery point lags the flush: before, loading cut the log at the first
// gap above it, flushed records and all.
func TestManagerCrashSimulationOfAFollower(t *testing.T) {
	seeds, budget := uint64(math.MaxUint64), 8*time.Second
	if n, err := strconv.ParseUint(os.Getenv("TIDEMARK_CRASH_RUNS"), 10, 64); err == nil {
		seeds, budget = n, time.Hour
	}
	deadline := time.Now().Add(budget)
	runs := 0
	for seed := uint64(1); seed <= seeds && time.Now().Before(deadline); seed++ {
		managerCrashRun(t, seed, true)
		runs++
	}
	if runs < 50 {
		t.Fatalf("only %d runs", runs)
	}
	t.Logf("%d crash runs", runs)
}

// managerCrashRun runs one simulation; follower appends fetched batches,
// with gaps, where the log would otherwise lead.
func managerCrashRun(t *testing.T, seed uint64, follower bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	mem := newMem(t)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	m := openManager(t, mem, hw)
	cfg := smallConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	l, err := m.GetOrCreate(tpA, cfg)
	if err != nil {
		t.Fatal(err)
	}
	history := map[int64][]byte{}
	epoch := int32(0)
	var durable int64 // the checkpointed recovery point: synced below it
	var ckStart int64 // the checkpointed log start
	var flushed int64 // synced below it, checkpointed or not
	for range 20 + rng.IntN(80) {
		switch r := rng.IntN(100); {
		case r < 50 && follower:
			b := recordbatch.Batch(plain(1+rng.IntN(4), rng.IntN(150), 1000).build())
			gap := rng.Int64N(4) // the leader's cleaner left a gap, or not
			b.SetBaseOffset(l.LogEndOffset() + gap)
			b.SetPartitionLeaderEpoch(epoch)
			// The fetcher's way (the flush left to FlushGaps, done or not
			// before the crash), or one that flushes a gap on return.
			appendFn := l.AppendAsFollowerUnflushed
			flushes := rng.IntN(2) == 0
			if flushes {
				appendFn = l.AppendAsFollower
			}
			if _, err := appendFn(b); err != nil {
				t.Fatalf("seed %d: append: %v", seed, err)
			}
			if flushes && gap > 0 {
				flushed = l.LogEndOffset()
			}
			history[b.BaseOffset()] = bytes.Clone(b)
		case r < 50:
			info, err := l.AppendAsLeader(plain(1+rng.IntN(4), rng.IntN(150), 1000).build(), epoch)
			if err != nil {
				t.Fatalf("seed %d: append: %v", seed, err)
			}
			res, _ := l.Read(info.FirstOffset, 1, l.LogEndOffset())
			history[info.FirstOffset] = bytes.Clone(res.Records)
		case r < 60:
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			flushed = l.LogEndOffset()
		case r < 68:
			if err := m.CheckpointRecoveryPoints(); err != nil {
				t.Fatal(err)
			}
			durable = l.RecoveryPoint()
			ckStart = l.LogStartOffset()
		case r < 76:
			leo := l.LogEndOffset()
			if leo > l.LogStartOffset() {
				off := l.LogStartOffset() + rng.Int64N(leo-l.LogStartOffset()+1)
				if err := l.AdvanceLogStartOffset(off, leo); err != nil {
					t.Fatalf("seed %d: advance: %v", seed, err)
				}
				if err := m.CheckpointRecoveryPoints(); err != nil {
					t.Fatal(err)
				}
				durable = l.RecoveryPoint()
				ckStart = l.LogStartOffset()
			}
		case r < 82:
			leo := l.LogEndOffset()
			if leo > 0 {
				off := rng.Int64N(leo + 1)
				if _, err := l.TruncateTo(off); err != nil {
					t.Fatalf("seed %d: truncate: %v", seed, err)
				}
				for k := range history {
					// Below the first segment it restarted the log empty.
					if k >= l.LogEndOffset() || l.LogEndOffset() == l.segments()[0].base {
						delete(history, k)
					}
				}
				durable = min(durable, l.LogEndOffset())
				flushed = min(flushed, l.LogEndOffset())
				ckStart = min(ckStart, l.LogStartOffset())
			}
		case r < 88 && follower:
			epoch++ // the next fetched batches carry it
		case r < 88:
			epoch++
			if err := l.AssignEpochStartOffset(epoch); err != nil {
				t.Fatal(err)
			}
		case r < 92:
			if _, err := l.DeleteOldSegments(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
		case r < 95:
			at := l.LogEndOffset() + rng.Int64N(20)
			if err := l.TruncateFullyAndStartAt(at); err != nil {
				t.Fatal(err)
			}
			history = map[int64][]byte{}
			durable, ckStart, flushed = at, at, at
		case r < 97:
			if err := m.Delete(tpA); err != nil {
				t.Fatal(err)
			}
			if l, err = m.GetOrCreate(tpA, cfg); err != nil {
				t.Fatal(err)
			}
			history = map[int64][]byte{}
			durable, ckStart, flushed, epoch = 0, 0, 0, 0
		default:
			hw.set(tpA, l.LogEndOffset())
			if err := m.CheckpointHighWatermarks(); err != nil {
				t.Fatal(err)
			}
		}
	}
	memStart := l.LogStartOffset()
	crashed := mem.CrashClone(seed)
	m.Abandon()
	m2 := openManager(t, crashed, &hwTable{m: map[TopicPartition]int64{}})
	defer m2.Close()
	r, ok := m2.Log(tpA)
	if !ok {
		t.Fatalf("seed %d: partition offline: %v", seed, m2.Offline())
	}
	if follower {
		// A log cut in a gap ends with its last batch on disk, where
		// loading finds its end: the records to keep are the batches
		// ending at or below what was flushed.
		want := int64(0)
		for _, b := range history {
			if end := recordbatch.Batch(b).NextOffset(); end <= max(durable, flushed) {
				want = max(want, end)
			}
		}
		if r.LogEndOffset() < want {
			t.Fatalf("seed %d: flushed records lost: LEO %d below %d (last flush's end %d, checkpointed recovery point %d)", seed, r.LogEndOffset(), want, flushed, durable)
		}
	} else if r.LogEndOffset() < max(durable, flushed) {
		t.Fatalf("seed %d: flushed records lost: LEO %d below the checkpointed recovery point %d or the last flush's %d (log start %d, checkpointed %d)",
			seed, r.LogEndOffset(), durable, flushed, r.LogStartOffset(), ckStart)
	}
	if r.LogStartOffset() > r.LogEndOffset() || (r.LogStartOffset() < ckStart && r.LogEndOffset() >= ckStart) {
		t.Fatalf("seed %d: log start %d, LEO %d, checkpointed start %d", seed, r.LogStartOffset(), r.LogEndOffset(), ckStart)
	}
	// Above both the log's start and the checkpointed one only when
	// clamped to a LEO that lost its tail.
	if hi := max(memStart, ckStart); r.LogStartOffset() > hi && r.LogEndOffset() > hi {
		t.Fatalf("seed %d: log start %d above %d and %d hides records up to LEO %d", seed, r.LogStartOffset(), memStart, ckStart, r.LogEndOffset())
	}
	read := readAll
	if follower {
		read = readWithGaps
	}
	for _, b := range read(t, r, r.LogStartOffset(), r.LogEndOffset(), 4000) {
		if !bytes.Equal(b, history[b.BaseOffset()]) {
			t.Fatalf("seed %d: batch at %d is not the one last written there", seed, b.BaseOffset())
		}
	}
	appendLeader(t, r, plain(2, 10, 1), epoch+1)
}

// A data dir and a partition directory created on a fresh disk are durable
// in their parents before anything is written in them: a power loss after
// the log's records were flushed keeps them, the directories and all.
// Before, nothing synced a new directory's parent, and on a file system
// that does not order metadata the partition, or the whole data dir,
// could vanish with its flushed files.
func TestNewDirectoriesSurviveAPowerLoss(t *testing.T) {
	for seed := range uint64(16) {
		mem := vfs.NewMem()
		open := func(fsys vfs.FS) *Manager {
			m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/disks/d0/data", HighWatermark: (&hwTable{m: map[TopicPartition]int64{}}).get,
				NoBackground: true, ConfigFor: func(string) Config { return smallConfig() }})
			if err != nil {
				t.Fatalf("seed %d: OpenManager: %v", seed, err)
			}
			return m
		}
		m := open(mem)
		l, err := m.GetOrCreate(tpA, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		fill(t, l, 5, 3, 50)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		leo := l.LogEndOffset()
		m2 := open(mem.CrashClone(seed))
		l2, ok := m2.Log(tpA)
		if !ok || l2.LogEndOffset() != leo {
			t.Fatalf("seed %d: after a power loss the log of %v is there: %v, want LEO %d", seed, tpA, ok, leo)
		}
		m2.Close()
		m.Close()
	}
}
