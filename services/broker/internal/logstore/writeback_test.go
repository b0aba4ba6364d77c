package logstore

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// recordFS records the writebacks started on its files and the page-cache
// drops asked of them.
type recordFS struct {
	vfs.FS
	mu     sync.Mutex
	ranges map[string][][2]int64 // writebacks, path: [off, off+n) in call order
	drops  map[string][][2]int64 // page-cache drops, likewise
}

func newRecordFS(t testing.TB) *recordFS {
	return &recordFS{FS: newMem(t), ranges: map[string][][2]int64{}, drops: map[string][][2]int64{}}
}

type recordFile struct {
	vfs.File
	fs   *recordFS
	path string
}

func (f recordFile) StartWriteback(off, n int64) error {
	return f.fs.record(f.fs.ranges, f.path, off, n)
}
func (f recordFile) DropCache(off, n int64) error { return f.fs.record(f.fs.drops, f.path, off, n) }

func (w *recordFS) record(m map[string][][2]int64, path string, off, n int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	m[path] = append(m[path], [2]int64{off, off + n})
	return nil
}

func (w *recordFS) wrap(path string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return recordFile{File: f, fs: w, path: path}, nil
}

func (w *recordFS) Create(name string) (vfs.File, error) {
	f, err := w.FS.Create(name)
	return w.wrap(name, f, err)
}

func (w *recordFS) Open(name string) (vfs.File, error) {
	f, err := w.FS.Open(name)
	return w.wrap(name, f, err)
}

// logRanges are the writebacks of .log files; logDrops their drops.
func (w *recordFS) logRanges() map[string][][2]int64 { return w.ofLogs(w.ranges) }
func (w *recordFS) logDrops() map[string][][2]int64  { return w.ofLogs(w.drops) }

func (w *recordFS) ofLogs(m map[string][][2]int64) map[string][][2]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][][2]int64{}
	for p, r := range m {
		if strings.HasSuffix(p, ".log") {
			out[p] = slices.Clone(r)
		}
	}
	return out
}

// Appends start the kernel writing the active segment back every
// WritebackBytes, in order and without gaps, so no file collects seconds of
// dirty pages for the kernel to write at once; and never the indexes.
func TestAppendsStartWritebackEveryStep(t *testing.T) {
	wfs := newRecordFS(t)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.WritebackBytes = 64 << 10
	l := openLog(t, wfs, cfg, newClock())
	for i := range 120 { // about 2.4 MiB: three segments
		appendLeader(t, l, plain(20, 1000, int64(1000+i)), 0)
		l.bg.Wait() // one writeback at a time: let each finish, so none is skipped
	}
	segs := l.segments()
	got := wfs.logRanges()
	if len(segs) < 3 || len(got) != len(segs) {
		t.Fatalf("%d segments, writebacks on %d log files: %v", len(segs), len(got), got)
	}
	calls := int64(0)
	for _, s := range segs {
		rs := got[s.logPath]
		end := int64(0)
		for _, r := range rs {
			if r[0] != end || r[1]-r[0] < cfg.WritebackBytes {
				t.Fatalf("%s: writeback %v after %d; want contiguous steps of at least %d: %v", s.logPath, r, end, cfg.WritebackBytes, rs)
			}
			end = r[1]
		}
		if size := s.size.Load(); size-end >= cfg.WritebackBytes || end > size {
			t.Fatalf("%s: written back to %d of %d bytes", s.logPath, end, size)
		}
		calls += int64(len(rs))
	}
	if st := l.Stats(); st.Writebacks != calls {
		t.Fatalf("stats count %d writebacks, the files saw %d", st.Writebacks, calls)
	}

	// Off: none.
	wfs2 := newRecordFS(t)
	cfg.WritebackBytes = -1
	l2 := openLog(t, wfs2, cfg, newClock())
	fill(t, l2, 40, 20, 1000)
	l2.bg.Wait()
	if got := wfs2.logRanges(); len(got) != 0 {
		t.Fatalf("writeback off, yet started: %v", got)
	}
}

// The append never waits for a writeback: with the call stalled (a device
// whose queue is full), appends go on; Close waits for it to end.
func TestAppendDoesNotWaitForWriteback(t *testing.T) {
	ffs := vfs.NewFaultFS(newMem(t))
	cfg := DefaultConfig()
	cfg.WritebackBytes = 16 << 10
	l := openLog(t, ffs, cfg, newClock())
	stall := make(chan struct{})
	remove := ffs.Inject(vfs.Fault{Ops: vfs.OpWriteback, Stall: stall})
	defer remove()
	done := make(chan error, 1)
	go func() {
		var err error
		for range 50 { // 1 MiB: 64 steps
			if _, err = l.AppendAsLeader(plain(20, 1000, 1000).build(), 0); err != nil {
				break
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(stall)
		t.Fatal("appends waited for a stalled writeback")
	}
	if !l.writingBack.Load() {
		t.Fatal("no writeback running: the stall was not reached")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a writeback was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(stall)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// On a real file the call reaches the kernel (sync_file_range): it succeeds
// on the file's range, past its end too, and fails on a closed file, where
// a stand-in that did nothing would not.
func TestOSStartWritebackReachesTheKernel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sync_file_range is Linux's")
	}
	f, err := vfs.OS.Create(filepath.Join(t.TempDir(), "seg.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 1 << 20}, {4096, 8192}, {1 << 20, 1 << 20}} {
		if err := vfs.StartWriteback(f, r[0], r[1]); err != nil {
			t.Fatalf("StartWriteback%v: %v", r, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := vfs.StartWriteback(f, 0, 1<<20); err == nil {
		t.Fatal("StartWriteback on a closed file succeeded: the call is not reaching the kernel")
	}
}
