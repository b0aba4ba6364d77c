package logstore

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
)

// hwTable is a settable HighWatermark getter.
type hwTable struct {
	mu sync.Mutex
	m  map[TopicPartition]int64
}

func (h *hwTable) get(tp TopicPartition) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[tp]
	return v, ok
}

func (h *hwTable) set(tp TopicPartition, v int64) {
	h.mu.Lock()
	h.m[tp] = v
	h.mu.Unlock()
}

func openManager(t *testing.T, fsys vfs.FS, hw *hwTable) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get, NoBackground: true,
		ConfigFor: func(string) Config { return smallConfig() }})
	if err != nil {
		t.Fatalf("OpenManager: %v", err)
	}
	return m
}

var (
	tpA = TopicPartition{"orders", 0}
	tpB = TopicPartition{"orders-eu", 3}
)

func TestManagerCleanShutdownRoundTrip(t *testing.T) {
	fsys := newMem(t)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	m := openManager(t, fsys, hw)
	if m.HadCleanShutdown() {
		t.Fatal("a fresh directory reported a clean shutdown")
	}
	for _, tp := range []TopicPartition{tpA, tpB} {
		l, err := m.GetOrCreate(tp, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		fill(t, l, 20, 3, 40)
	}
	hw.set(tpA, 30)
	hw.set(tpB, 9999) // beyond the LEO: clamped on recovery
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat("/data/" + cleanShutdownMarkerFile); err != nil {
		t.Fatal("no clean-shutdown marker after Close")
	}
	hws, _ := ReadOffsetCheckpoint(fsys, "/data", hwCheckpointFile)
	rps, _ := ReadOffsetCheckpoint(fsys, "/data", recoveryCheckpointFile)
	if hws[tpA] != 30 || hws[tpB] != 9999 || rps[tpA] != 60 || rps[tpB] != 60 {
		t.Fatalf("checkpoints hw %v rp %v", hws, rps)
	}

	m2 := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	defer m2.Close()
	if !m2.HadCleanShutdown() {
		t.Fatal("clean shutdown not seen")
	}
	if _, err := fsys.Stat("/data/" + cleanShutdownMarkerFile); err == nil {
		t.Fatal("marker still present after open: a crash now would look clean")
	}
	if got := m2.Partitions(); len(got) != 2 || got[0] != tpA || got[1] != tpB {
		t.Fatalf("partitions %v", got)
	}
	if h, _ := m2.RecoveredHighWatermark(tpA); h != 30 {
		t.Fatalf("recovered hw A %d", h)
	}
	if h, _ := m2.RecoveredHighWatermark(tpB); h != 60 {
		t.Fatalf("recovered hw B %d, want clamped to LEO 60", h)
	}
	l, _ := m2.Log(tpA)
	if l.LogEndOffset() != 60 || l.Stats().RebuiltIndexes != 0 {
		t.Fatalf("reopened log %+v", l.Stats())
	}
	// The HW checkpoint keeps the recovered value until the getter knows better.
	if err := m2.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	if hws, _ := ReadOffsetCheckpoint(fsys, "/data", hwCheckpointFile); hws[tpA] != 30 {
		t.Fatalf("hw checkpoint lost a value: %v", hws)
	}
}

func TestManagerUncleanShutdownClampsHW(t *testing.T) {
	fsys := newMem(t)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	m := openManager(t, fsys, hw)
	l, _ := m.GetOrCreate(tpA, smallConfig())
	fill(t, l, 10, 3, 40)
	l.Flush()
	hw.set(tpA, 30)
	if err := m.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckpointRecoveryPoints(); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 10, 3, 40) // unflushed
	crashed := fsys.CrashClone(3)
	m.Close()

	m2 := openManager(t, crashed, &hwTable{m: map[TopicPartition]int64{}})
	defer m2.Close()
	if m2.HadCleanShutdown() {
		t.Fatal("crash reported as clean")
	}
	l2, _ := m2.Log(tpA)
	if l2.LogEndOffset() < 30 {
		t.Fatalf("flushed data lost: LEO %d", l2.LogEndOffset())
	}
	if h, _ := m2.RecoveredHighWatermark(tpA); h != min(30, l2.LogEndOffset()) {
		t.Fatalf("recovered hw %d", h)
	}
}

