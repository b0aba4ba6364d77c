package logstore

import (
	"encoding/binary"
	"errors"
	"io"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/logstore/vfs"
)

// sparseIndex is a file of fixed-size, sorted entries: the offset index
// (relative offset -> position) or the time index (timestamp -> relative
// offset). The active segment keeps its newest entries in memory (mem, from
// entry memFrom on: the tail, where producers and caught-up consumers
// look) and buffers the ones not yet written; older entries and a sealed
// segment's are searched in the file. The window is bounded (memEntries),
// so an active segment's index memory does not grow with the segment.
//
// Writers hold the Log's mutex; mu only guards mem against concurrent
// lookups. Files are read while the Log's fileMu is held for reading.
type sparseIndex struct {
	path      string
	f         vfs.File // a FileCache file: open only while in use or cached
	entrySize int
	// memEntries bounds the in-memory window of an active index
	// (activeIndexMemEntries; smaller in tests).
	memEntries int

	mu      lockorder.RWMutex[lockorder.Leaf]
	mem     []byte // entries memFrom..count-1, encoded; nil when sealed
	memFrom int    // first entry in mem; every entry below it is in the file
	count   int    // entries in total
	written int    // entries already in the file
}

// activeIndexMemEntries is the in-memory window of an active index: 1,024
// entries are 8 KiB (offset index) and 12 KiB (time index), and cover the
// last 4 MiB of the log at the default index.interval.bytes.
const activeIndexMemEntries = 1024

func openIndex(files *FileCache, fsys vfs.FS, path string, entrySize int, create bool) (*sparseIndex, error) {
	var f vfs.File
	var err error
	if create {
		f, err = files.create(fsys, path)
	} else {
		f, err = files.openFile(fsys, path)
	}
	if err != nil {
		return nil, err
	}
	ix := &sparseIndex{path: path, f: f, entrySize: entrySize, memEntries: activeIndexMemEntries}
	if !create {
		size, err := f.Size()
		if err != nil {
			f.Close()
			return nil, err
		}
		if size%int64(entrySize) != 0 {
			f.Close()
			return nil, errors.New("size is not a whole number of entries")
		}
		ix.count = int(size / int64(entrySize))
		ix.written = ix.count
	}
	return ix, nil
}

// entry returns entry i (a copy for file-backed entries).
func (ix *sparseIndex) entryLocked(i int, scratch []byte) ([]byte, error) {
	if ix.mem != nil && i >= ix.memFrom {
		j := i - ix.memFrom
		return ix.mem[j*ix.entrySize : (j+1)*ix.entrySize], nil
	}
	if _, err := ix.f.ReadAt(scratch[:ix.entrySize], int64(i*ix.entrySize)); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return scratch[:ix.entrySize], nil
}

