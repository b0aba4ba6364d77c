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

// copies returns what was observed so far, for checks made without the
// lock (a failed check's deferred Close reports more).
func (o *observed) copies() ([]time.Duration, map[string][]time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cps := map[string][]time.Duration{}
	for f, ds := range o.checkpoints {
		cps[f] = append([]time.Duration(nil), ds...)
	}
	return append([]time.Duration(nil), o.writes...), cps
}

// stallOnce makes the next matching operation wait until d after this
// call, as a disk that stalls does, and succeed. The operation starts a
// little later than the call, so it is timed at somewhat under d: checks
// take half of d as the line between stalled and not.
func stallOnce(ffs *vfs.FaultFS, op vfs.Op, path string, d time.Duration) {
	stall := make(chan struct{})
	time.AfterFunc(d, func() { close(stall) })
	ffs.Inject(vfs.Fault{Ops: op, Path: path, Count: 1, Stall: stall})
}

// Every append's segment write is timed, a stalled one as long as it
// stalled; so is every checkpoint, by file, its fsync included.
func TestManagerTimesAppendWritesAndCheckpoints(t *testing.T) {
	const stall, stalled = 80 * time.Millisecond, 40 * time.Millisecond
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
	stallOnce(ffs, vfs.OpWrite, ".log", stall)
	fill(t, l, 1, 2, 20)
	if writes, _ := obs.copies(); len(writes) != 4 || writes[3] < stalled || writes[0] >= stalled {
		t.Fatalf("append writes timed %v; want 4, the last one stalled for about %v", writes, stall)
	}

	hw.set(tpA, 2)
	stallOnce(ffs, vfs.OpSync, hwCheckpointFile, stall)
	if err := m.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckpointRecoveryPoints(); err != nil {
		t.Fatal(err)
	}
	_, checkpoints := obs.copies()
	if got := checkpoints[hwCheckpointFile]; len(got) != 1 || got[0] < stalled {
		t.Fatalf("high watermark checkpoint timed %v; want one, its stalled fsync included", got)
	}
	for _, f := range []string{recoveryCheckpointFile, logStartCheckpointFile} {
		if got := checkpoints[f]; len(got) != 1 || got[0] >= stalled {
			t.Fatalf("%s timed %v; want one, not stalled", f, got)
		}
	}
}