func TestManagerCorruptCheckpoints(t *testing.T) {
	for _, name := range []string{hwCheckpointFile, logStartCheckpointFile} {
		fsys := newMem(t)
		f, _ := fsys.Create("/data/" + name)
		f.WriteAt([]byte("0\n1\norders 0 zz\n"), 0)
		f.Close()
		_, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", NoBackground: true})
		if kerr.CodeOf(err) != kerr.KafkaStorageError || !strings.Contains(err.Error(), name+":3") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// A corrupt recovery point checkpoint only costs a full recovery.
	fsys := newMem(t)
	m := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	l, _ := m.GetOrCreate(tpA, smallConfig())
	fill(t, l, 10, 3, 40)
	m.Close()
	f, _ := fsys.Create("/data/" + recoveryCheckpointFile)
	f.WriteAt([]byte("garbage"), 0)
	f.Close()
	var logs bytes.Buffer
	m2, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", NoBackground: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if m2.HadCleanShutdown() || !strings.Contains(logs.String(), recoveryCheckpointFile) {
		t.Fatalf("clean=%v, log:\n%s", m2.HadCleanShutdown(), logs.String())
	}
	if l2, ok := m2.Log(tpA); !ok || l2.LogEndOffset() != 30 {
		t.Fatal("log not recovered")
	}
}

