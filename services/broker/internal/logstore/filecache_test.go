package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// noSyncFS is the operating system's file system with fsync turned off:
// the tests below are about descriptors, and thousands of fsyncs would
// only make them slow. Files are real, so are their descriptors.
type noSyncFS struct{ vfs.FS }

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error { return nil }

func (f noSyncFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}
func (f noSyncFS) Create(name string) (vfs.File, error) { return f.wrap(f.FS.Create(name)) }
func (f noSyncFS) Open(name string) (vfs.File, error)   { return f.wrap(f.FS.Open(name)) }
func (noSyncFS) SyncDir(string) error                   { return nil }

// openFDs counts the process's open descriptors.
func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(ents)
}

// waitIdle waits until no operation holds a handle of c: background
// flushes after rolls may still be syncing.
func waitIdle(c *FileCache) {
	for c.Stats().InUse > 0 {
		runtime.Gosched()
	}
}

// taggedBatch is a batch whose records' values name the log and the batch,
// so a read from the wrong file or position cannot pass for the right one.
func taggedBatch(log, n, records, size int) []byte {
	var b recordbatch.Builder
	for r := range records {
		tag := fmt.Sprintf("log %d batch %d record %d;", log, n, r)
		v := bytes.Repeat([]byte(tag), size/len(tag)+1)[:size]
		b.Append(recordbatch.Record{Timestamp: int64(1_700_000_000_000 + n), Key: []byte{byte(r)}, Value: v})
	}
	return bytes.Clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence))
}

// checkTagged reads the batch at offset off of log i and checks it is
// batch n as taggedBatch built it.
func checkTagged(t testing.TB, l *Log, i, n int, off int64, records, size int) {
	t.Helper()
	res, err := l.Read(off, 1, l.LogEndOffset())
	if err != nil {
		t.Fatalf("log %d: Read(%d): %v", i, off, err)
	}
	want := taggedBatch(i, n, records, size)
	got := recordbatch.Batch(res.Records)
	if err := got.Validate(); err != nil {
		t.Fatalf("log %d: Read(%d): %v", i, off, err)
	}
	var gotVals, wantVals [][]byte
	for r, err := range got.Records() {
		if err != nil {
			t.Fatal(err)
		}
		gotVals = append(gotVals, r.Value)
	}
	for r := range recordbatch.Batch(want).Records() {
		wantVals = append(wantVals, r.Value)
	}
	if got.BaseOffset() != off || len(gotVals) != len(wantVals) {
		t.Fatalf("log %d: Read(%d) returned batch at %d with %d records, want %d", i, off, got.BaseOffset(), len(gotVals), len(wantVals))
	}
	for k := range wantVals {
		if !bytes.Equal(gotVals[k], wantVals[k]) {
			t.Fatalf("log %d: Read(%d) record %d is %.40q, want %.40q", i, off, k, gotVals[k], wantVals[k])
		}
	}
}

// TestManyLogsStayWithinTheOpenFileBound opens 2,000 logs (400 with -short) on real files,
// each with three segments (nine segment files), with one cache of 64
// handles: the process's descriptors must stay within the bound while they
// are written, read from their oldest segments and written again, and
// every read must return the right data.
func TestManyLogsStayWithinTheOpenFileBound(t *testing.T) {
	logs := 2000
	if testing.Short() {
		logs = 400
	}
	const (
		bound   = 64
		slack   = 8 // the directory listing's own descriptor, the runtime's
		records = 3
		size    = 100
		batches = 6 // two per 1 KiB segment: three segments
	)
	fsys := noSyncFS{vfs.OS}
	files := NewFileCache(bound)
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	cfg.IndexIntervalBytes = 1 // an index entry per batch: lookups read the index files
	base := openFDs(t)
	check := func(when string) {
		t.Helper()
		waitIdle(files)
		if st := files.Stats(); st.Open > bound {
			t.Fatalf("%s: cache holds %d idle files open, bound is %d", when, st.Open, bound)
		}
		if n := openFDs(t) - base; n > bound+slack {
			t.Fatalf("%s: %d descriptors open beyond the %d before, bound is %d (cache: %+v)", when, n, base, bound, files.Stats())
		}
	}

	ls := make([]*Log, logs)
	for i := range ls {
		l, err := Open(Options{FS: fsys, Files: files, Dir: fmt.Sprintf("%s/t-%d", dir, i), Config: cfg})
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
		ls[i] = l
		t.Cleanup(func() { l.Close() })
		for n := range batches {
			if _, err := l.AppendAsLeader(taggedBatch(i, n, records, size), 0); err != nil {
				t.Fatalf("log %d: append %d: %v", i, n, err)
			}
		}
		if st := l.Stats(); st.Segments < 3 {
			t.Fatalf("log %d has %d segments, want at least 3", i, st.Segments)
		}
		if i%250 == 249 {
			check(fmt.Sprintf("after creating %d logs", i+1))
		}
	}
	check("after creating every log")
	before := files.Stats()

	// Every batch, oldest segment first, of every log: all evicted long ago.
	for i, l := range ls {
		for n := range batches {
			checkTagged(t, l, i, n, int64(n*records), records, size)
		}
		if i%250 == 249 {
			check(fmt.Sprintf("after reading %d logs", i+1))
		}
	}
	// Appends to active segments whose files were evicted.
	for i, l := range ls {
		if _, err := l.AppendAsLeader(taggedBatch(i, batches, records, size), 0); err != nil {
			t.Fatalf("log %d: append after eviction: %v", i, err)
		}
	}
	check("after appending again")
	for i, l := range ls {
		checkTagged(t, l, i, batches, int64(batches*records), records, size)
		checkTagged(t, l, i, 0, 0, records, size)
	}
	check("after reading again")
	after := files.Stats()
	if after.Misses-before.Misses < int64(logs) || after.Evictions-before.Evictions < int64(logs) {
		t.Fatalf("reads and appends reopened %d files and evicted %d: the cache was not exercised", after.Misses-before.Misses, after.Evictions-before.Evictions)
	}
	t.Logf("%d logs, %d segment files; cache %+v; %d descriptors beyond the start", logs, logs*3*3, after, openFDs(t)-base)
}