// countBeforeLocked returns how many leading entries before(entry) holds
// for (it must hold for a prefix). A search that ends in the in-memory
// window reads no file.
func (ix *sparseIndex) countBeforeLocked(before func(e []byte) bool, scratch []byte) (int, error) {
	lo, hi := 0, ix.count // invariant: entries < lo are before, entries >= hi are not
	if ix.mem != nil && ix.memFrom > 0 && ix.memFrom < ix.count {
		first, _ := ix.entryLocked(ix.memFrom, scratch)
		if before(first) {
			lo = ix.memFrom + 1
		} else {
			hi = ix.memFrom
		}
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		me, err := ix.entryLocked(mid, scratch)
		if err != nil {
			return 0, err
		}
		if before(me) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// search returns the last entry for which before(entry) is true, where before
// is true for a prefix of the entries; ok is false when there is none.
func (ix *sparseIndex) search(before func(e []byte) bool) (e []byte, ok bool, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	scratch := make([]byte, ix.entrySize)
	lo, err := ix.countBeforeLocked(before, scratch)
	if err != nil {
		return nil, false, err
	}
	if lo == 0 {
		return nil, false, nil
	}
	last, err := ix.entryLocked(lo-1, scratch)
	if err != nil {
		return nil, false, err
	}
	return append([]byte(nil), last...), true, nil
}

// last returns the final entry.
func (ix *sparseIndex) last() ([]byte, bool, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.count == 0 {
		return nil, false, nil
	}
	e, err := ix.entryLocked(ix.count-1, make([]byte, ix.entrySize))
	if err != nil {
		return nil, false, err
	}
	return append([]byte(nil), e...), true, nil
}

// active reports whether the entries are held in memory (the index can grow).
func (ix *sparseIndex) active() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.mem != nil
}

// append adds an entry to an active index. When the in-memory window is
// twice its bound, the entries not yet in the file are written (not
// synced, as a flush does) and the older half of the window is dropped.
// If that write fails the window is kept whole: the entries stay
// searchable, and the next flush or seal reports the disk's error.
// Only writers (holding the Log mutex) call it.
func (ix *sparseIndex) append(e []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.mem = append(ix.mem, e...)
	ix.count++
	if ix.count-ix.memFrom < 2*ix.memEntries || ix.writePendingLocked() != nil {
		return
	}
	drop := ix.count - ix.memFrom - ix.memEntries
	ix.mem = append(ix.mem[:0:0], ix.mem[drop*ix.entrySize:]...)
	ix.memFrom += drop
}

// writePendingLocked writes the entries not yet in the file; mu is held
// (for reading at least) by a writer.
func (ix *sparseIndex) writePendingLocked() error {
	if ix.mem == nil || ix.written == ix.count {
		return nil
	}
	pending := ix.mem[(ix.written-ix.memFrom)*ix.entrySize : (ix.count-ix.memFrom)*ix.entrySize]
	if _, err := ix.f.WriteAt(pending, int64(ix.written*ix.entrySize)); err != nil {
		return err
	}
	ix.written = ix.count // only writers (holding the Log mutex) change written
	return nil
}

// countBefore is countBeforeLocked for callers not holding mu.
func (ix *sparseIndex) countBefore(before func(e []byte) bool) (int, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.countBeforeLocked(before, make([]byte, ix.entrySize))
}

// truncateEntries keeps the first n entries, in memory and in the file.
func (ix *sparseIndex) truncateEntries(n int) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if n >= ix.count {
		return nil
	}
	if ix.mem != nil {
		if n >= ix.memFrom {
			ix.mem = ix.mem[:(n-ix.memFrom)*ix.entrySize]
		} else {
			ix.mem, ix.memFrom = ix.mem[:0], n
		}
	}
	ix.count = n
	if ix.written > n {
		ix.written = n
		return ix.f.Truncate(int64(n * ix.entrySize))
	}
	return nil
}

// flush writes the buffered entries to the file (without syncing).
func (ix *sparseIndex) flush() error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.writePendingLocked()
}

// seal writes pending entries and drops the in-memory copy.
func (ix *sparseIndex) seal() error {
	if err := ix.flush(); err != nil {
		return err
	}
	ix.mu.Lock()
	ix.mem = nil
	ix.mu.Unlock()
	return nil
}

// activate loads the file's entries into memory so the index can grow.
func (ix *sparseIndex) activate() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.mem != nil {
		return nil
	}
	from := max(ix.count-ix.memEntries, 0)
	n := (ix.count - from) * ix.entrySize
	buf := make([]byte, n, max(n, 1024))
	if len(buf) > 0 {
		if _, err := ix.f.ReadAt(buf, int64(from*ix.entrySize)); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	ix.mem, ix.memFrom = buf, from
	return nil
}

// reset empties the index, in memory and in the file, leaving it active.
func (ix *sparseIndex) reset() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.mem, ix.memFrom = make([]byte, 0, 1024), 0
	ix.count, ix.written = 0, 0
	return ix.f.Truncate(0)
}

func (ix *sparseIndex) sync() error  { return ix.f.Sync() }
func (ix *sparseIndex) close() error { return ix.f.Close() }

// Offset index entries: relative base offset of a batch, and its position.
const offsetEntrySize = 8

func offsetEntry(rel uint32, pos uint32) []byte {
	var e [offsetEntrySize]byte
	binary.BigEndian.PutUint32(e[0:], rel)
	binary.BigEndian.PutUint32(e[4:], pos)
	return e[:]
}

func decodeOffsetEntry(e []byte) (rel uint32, pos uint32) {
	return binary.BigEndian.Uint32(e[0:]), binary.BigEndian.Uint32(e[4:])
}

// Time index entries: the largest timestamp seen up to an offset, and that
// offset (relative). Every record at or below the offset has a timestamp no
// larger than the entry's.
const timeEntrySize = 12

func timeEntry(ts int64, rel uint32) []byte {
	var e [timeEntrySize]byte
	binary.BigEndian.PutUint64(e[0:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], rel)
	return e[:]
}

func decodeTimeEntry(e []byte) (ts int64, rel uint32) {
	return int64(binary.BigEndian.Uint64(e[0:])), binary.BigEndian.Uint32(e[8:])
}
