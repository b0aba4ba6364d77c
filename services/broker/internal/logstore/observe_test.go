package logstore

import (
	"sync"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// observed records what the Manager reported about its writes.
type observed struct {
	mu          sync.Mutex
	writes      []time.Duration
	checkpoints map[string][]time.Duration
}

func (o *observed) write(d time.Duration) {
	o.mu.Lock()
	o.writes = append(o.writes, d)
	o.mu.Unlock()
}

func (o *observed) checkpoint(file string, d time.Duration) {
	o.mu.Lock()
	o.checkpoints[file] = append(o.checkpoints[file], d)
	o.mu.Unlock()
}

// stallOnce makes the next matching operation wait d, as a disk that
// stalls does, and succeed.
func stallOnce(ffs *vfs.FaultFS, op vfs.Op, path string, d time.Duration) {
	stall := make(chan struct{})
	time.AfterFunc(d, func() { close(stall) })
	ffs.Inject(vfs.Fault{Ops: op, Path: path, Count: 1, Stall: stall})
}

// Every append's segment write is timed, a stalled one as long as it
// stalled; so is every checkpoint, by file, its fsync included.
func TestManagerTimesAppendWritesAndCheckpoints(t *testing.T) {
	ffs := vfs.NewFaultFS(newMem(t))
	obs := &observed{checkpoints: map[string][]time.Duration{}}
	hw := &hwTable{m: map[TopicPartition]int64{}}
	m, err := OpenManager(ManagerOptions{FS: ffs, Dir: "/data", HighWatermark: hw.get, NoBackground: true,
		ConfigFor:          func(string) Config { return smallConfig() },
		ObserveAppendWrite: obs.write, ObserveCheckpoint: obs.checkpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.GetOrCreate(tpA, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 3, 2, 20)
	stallOnce(ffs, vfs.OpWrite, ".log", 80*time.Millisecond)
	fill(t, l, 1, 2, 20)
	obs.mu.Lock()
	if len(obs.writes) != 4 || obs.writes[3] < 80*time.Millisecond || obs.writes[0] >= 80*time.Millisecond {
		t.Fatalf("append writes timed %v; want 4, the last one stalled 80ms", obs.writes)
	}
	obs.mu.Unlock()

	hw.set(tpA, 2)
	stallOnce(ffs, vfs.OpSync, hwCheckpointFile, 80*time.Millisecond)
	if err := m.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckpointRecoveryPoints(); err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if got := obs.checkpoints[hwCheckpointFile]; len(got) != 1 || got[0] < 80*time.Millisecond {
		t.Fatalf("high watermark checkpoint timed %v; want one, its stalled fsync included", got)
	}
	for _, f := range []string{recoveryCheckpointFile, logStartCheckpointFile} {
		if got := obs.checkpoints[f]; len(got) != 1 || got[0] >= 80*time.Millisecond {
			t.Fatalf("%s timed %v; want one, not stalled", f, got)
		}
	}
}