// TestEvictionSkipsPinnedHandles: a handle in use survives any number of
// evictions and a Close; it is closed when its last operation ends.
func TestEvictionSkipsPinnedHandles(t *testing.T) {
	mem := newMem(t)
	c := NewFileCache(1)
	a, err := c.create(mem, "/data/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	af := a.(*cachedFile)
	h, err := af.acquire()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "c", "d"} {
		if _, err := c.create(mem, "/data/"+name); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Open != 1 || st.InUse != 1 || st.Evictions != 3 {
		t.Fatalf("stats %+v, want only the pinned handle open and the three others evicted", st)
	}
	buf := make([]byte, 5)
	if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != "hello" {
		t.Fatalf("pinned handle read %q, %v", buf, err)
	}
	// Close while in use: the handle stays usable until released.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReadAt(buf, 0); err != nil {
		t.Fatalf("handle closed under its operation: %v", err)
	}
	af.release()
	if _, err := h.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("released handle of a closed file: read gave %v, want it closed", err)
	}
	if _, err := a.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read of a closed file gave %v", err)
	}
	if st := c.Stats(); st.Open != 0 || st.InUse != 0 {
		t.Fatalf("stats %+v after everything closed", st)
	}
}

// TestEvictedFileIsReopenedWithItsData: an evicted file is reopened
// (without truncation) by its next operation.
func TestEvictedFileIsReopenedWithItsData(t *testing.T) {
	mem := newMem(t)
	c := NewFileCache(1)
	a, _ := c.create(mem, "/data/a")
	if _, err := a.WriteAt([]byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	b, _ := c.create(mem, "/data/b") // evicts a
	if st := c.Stats(); st.Evictions != 1 {
		t.Fatalf("stats %+v, want a evicted", st)
	}
	buf := make([]byte, 4)
	if _, err := a.ReadAt(buf, 0); err != nil || string(buf) != "kept" {
		t.Fatalf("read after eviction: %q, %v", buf, err)
	}
	if size, err := a.Size(); err != nil || size != 4 {
		t.Fatalf("size after eviction: %d, %v", size, err)
	}
	if st := c.Stats(); st.Misses != 1 || st.Open != 1 {
		t.Fatalf("stats %+v, want one reopen and one handle open", st)
	}
	a.Close()
	b.Close()
}

// TestConcurrentReadsAndAppendsWithATinyCache reads and appends several
// logs from many goroutines through a cache of two handles on real files,
// so nearly every operation evicts another's file: a handle closed under an
// operation fails it (os.ErrClosed), and -race checks the cache's state.
func TestConcurrentReadsAndAppendsWithATinyCache(t *testing.T) {
	const (
		logs    = 4
		readers = 6
		rounds  = 300
		records = 2
		size    = 60
	)
	files := NewFileCache(2)
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 1
	ls := make([]*Log, logs)
	for i := range ls {
		l, err := Open(Options{FS: noSyncFS{vfs.OS}, Files: files, Dir: fmt.Sprintf("%s/t-%d", dir, i), Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
		t.Cleanup(func() { l.Close() })
		for n := range 10 {
			if _, err := l.AppendAsLeader(taggedBatch(i, n, records, size), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, logs+readers)
	for i, l := range ls { // one appender per log: rolls and background flushes too
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 10; n < 10+rounds/4; n++ {
				if _, err := l.AppendAsLeader(taggedBatch(i, n, records, size), 0); err != nil {
					errs <- fmt.Errorf("log %d append %d: %w", i, n, err)
					return
				}
			}
		}()
	}
	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range rounds {
				i := rng.IntN(logs)
				l := ls[i]
				batches := int(l.LogEndOffset() / records)
				n := rng.IntN(batches)
				res, err := l.Read(int64(n*records), 1, l.LogEndOffset())
				if err != nil {
					errs <- fmt.Errorf("log %d read %d: %w", i, n, err)
					return
				}
				b := recordbatch.Batch(res.Records)
				if err := b.Validate(); err != nil || b.BaseOffset() != int64(n*records) {
					errs <- fmt.Errorf("log %d read %d: batch at %d: %v", i, n, b.BaseOffset(), err)
					return
				}
				for r, err := range b.Records() {
					want := fmt.Sprintf("log %d batch %d record %d;", i, n, r.Offset-b.BaseOffset())
					if err != nil || !bytes.HasPrefix(r.Value, []byte(want)) {
						errs <- fmt.Errorf("log %d read %d: record %d is %.30q, want %q (%v)", i, n, r.Offset, r.Value, want, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitIdle(files)
	st := files.Stats()
	if st.Open > 2 || st.Evictions == 0 {
		t.Fatalf("cache %+v: want at most 2 open when idle, and evictions", st)
	}
	for i, l := range ls {
		readAll(t, l, 0, l.LogEndOffset(), 1<<20)
		checkTagged(t, l, i, 10+rounds/4-1, int64((10+rounds/4-1)*records), records, size)
	}
}
