package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// A follower whose log ends below its leader's log start, or is cut below
// its first segment, empties its log and starts again at the leader's
// offset (TruncateFullyAndStartAt), then appends there. Power lost at any
// file operation of that, through the Manager and its checkpoints, leaves
// a log that opens and holds either a part of the old log or the new one,
// never both, with its start, epochs and HW within it; the follower then
// starts again and appends.
func TestCrashDuringAFullTruncationLeavesOneLogOrTheOther(t *testing.T) {
	for _, at := range []int64{500, 20} { // beyond the old log, below its first segment
		t.Run(fmt.Sprint("start at ", at), func(t *testing.T) {
			crashDuringFullTruncation(t, at)
		})
	}
}

func crashDuringFullTruncation(t *testing.T, at int64) {
	errCrash := errors.New("power lost")
	mutating := vfs.OpCreate | vfs.OpWrite | vfs.OpSync | vfs.OpTruncate | vfs.OpRename | vfs.OpRemove | vfs.OpSyncDir | vfs.OpMkdir
	newBatch := func() []byte {
		b := plain(3, 30, 5000).build()
		recordbatch.Batch(b).SetBaseOffset(at)
		recordbatch.Batch(b).SetPartitionLeaderEpoch(4)
		return b
	}
	open := func(fsys vfs.FS, hw *hwTable) (*Manager, error) {
		return OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get, NoBackground: true,
			ConfigFor: func(string) Config { return smallConfig() }})
	}
	for step := 0; ; step++ {
		mem := newMem(t)
		ffs := vfs.NewFaultFS(mem)
		hw := &hwTable{m: map[TopicPartition]int64{}}
		m, err := open(ffs, hw)
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.GetOrCreate(tpA, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		leo := fill(t, l, 40, 3, 40) // several segments
		old := map[int64][]byte{}
		for _, b := range readAll(t, l, 0, leo, 1<<20) {
			old[b.BaseOffset()] = bytes.Clone(b)
		}
		if at < leo {
			// Retention moved the start past at: the first segments are gone.
			if err := l.AdvanceLogStartOffset(60, leo); err != nil {
				t.Fatal(err)
			}
			if _, err := l.DeleteOldSegments(leo); err != nil {
				t.Fatal(err)
			}
			if l.segments()[0].base <= at {
				t.Fatalf("first segment at %d, not above %d", l.segments()[0].base, at)
			}
		}
		hw.set(tpA, leo)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(m.CheckpointRecoveryPoints(), m.CheckpointHighWatermarks()); err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		l.waitRetirementsLocked() // the retired segments are renamed: the crash points start at the truncation
		l.mu.Unlock()

		ffs.Inject(vfs.Fault{Ops: mutating, Skip: step, Err: errCrash})
		err = l.TruncateFullyAndStartAt(at)
		if err == nil {
			hw.set(tpA, at)
			_, err = l.AppendAsFollower(newBatch())
		}
		if err == nil {
			err = l.Flush()
		}
		done := err == nil
		m.Abandon()
		if err != nil && !errors.Is(err, errCrash) {
			t.Fatalf("step %d: %v", step, err)
		}
		for seed := uint64(1); seed <= 4; seed++ {
			crashed := mem.CrashClone(seed + uint64(step)*10)
			m2, err := open(crashed, &hwTable{m: map[TopicPartition]int64{}})
			if err != nil {
				t.Fatalf("step %d seed %d: reopen: %v", step, seed, err)
			}
			r, ok := m2.Log(tpA)
			if !ok {
				t.Fatalf("step %d seed %d: partition offline: %v", step, seed, m2.Offline())
			}
			start, end := r.LogStartOffset(), r.LogEndOffset()
			if start > end {
				t.Fatalf("step %d seed %d: log start %d beyond LEO %d", step, seed, start, end)
			}
			var olds, news int
			cache := r.EpochEntries()
			for _, b := range readAll(t, r, start, end, 1+int(seed)*300) {
				switch {
				case bytes.Equal(b, newBatch()):
					news++
				case bytes.Equal(b, old[b.BaseOffset()]):
					olds++
				default:
					t.Fatalf("step %d seed %d: batch at %d is neither the old log's nor the new one's", step, seed, b.BaseOffset())
				}
				if !epochKnown(cache, b) {
					t.Fatalf("step %d seed %d: batch at %d of epoch %d not in the epoch cache %v", step, seed, b.BaseOffset(), b.PartitionLeaderEpoch(), cache)
				}
			}
			if olds > 0 && news > 0 {
				t.Fatalf("step %d seed %d: the old log and the new one mixed: [%d, %d)", step, seed, start, end)
			}
			if news > 0 && start != at {
				t.Fatalf("step %d seed %d: the new log starts at %d, want %d", step, seed, start, at)
			}
			if done && news == 0 {
				t.Fatalf("step %d seed %d: the flushed append at %d is lost: [%d, %d)", step, seed, at, start, end)
			}
			for _, e := range cache {
				if e.StartOffset > end {
					t.Fatalf("step %d seed %d: epoch entry %v beyond LEO %d", step, seed, e, end)
				}
			}
			if h, _ := m2.RecoveredHighWatermark(tpA); h < start || h > end {
				t.Fatalf("step %d seed %d: HW %d outside [%d, %d]", step, seed, h, start, end)
			}
			// The follower starts again from its leader's start.
			if err := r.TruncateFullyAndStartAt(at); err != nil {
				t.Fatalf("step %d seed %d: truncate again: %v", step, seed, err)
			}
			if _, err := r.AppendAsFollower(newBatch()); err != nil {
				t.Fatalf("step %d seed %d: append again: %v", step, seed, err)
			}
			readAll(t, r, at, r.LogEndOffset(), 1<<20)
			m2.Close()
		}
		if done {
			if step < 5 {
				t.Fatalf("a full truncation needs more than %d file operations", step)
			}
			t.Logf("%d crash points", step)
			return
		}
	}
}