func TestManagerOfflinePartition(t *testing.T) {
	fsys := newMem(t)
	m := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	for _, tp := range []TopicPartition{tpA, tpB} {
		l, _ := m.GetOrCreate(tp, smallConfig())
		fill(t, l, 3, 1, 1)
	}
	m.Close()
	f, _ := fsys.Create("/data/" + tpB.String() + "/" + epochCheckpointFile)
	f.WriteAt([]byte("0\n1\n1 x\n"), 0)
	f.Close()
	m2 := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	off := m2.Offline()
	if len(off) != 1 || off[tpB] == nil || !strings.Contains(off[tpB].Error(), epochCheckpointFile) {
		t.Fatalf("offline %v", off)
	}
	if _, ok := m2.Log(tpA); !ok {
		t.Fatal("healthy partition not opened")
	}
	if _, err := m2.GetOrCreate(tpB, smallConfig()); err == nil {
		t.Fatal("GetOrCreate reopened an offline partition")
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat("/data/" + cleanShutdownMarkerFile); err == nil {
		t.Fatal("clean marker written with a partition offline")
	}
	// The offline partition's checkpointed offsets survive rewrites.
	if rps, _ := ReadOffsetCheckpoint(fsys, "/data", recoveryCheckpointFile); rps[tpB] != 3 {
		t.Fatalf("offline partition's recovery point lost: %v", rps)
	}
}

func TestManagerDelete(t *testing.T) {
	fsys := newMem(t)
	m := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	l, _ := m.GetOrCreate(tpA, smallConfig())
	fill(t, l, 3, 1, 1)
	if err := m.Delete(tpA); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat("/data/" + tpA.String()); err == nil {
		t.Fatal("directory still there")
	}
	if _, ok := m.Log(tpA); ok {
		t.Fatal("log still listed")
	}
	// A deletion interrupted after the rename is finished by the next open
	// (in the background: Close waits for it).
	fsys.MkdirAll("/data/" + tpB.String() + ".123" + deletingSuffix)
	m.Close()
	m2 := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	m2.Close()
	if doomed := deletingDirs(t, fsys); len(doomed) != 0 {
		t.Fatalf("%v left behind", doomed)
	}
}

// A deletion returns once the partition's directory is renamed, while its
// files are still being removed: the controller's next requests to the
// broker wait behind it, and freeing a partition's blocks can take seconds.
// The partition may be re-created meanwhile; the removal in flight holds up
// Abandon (a crashed broker leaves no writer behind in its data dir, which
// a restart or the test's cleanup would race); after Abandon a deletion
// touches nothing.
func TestManagerDeleteReturnsBeforeItsRemovalWhichHoldsUpAbandon(t *testing.T) {
	ffs := vfs.NewFaultFS(newMem(t))
	m := openManager(t, ffs, &hwTable{m: map[TopicPartition]int64{}})
	l, _ := m.GetOrCreate(tpA, smallConfig())
	fill(t, l, 3, 1, 1)
	if _, err := m.GetOrCreate(tpB, smallConfig()); err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	ffs.Inject(vfs.Fault{Ops: vfs.OpRemove, Path: deletingSuffix, Stall: stall})
	deleted := make(chan error, 1)
	go func() { deleted <- m.Delete(tpA) }()
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("Delete: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(stall)
		t.Fatal("Delete waited for the removal of the partition's files")
	}
	if _, err := ffs.Stat("/data/" + tpA.String()); !vfs.IsNotExist(err) {
		t.Fatalf("partition directory after Delete returned: %v", err)
	}
	if doomed := deletingDirs(t, ffs); len(doomed) != 1 {
		t.Fatalf("renamed directories being removed: %v, want one", doomed)
	}
	l2, err := m.GetOrCreate(tpA, smallConfig())
	if err != nil {
		t.Fatalf("re-creating the partition while its old files are removed: %v", err)
	}
	fill(t, l2, 2, 1, 1)
	abandoned := make(chan struct{})
	go func() { m.Abandon(); close(abandoned) }()
	select {
	case <-abandoned:
		t.Fatal("Abandon returned while a deletion was still removing files")
	case <-time.After(100 * time.Millisecond):
	}
	close(stall)
	<-abandoned
	if doomed := deletingDirs(t, ffs); len(doomed) != 0 {
		t.Fatalf("left after the removal: %v", doomed)
	}
	if _, err := m.GetOrCreate(tpA, smallConfig()); err != ErrClosed {
		t.Fatalf("GetOrCreate after Abandon: %v, want ErrClosed", err)
	}
	if err := m.Delete(tpB); err != ErrClosed {
		t.Fatalf("Delete after Abandon: %v, want ErrClosed", err)
	}
	if err := m.CheckpointRecoveryPoints(); err != ErrClosed {
		t.Fatalf("recovery-point checkpoint after Abandon: %v, want ErrClosed", err)
	}
	if err := m.CheckpointHighWatermarks(); err != ErrClosed {
		t.Fatalf("HW checkpoint after Abandon: %v, want ErrClosed", err)
	}
	if _, err := ffs.Stat("/data/" + tpB.String()); err != nil {
		t.Fatalf("Delete after Abandon removed the directory: %v", err)
	}
}

// Deleting a partition neither flushes its log (an fsync of data about to
// be deleted) nor waits for its retired segments' unlinks, which wait for
// the device: it returns while both are stalled. The other partitions stay
// writable, and Close waits for the deleted log's background work.
func TestManagerDeleteNeitherFlushesNorWaitsForRetirements(t *testing.T) {
	ffs := vfs.NewFaultFS(newMem(t))
	var mu sync.Mutex
	var storageErrs []error
	m, err := OpenManager(ManagerOptions{FS: ffs, Dir: "/data", NoBackground: true,
		ConfigFor: func(string) Config { return smallConfig() },
		OnStorageError: func(err error) {
			mu.Lock()
			storageErrs = append(storageErrs, err)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := m.GetOrCreate(tpA, smallConfig())
	fill(t, l, 20, 1, 200)
	appendLeader(t, l, plain(1, 10, 2000), 0)
	lb, _ := m.GetOrCreate(tpB, smallConfig())
	fill(t, lb, 2, 1, 200)
	l.bg.Wait() // the rolls' flushes: retention deletes flushed segments only
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp >= leo {
		t.Fatalf("recovery point %d, LEO %d: the test needs unflushed data", rp, leo)
	}
	stall := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(stall)
		}
	}
	t.Cleanup(release)
	dir := "/data/" + tpA.String()
	ffs.Inject(vfs.Fault{Ops: vfs.OpRemove, Path: dir, Stall: stall})
	ffs.Inject(vfs.Fault{Ops: vfs.OpSync, Path: logSuffix, Stall: stall})
	segs := l.segments()
	if n, err := l.DeleteOldSegments(segs[len(segs)-1].base); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments (%v); the test needs some", n, err)
	}
	for len(namesEnding(t, ffs, dir, deletedSuffix)) == 0 { // renamed, their unlinks stalled
		time.Sleep(time.Millisecond)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- m.Delete(tpA) }()
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("Delete: %v", err)
		}
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("Delete waited for a flush or for the retired segments' unlinks")
	}
	if _, err := ffs.Stat(dir); !vfs.IsNotExist(err) {
		t.Fatalf("partition directory after Delete returned: %v", err)
	}
	appendLeader(t, lb, plain(1, 200, 2000), 0)
	if _, err := lb.Read(0, 1<<20, lb.LogEndOffset()); err != nil {
		t.Fatalf("another partition after the deletion: %v", err)
	}
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while the deleted log's background work was stalled")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	<-closed
	mu.Lock()
	defer mu.Unlock()
	if len(storageErrs) != 0 {
		t.Fatalf("storage errors after the deletion: %v", storageErrs)
	}
	if doomed := deletingDirs(t, ffs); len(doomed) != 0 {
		t.Fatalf("left after the removal: %v", doomed)
	}
}

