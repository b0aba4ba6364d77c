package logstore

import (
	"sync"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// stallingFS holds every SyncDir of the data directory until released, as
// a slow disk would.
type stallingFS struct {
	vfs.FS
	entered chan struct{}
	release chan struct{}
}

func (f *stallingFS) SyncDir(dir string) error {
	if dir == "/data" {
		f.entered <- struct{}{}
		<-f.release
	}
	return f.FS.SyncDir(dir)
}

// Creating a log syncs the data directory; while that sync is stuck, the
// manager still answers for other partitions and creates them, a second
// creator of the same partition gets the same log, and Close waits for a
// creation instead of writing a clean-shutdown marker beside it.
func TestCreatingALogDoesNotHoldTheManager(t *testing.T) {
	mem := newMem(t)
	fsys := &stallingFS{FS: mem, entered: make(chan struct{}, 8), release: make(chan struct{})}
	m := openManager(t, mem, &hwTable{m: map[TopicPartition]int64{}})
	if _, err := m.GetOrCreate(tpB, smallConfig()); err != nil {
		t.Fatal(err)
	}
	m.opts.FS = fsys // from now on the data dir's syncs stall

	var wg sync.WaitGroup
	got := make([]*Log, 2)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.GetOrCreate(tpA, smallConfig())
			if err != nil {
				t.Error(err)
			}
			got[i] = l
		}()
	}
	<-fsys.entered // one creation is inside its sync
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		if _, ok := m.Log(tpB); !ok {
			t.Error("tpB's log is gone")
		}
		_ = m.Partitions()
	}()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("the manager did not answer while a creation's sync was stalled")
	}
	select {
	case <-fsys.entered:
		t.Fatal("a second creation of the same partition started")
	case <-time.After(50 * time.Millisecond):
	}
	close(fsys.release)
	wg.Wait()
	if got[0] == nil || got[0] != got[1] {
		t.Fatalf("the two creators of one partition got %p and %p, want one log", got[0], got[1])
	}

	// Close during a creation waits for it; the creator is told the
	// manager closed.
	fsys.release = make(chan struct{})
	created := make(chan error, 1)
	go func() {
		_, err := m.GetOrCreate(TopicPartition{"late", 0}, smallConfig())
		created <- err
	}()
	<-fsys.entered
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a creation was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(fsys.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != ErrClosed {
		t.Fatalf("the creation that Close overtook: %v, want ErrClosed", err)
	}
}
