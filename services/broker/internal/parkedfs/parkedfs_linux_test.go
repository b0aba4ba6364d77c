//go:build linux

package parkedfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"tidemark.io/services/broker/internal/parktest"
)

// ring is the process's ring; the tests need the kernel to take it.
func mustRing(t testing.TB) *ring {
	r := sharedRing()
	if r == nil {
		t.Fatalf("the kernel refused an io_uring: %v", ringErr)
	}
	return r
}

// writtenFile writes n bytes to a new file and flushes them, so the file
// owns its blocks on the device (a file whose pages were never written
// back frees nothing but memory).
func writtenFile(t testing.TB, dir, name string, n int) string {
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte("tidemark"), 1<<17) // 1 MiB
	for written := 0; written < n; written += len(chunk) {
		if _, err := f.Write(chunk[:min(len(chunk), n-written)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every call does what the os package's does, with the same errors, and
// runs parked where the kernel has the operation.
func TestCallsActAsTheOSCallsDo(t *testing.T) {
	r := mustRing(t)
	for _, op := range []uint8{opUnlinkat, opRenameat} {
		if !r.supported[op] {
			t.Fatalf("the kernel's io_uring lacks opcode %d (Linux 5.11+)", op)
		}
	}
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	write := func(name, content string) {
		if err := os.WriteFile(path(name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(path(name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sameError := func(what string, got, want error) {
		t.Helper()
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Fatalf("%s: got %v, want %v (the os package's)", what, got, want)
		}
	}
	parked0, _ := Counts()

	write("a", "first")
	write("b", "second")
	if err := Rename(path("a"), path("b")); err != nil { // over an existing file
		t.Fatal(err)
	}
	if got := read("b"); got != "first" {
		t.Fatalf("after renaming a over b, b holds %q", got)
	}
	err := Rename(path("a"), path("c"))
	sameError("renaming a missing file", err, os.Rename(path("a"), path("c")))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("renaming a missing file: %v is not ErrNotExist", err)
	}

	f, err := os.OpenFile(path("b"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := Truncate(f, 2); err != nil {
		t.Fatal(err)
	}
	if err := Truncate(f, 4); err != nil { // grows with zeros
		t.Fatal(err)
	}
	if got := read("b"); got != "fi\x00\x00" {
		t.Fatalf("after truncating to 2 then 4, b holds %q", got)
	}
	sameError("truncating to a negative size", Truncate(f, -1), f.Truncate(-1))
	f.Close()
	sameError("truncating a closed file", Truncate(f, 1), f.Truncate(1))

	if err := Remove(path("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path("b")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("b still there after Remove: %v", err)
	}
	sameError("removing a missing file", Remove(path("b")), os.Remove(path("b")))

	// Directories: an empty one goes, a full one stays with os.Remove's error.
	if err := os.MkdirAll(path("d/e/f"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("d/e/f/g", "x")
	write("d/h", "y")
	sameError("removing a directory that holds files", Remove(path("d")), os.Remove(path("d")))
	if err := Remove(path("d/e/f/g")); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path("d/e/f")); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAll(path("d")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path("d")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("d still there after RemoveAll: %v", err)
	}
	if err := RemoveAll(path("d")); err != nil {
		t.Fatalf("RemoveAll of a missing path: %v, want nil as os.RemoveAll", err)
	}
	write("lone", "z")
	if err := RemoveAll(path("lone")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path("lone")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file given to RemoveAll is still there: %v", err)
	}

	if parked, _ := Counts(); parked == parked0 {
		t.Fatal("no call ran parked on a kernel that has the operations")
	}
}

// Where the kernel lacks an operation, the call is the plain one and says
// so in Counts.
func TestCallsTheKernelLacksArePlain(t *testing.T) {
	r := mustRing(t)
	had := r.supported[opUnlinkat]
	r.supported[opUnlinkat] = false
	defer func() { r.supported[opUnlinkat] = had }()
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	parked0, plain0 := Counts()
	if err := Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("x still there: %v", err)
	}
	if parked, plain := Counts(); parked != parked0 || plain != plain0+1 {
		t.Fatalf("counts went parked %d → %d, plain %d → %d; want one more plain call", parked0, parked, plain0, plain)
	}
}

// The point of the package: with GOMAXPROCS 1, while a removal frees a
// large file's blocks the rest of the process runs, and the removing
// goroutine is parked rather than in an unlink system call. With a plain
// unlink the sampler below cannot run until the runtime takes the P back
// from the blocked thread, and then finds the goroutine in the system call
// (seen failing so: 15 of 15 samples in syscall.unlinkat).
func TestRemoveParksTheCallingGoroutine(t *testing.T) {
	mustRing(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	dir := parktest.DiskDir(t)
	for attempt, size := 1, 64<<20; attempt <= 3; attempt, size = attempt+1, size*2 {
		p := writtenFile(t, dir, "big", size)
		// The plain unlink's frames; a moment in io_uring_enter, submitting, is not one.
		s, err := parktest.Watch(func() error { return Remove(p) }, "parkedfs.Remove(", "syscall.Unlink", "syscall.unlinkat", "syscall.Rmdir")
		if err != nil {
			t.Fatalf("Remove: %v", err)
		}
		t.Logf("attempt %d: %d MiB, Remove took %v; %d samples: %d parked, %d in a system call", attempt, size>>20, s.Took, s.Total, s.Parked, s.InSyscall)
		if s.InSyscall > 0 {
			t.Fatalf("the removing goroutine was seen in a system call %d times: it held its thread and P", s.InSyscall)
		}
		if s.Parked > 0 {
			return
		}
	}
	t.Fatal("every removal finished before the goroutine could be seen waiting; the device frees blocks too fast for this test's sizes")
}

// More calls at once than the ring holds: every one completes, and none is
// left registered.
func TestManyConcurrentCallsAllComplete(t *testing.T) {
	r := mustRing(t)
	dir := t.TempDir()
	n := 3 * cap(r.slots)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := filepath.Join(dir, "f"+strconv.Itoa(i))
			if err := os.WriteFile(p, []byte("tidemark"), 0o644); err != nil {
				errs <- err
				return
			}
			if err := Rename(p, p+".deleted"); err != nil {
				errs <- err
				return
			}
			errs <- Remove(p + ".deleted")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d files left after every removal returned", len(left))
	}
	r.mu.Lock()
	waiting := len(r.waiting)
	r.mu.Unlock()
	if waiting != 0 {
		t.Fatalf("%d requests still registered after every call returned", waiting)
	}
}