func TestManagerTruncationPersistsRecoveryPoint(t *testing.T) {
	fsys := newMem(t)
	m := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	defer m.Close()
	l, _ := m.GetOrCreate(tpA, smallConfig())
	fill(t, l, 10, 3, 40)
	l.Flush()
	m.CheckpointRecoveryPoints()
	if _, err := l.TruncateTo(9); err != nil {
		t.Fatal(err)
	}
	if rps, _ := ReadOffsetCheckpoint(fsys, "/data", recoveryCheckpointFile); rps[tpA] != 9 {
		t.Fatalf("recovery point checkpoint after truncation: %v", rps)
	}
}

func TestManagerBackgroundWork(t *testing.T) {
	fsys := newMem(t)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	cfg := smallConfig()
	cfg.FlushInterval = time.Millisecond
	cfg.RetentionBytes = 1000
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get,
		HighWatermarkCheckpointInterval: 5 * time.Millisecond, RecoveryCheckpointInterval: 5 * time.Millisecond,
		RetentionCheckInterval: 5 * time.Millisecond, FlushCheckInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := m.GetOrCreate(tpA, cfg)
	leo := fill(t, l, 30, 3, 40)
	hw.set(tpA, leo)
	deadline := time.Now().Add(5 * time.Second)
	for {
		hws, _ := ReadOffsetCheckpoint(fsys, "/data", hwCheckpointFile)
		rps, _ := ReadOffsetCheckpoint(fsys, "/data", recoveryCheckpointFile)
		if hws[tpA] == leo && rps[tpA] == leo && l.LogStartOffset() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("background work not done: hw %v rp %v log start %d", hws, rps, l.LogStartOffset())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestManagerIdleCheckpointsAreRewritten: the periodic checkpoints are
// written every interval whether or not their offsets moved, as Kafka
// writes them (on an idle dir they are the only writes, the ones that find
// a failed disk), and offsets that move are in the next one.
func TestManagerIdleCheckpointsAreRewritten(t *testing.T) {
	fsys := newMem(t)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	var mu sync.Mutex
	writes := map[string]int{}
	count := func(file string) int {
		mu.Lock()
		defer mu.Unlock()
		return writes[file]
	}
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get,
		HighWatermarkCheckpointInterval: 2 * time.Millisecond, RecoveryCheckpointInterval: 2 * time.Millisecond,
		RetentionCheckInterval: time.Hour, FlushCheckInterval: time.Hour,
		ObserveCheckpoint: func(file string, _ time.Duration) {
			mu.Lock()
			writes[file]++
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := m.GetOrCreate(tpA, smallConfig())
	leo := fill(t, l, 10, 3, 40)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	hw.set(tpA, leo-5)
	waitFor := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !done(); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not written in 5 s", what)
			}
		}
	}
	holds := func(file string, want int64) func() bool {
		return func() bool { got, _ := ReadOffsetCheckpoint(fsys, "/data", file); return got[tpA] == want }
	}
	waitFor("hw checkpoint", holds(hwCheckpointFile, leo-5))
	waitFor("recovery checkpoint", holds(recoveryCheckpointFile, leo))
	time.Sleep(10 * time.Millisecond) // a write under way when the file was read
	files := []string{hwCheckpointFile, recoveryCheckpointFile, logStartCheckpointFile}
	before := map[string]int{}
	for _, f := range files {
		before[f] = count(f)
	}
	time.Sleep(200 * time.Millisecond) // about 100 intervals of each
	for _, f := range files {
		if count(f) == before[f] {
			t.Errorf("%s not written while nothing moved: an idle dir's failure would go unseen", f)
		}
	}
	// Offsets that move are written at the next interval.
	hw.set(tpA, leo)
	waitFor("moved hw", holds(hwCheckpointFile, leo))
	leo = fill(t, l, 5, 3, 40)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor("moved recovery point", holds(recoveryCheckpointFile, leo))
}

