package logstore

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// slowFreeFS is an in-memory file system whose files take reservations
// and whose truncations wait, once armed, until gate is closed: a device
// slow to free blocks (ext4 mounted with discard trims them as it frees).
type slowFreeFS struct {
	vfs.FS
	armed   atomic.Bool // truncations wait
	removes atomic.Bool // removals wait
	syncs   atomic.Bool // directory syncs wait
	epochs  atomic.Bool // the leader-epoch checkpoint's file syncs wait
	stalled atomic.Int64
	gate    chan struct{}
	opened  sync.Once
}

// release lets every stalled call and every later one go. A test that
// stalls calls registers it as a cleanup after its log's, so that a failed
// check does not leave the log's Close waiting on the gate.
func (f *slowFreeFS) release() { f.opened.Do(func() { close(f.gate) }) }

type slowFreeFile struct {
	vfs.File
	fs *slowFreeFS
}

func (f *slowFreeFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return slowFreeFile{file, f}, nil
}

func (f *slowFreeFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return slowFreeFile{file, f}, nil
}

func (f *slowFreeFS) Remove(name string) error {
	if f.removes.Load() {
		f.stalled.Add(1)
		<-f.gate
	}
	return f.FS.Remove(name)
}

func (f *slowFreeFS) SyncDir(dir string) error {
	if f.syncs.Load() {
		f.stalled.Add(1)
		<-f.gate
	}
	return f.FS.SyncDir(dir)
}

func (f slowFreeFile) Sync() error {
	if f.fs.epochs.Load() && strings.Contains(f.Name(), epochCheckpointFile) {
		f.fs.stalled.Add(1)
		<-f.fs.gate
	}
	return f.File.Sync()
}

func (f slowFreeFile) ReserveBlocks(int64) error      { return nil }
func (f slowFreeFile) AllocatedBytes() (int64, error) { return 0, errors.ErrUnsupported }

func (f slowFreeFile) Truncate(size int64) error {
	if f.fs.armed.Load() {
		f.fs.stalled.Add(1)
		<-f.fs.gate
	}
	return f.File.Truncate(size)
}

// openSlowFreeLog opens a log of 64 KiB segments (cfg's other settings) on
// a slowFreeFS and appends until it has n segments, its background work done.
func openSlowFreeLog(t *testing.T, cfg Config, n int) (*Log, *slowFreeFS) {
	t.Helper()
	fsys := &slowFreeFS{FS: newMem(t), gate: make(chan struct{})}
	cfg.SegmentBytes = 64 << 10
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg})
	t.Cleanup(fsys.release)
	for len(l.segments()) < n {
		appendLeader(t, l, plain(4, 4000, 1000), 0)
	}
	l.bg.Wait()
	return l, fsys
}

// returns runs fn and fails the test, letting stalled calls go, when fn has
// not returned within 10 s: then it waited for what the file system stalls.
func (f *slowFreeFS) returns(t *testing.T, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		f.release()
		t.Fatal(what)
	}
}

// stalls waits until a call is stalled (failing the test after 10 s with
// what), then lets it and every later one go.
func (f *slowFreeFS) stalls(t *testing.T, what string) {
	t.Helper()
	f.waitStalled(t, what)
	f.armed.Store(false)
	f.removes.Store(false)
	f.syncs.Store(false)
	f.epochs.Store(false)
	f.release()
}

// waitStalled waits until a call is stalled, failing the test after 10 s
// with what.
func (f *slowFreeFS) waitStalled(t *testing.T, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); f.stalled.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			f.release()
			t.Fatal(what)
		}
	}
}

// A roll gives back the sealed segment's unused reservation in the
// background: the append that rolls returns while freeing the blocks waits
// for the device. (A segment rolled by segment.ms, nearly empty: one that
// rolls on its size keeps its small unused tail and frees nothing.)
func TestRollDoesNotWaitToGiveBackReservedBlocks(t *testing.T) {
	fsys := &slowFreeFS{FS: newMem(t), gate: make(chan struct{})}
	clk := newClock()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 20
	cfg.SegmentMs = time.Hour
	cfg.Preallocate = true
	l := openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, Now: clk.Now})
	t.Cleanup(fsys.release)
	appendLeader(t, l, plain(16, 4000, clk.Now().UnixMilli()), 0)
	clk.Advance(31 * time.Minute)
	appendLeader(t, l, plain(16, 4000, clk.Now().UnixMilli()), 0)
	l.bg.Wait()
	if !l.spareReady.Load() {
		t.Fatal("no spare made half way to segment.ms")
	}
	fsys.armed.Store(true)
	clk.Advance(30 * time.Minute)
	fsys.returns(t, "the append that rolled waited for the sealed segment's reserved blocks to be given back", func() error {
		_, err := l.AppendAsLeader(plain(16, 4000, clk.Now().UnixMilli()).build(), 0)
		return err
	})
	segs := l.segments()
	if len(segs) != 2 || segs[1].reserved.Load() != cfg.SegmentBytes {
		t.Fatalf("%d segments after the roll; want 2, the new one from the spare (%d bytes reserved)", len(segs), cfg.SegmentBytes)
	}
	fsys.stalls(t, "nothing gave back the sealed segment's reserved blocks after the roll")
	l.bg.Wait()
	if r := segs[0].reserved.Load(); r != 0 {
		t.Fatalf("the sealed segment still counts %d bytes reserved once they were given back", r)
	}
}

// A roll deletes the producer snapshots beyond the two newest in the
// background: the append that rolls returns while the deletion waits for
// the device.
func TestRollDoesNotWaitToDeleteOldSnapshots(t *testing.T) {
	l, fsys := openSlowFreeLog(t, DefaultConfig(), 3)
	fsys.removes.Store(true)
	fsys.returns(t, "the append that rolled waited for an old producer snapshot's deletion", func() error {
		act := l.active()
		for l.active() == act {
			if _, err := l.AppendAsLeader(plain(4, 4000, 1000).build(), 0); err != nil {
				return err
			}
		}
		return nil
	})
	fsys.waitStalled(t, "nothing deleted the old producer snapshots after the roll")
	// The stalled unlink holds no lock: a truncation, which takes the
	// log's files exclusively, goes on.
	fsys.returns(t, "a truncation waited for the stalled deletion of an old snapshot", func() error {
		_, err := l.TruncateTo(l.segments()[1].base)
		return err
	})
	fsys.stalls(t, "")
	l.bg.Wait()
	snaps, err := listSnapshots(fsys, testDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) > 2 || len(retiredFiles(t, fsys)) > 0 {
		t.Fatalf("producer snapshots %v and retired files %v after the roll's deletion; want at most the two newest and none", snaps, retiredFiles(t, fsys))
	}
}
