package logstore

import (
	"sync"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// readCountingFS counts the reads of files opened through it, and their bytes.
type readCountingFS struct {
	vfs.FS
	mu           sync.Mutex
	reads, bytes int
}

func (f *readCountingFS) Create(name string) (vfs.File, error) { return f.wrap(f.FS.Create(name)) }
func (f *readCountingFS) Open(name string) (vfs.File, error)   { return f.wrap(f.FS.Open(name)) }
func (f *readCountingFS) OpenReadOnly(name string) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadOnly(name))
}

func (f *readCountingFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &readCountingFile{File: file, fs: f}, nil
}

func (f *readCountingFS) take() (reads, bytes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reads, bytes = f.reads, f.bytes
	f.reads, f.bytes = 0, 0
	return reads, bytes
}

type readCountingFile struct {
	vfs.File
	fs *readCountingFS
}

func (f *readCountingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.fs.mu.Lock()
	f.fs.reads++
	f.fs.bytes += n
	f.fs.mu.Unlock()
	return n, err
}

// A read of a batch appended lately, as a follower's or a tailing
// consumer's fetch is, starts at that batch: one read finds its header, one
// reads it. From the sparse index's entry (one per index.interval.bytes) it
// scanned everything appended after that entry on every fetch.
func TestReadAtTheLogEndStartsAtTheBatch(t *testing.T) {
	fsys := &readCountingFS{FS: newMem(t)}
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 1 << 20 // no index entry: the scan would start at position 0
	l := openLog(t, fsys, cfg, newClock())
	var last AppendInfo
	for i := range 40 {
		last = appendLeader(t, l, plain(1, 100, int64(1000+i)), 0)
	}
	size := l.active().size.Load()
	batch := size / 40
	fsys.take()
	res, err := l.Read(last.FirstOffset, 1<<20, l.LogEndOffset())
	if err != nil || len(res.Records) == 0 {
		t.Fatalf("Read(%d) = %d bytes, %v", last.FirstOffset, len(res.Records), err)
	}
	reads, bytes := fsys.take()
	t.Logf("reading the last of 40 batches (%d bytes each, %d in the segment): %d reads of the file, %d bytes", batch, size, reads, bytes)
	if reads > 2 || int64(bytes) > 512+batch {
		t.Fatalf("reading the last batch took %d reads and %d bytes, want at most 2 and %d: the read scanned from the segment's start", reads, bytes, 512+batch)
	}
	for off := range l.LogEndOffset() {
		checkReadAt(t, l, off)
	}
}

// A truncation forgets where the cut batches began: the batches appended
// after it sit at other positions, and a read starting from a forgotten
// start would begin in the middle of one of them. Old batches hold one
// large record each, new ones twenty small records, so the old starts of
// offsets below a new batch's lie at or past it, inside the new batches.
func TestTruncationForgetsTheRecentBatchStarts(t *testing.T) {
	l := openLog(t, newMem(t), DefaultConfig(), newClock())
	for i := range 10 {
		appendLeader(t, l, plain(1, 400, int64(1000+i)), 0)
	}
	if _, err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		appendLeader(t, l, plain(20, 1, int64(2000+i*20)), 1)
	}
	for off := range l.LogEndOffset() {
		checkReadAt(t, l, off)
	}
}
