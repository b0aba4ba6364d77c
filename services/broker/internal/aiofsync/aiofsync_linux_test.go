//go:build linux

package aiofsync

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"tidemark.io/services/broker/internal/parktest"
)

// dirtyFile writes n bytes to a new file, leaving them in the page cache
// for the next fsync to write.
func dirtyFile(t testing.TB, dir string, n int) *os.File {
	f, err := os.CreateTemp(dir, "dirty")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	chunk := bytes.Repeat([]byte("tidemark"), 1<<17) // 1 MiB
	for written := 0; written < n; written += len(chunk) {
		if _, err := f.Write(chunk[:min(len(chunk), n-written)]); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// The point of the package: with GOMAXPROCS 1, while a Sync is waiting on
// the device the rest of the process runs, and the syncing goroutine is
// parked rather than in an fsync system call. With a plain fsync the
// sampler below cannot run until the runtime takes the P back from the
// blocked thread, and then finds the goroutine in syscall.Fsync.
func TestSyncParksTheCallingGoroutine(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	dir := parktest.DiskDir(t)
	async0, _ := Counts()
	for attempt, size := 1, 32<<20; attempt <= 4; attempt, size = attempt+1, size*2 {
		f := dirtyFile(t, dir, size)
		s, err := parktest.Watch(func() error { return Sync(f) }, "aiofsync.Sync(", "Fsync")
		if err != nil {
			t.Fatalf("Sync: %v", err)
		}
		t.Logf("attempt %d: %d MiB, Sync took %v; %d samples: %d parked, %d in an fsync system call", attempt, size>>20, s.Took, s.Total, s.Parked, s.InSyscall)
		if s.InSyscall > 0 {
			t.Fatalf("the syncing goroutine was seen in an fsync system call %d times: it held its thread and P", s.InSyscall)
		}
		if s.Parked > 0 {
			if async, _ := Counts(); async == async0 {
				t.Fatal("Counts does not show the asynchronous Sync")
			}
			return
		}
	}
	t.Fatal("every fsync finished before the goroutine could be seen waiting; the device is too fast for this test's sizes")
}

// More Syncs at once than the ring holds: every one completes, and none is
// left registered.
func TestManyConcurrentSyncsAllComplete(t *testing.T) {
	dir := parktest.DiskDir(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3*maxInFlight)
	for i := range 3 * maxInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Create(filepath.Join(dir, "f"+string(rune('a'+i%26))+strings.Repeat("x", i/26)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			if _, err := f.WriteString("tidemark"); err != nil {
				errs <- err
				return
			}
			errs <- Sync(f)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := sharedRing()
	if r == nil {
		t.Fatal("the kernel refused an AIO context (io_setup)")
	}
	r.mu.Lock()
	left := len(r.waiting)
	r.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d requests still registered after every Sync returned", left)
	}
}

// Where the kernel refuses an asynchronous fsync (a pipe has no fsync at
// all), Sync does what f.Sync does and says it fell back.
func TestSyncFallsBackToAPlainFsync(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	_, plain0 := Counts()
	err, want := Sync(pw), pw.Sync()
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Fatalf("Sync(pipe) = %v, f.Sync = %v: want the same error", err, want)
	}
	if _, plain := Counts(); plain != plain0+1 {
		t.Fatalf("plain fsyncs went %d → %d, want one more", plain0, plain)
	}
	// A closed file: the plain fsync's own error.
	f, err := os.Create(filepath.Join(t.TempDir(), "closed"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := Sync(f); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Sync(closed file) = %v, want os.ErrClosed", err)
	}
}

func TestSyncDir(t *testing.T) {
	dir := parktest.DiskDir(t)
	if err := os.WriteFile(filepath.Join(dir, "entry"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	async0, _ := Counts()
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if async, _ := Counts(); async != async0+1 {
		t.Fatalf("SyncDir did not sync asynchronously (%d → %d)", async0, async)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SyncDir(missing) = %v, want ErrNotExist", err)
	}
}