// A dir whose logs are all idle still finds out its disk failed within
// either checkpoint interval, the high watermarks' (5 s, as Kafka's) and the
// recovery points' (a minute): those writes are its only I/O.
func TestAnIdleDirsFailureIsNoticed(t *testing.T) {
	for _, c := range []struct {
		name   string
		hw, rp time.Duration
	}{
		{"high watermark checkpoint", 5 * time.Millisecond, time.Hour},
		{"recovery point checkpoint", time.Hour, 5 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) { testIdleDirFailureNoticed(t, c.hw, c.rp) })
	}
}

func testIdleDirFailureNoticed(t *testing.T, hwEvery, rpEvery time.Duration) {
	ffs := vfs.NewFaultFS(newMem(t))
	failed := make(chan error, 1)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	m, err := OpenManager(ManagerOptions{FS: ffs, Dir: "/data", HighWatermark: hw.get,
		HighWatermarkCheckpointInterval: hwEvery, RecoveryCheckpointInterval: rpEvery,
		RetentionCheckInterval: time.Hour, FlushCheckInterval: time.Hour,
		OnStorageError: func(err error) {
			select {
			case failed <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := m.GetOrCreate(tpA, smallConfig())
	hw.set(tpA, fill(t, l, 5, 3, 40))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the moved offsets written: idle from here
	ffs.Inject(vfs.Fault{Ops: vfs.OpCreate | vfs.OpWrite | vfs.OpSync | vfs.OpRename, Path: "/data", Err: syscall.EIO})
	select {
	case err := <-failed:
		if kerr.CodeOf(err) != kerr.KafkaStorageError {
			t.Fatalf("storage error %v, want KAFKA_STORAGE_ERROR", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an idle dir's failed disk was not noticed in 5 s (1000 checkpoint intervals)")
	}
}

func TestParseTopicPartition(t *testing.T) {
	good := map[string]TopicPartition{"a-0": {"a", 0}, "a--1": {"a-", 1}, "my-topic-12": {"my-topic", 12}, "x.y_z-3": {"x.y_z", 3}}
	for s, want := range good {
		if got, err := ParseTopicPartition(s); err != nil || got != want || got.String() != s {
			t.Errorf("%q: %v %v", s, got, err)
		}
	}
	for _, s := range []string{"a", "-1", "a-", "a-x", "a b-1", "a-+1", "a-01", "..-1", strings.Repeat("t", 250) + "-0"} {
		if _, err := ParseTopicPartition(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestManagerHWGetterMayTakeCallerLock checks the lock order documented in
// DESIGN.md: the HW getter takes the caller's partition lock, and a
// truncation made while holding that lock persists its recovery point.
func TestManagerHWGetterMayTakeCallerLock(t *testing.T) {
	fsys := newMem(t)
	var partitionMu sync.Mutex
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", NoBackground: true,
		HighWatermark: func(TopicPartition) (int64, bool) {
			partitionMu.Lock()
			defer partitionMu.Unlock()
			return 1, true
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := m.GetOrCreate(tpA, smallConfig())
	fill(t, l, 50, 3, 40)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 30 {
			partitionMu.Lock()
			l.TruncateTo(l.LogEndOffset() - 1)
			partitionMu.Unlock()
		}
	}()
	for range 30 {
		if err := m.CheckpointHighWatermarks(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock between the HW getter and a truncation")
	}
}

// RunRetention tells the log's owner when it moved a log start, and only
// then, so the replica's state machine can record it.
func TestManagerRetentionReportsLogStartMoved(t *testing.T) {
	fsys := newMem(t)
	hw := &hwTable{m: map[TopicPartition]int64{}}
	var moved []TopicPartition
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: hw.get, NoBackground: true,
		LogStartMoved: func(tp TopicPartition) { moved = append(moved, tp) }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := smallConfig()
	cfg.RetentionBytes = 1000
	l, _ := m.GetOrCreate(tpA, cfg)
	leo := fill(t, l, 30, 3, 40)
	hw.set(tpA, 0)
	m.RunRetention()
	if len(moved) != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("nothing below the HW to delete, yet log start %d and reports %v", l.LogStartOffset(), moved)
	}
	hw.set(tpA, leo)
	m.RunRetention()
	if l.LogStartOffset() == 0 || len(moved) != 1 || moved[0] != tpA {
		t.Fatalf("retention to log start %d reported %v, want [%v]", l.LogStartOffset(), moved, tpA)
	}
	m.RunRetention()
	if len(moved) != 1 {
		t.Fatalf("a retention pass that deleted nothing reported %v", moved)
	}
}

// deletingDirs lists the renamed directories of deleted partitions in /data.
func deletingDirs(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	return namesEnding(t, fsys, "/data", deletingSuffix)
}

// Len counts the open logs, as Partitions lists them (placing a new
// partition weighs each directory by it), deletions included.
func TestManagerLenCountsOpenLogs(t *testing.T) {
	m, err := OpenManager(ManagerOptions{FS: vfs.NewMem(), Dir: "/data", NoBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for p := range int32(3) {
		if _, err := m.GetOrCreate(TopicPartition{Topic: "t", Partition: p}, DefaultConfig()); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Delete(TopicPartition{Topic: "t", Partition: 1}); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 2 || len(m.Partitions()) != 2 {
		t.Fatalf("Len %d, Partitions %v: want 2 open logs", m.Len(), m.Partitions())
	}
}

// A replica stopped while a checkpoint reads the HW getter hands its newer
// HW over (KeepHighWatermark) after the getter answered with an older one:
// the checkpoint must not write the older one over it.
func TestCheckpointDoesNotUndoAHandoverMadeWhileItReadTheGetter(t *testing.T) {
	fsys := newMem(t)
	var m *Manager
	handed := false
	getter := func(tp TopicPartition) (int64, bool) {
		if tp != tpA {
			return 0, false
		}
		if !handed {
			// Read 10; before the checkpoint goes on, the replica stops
			// with its HW at 15.
			handed = true
			m.KeepHighWatermark(tpA, 15)
			return 10, true
		}
		return 0, false // stopped: the getter knows it no more
	}
	var err error
	m, err = OpenManager(ManagerOptions{FS: fsys, Dir: "/data", HighWatermark: getter, NoBackground: true,
		ConfigFor: func(string) Config { return smallConfig() }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.GetOrCreate(tpA, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 20, 1, 10)
	if err := m.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	if !handed {
		t.Fatal("the getter was not read")
	}
	if hws, _ := ReadOffsetCheckpoint(fsys, "/data", hwCheckpointFile); hws[tpA] != 15 {
		t.Errorf("checkpoint HW %d, want the 15 handed over", hws[tpA])
	}
	if hw, _ := m.LatestHighWatermark(tpA); hw != 15 {
		t.Errorf("LatestHighWatermark %d, want 15", hw)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if hws, _ := ReadOffsetCheckpoint(fsys, "/data", hwCheckpointFile); hws[tpA] != 15 {
		t.Errorf("checkpoint HW at close %d, want 15", hws[tpA])
	}
}
