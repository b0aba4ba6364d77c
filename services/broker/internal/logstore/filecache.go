package logstore

import (
	"errors"
	"io/fs"
	"os"
	"sync/atomic"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/logstore/vfs"
)

// DefaultMaxOpenFiles is log.max.open.files' default: well under a typical
// 20,000–65,536 descriptor limit, leaving room for sockets, checkpoints and
// the handles pinned by in-flight operations.
const DefaultMaxOpenFiles = 8192

// FileCache bounds the segment files (.log, .index, .timeindex) the
// broker holds open, whatever the number of partitions. A segment does not
// own a descriptor: it names its files, and every operation on one borrows
// the open handle from the cache (opening it on a miss) and returns it when
// done. Handles no operation is using sit in a least-recently-used list;
// when more than the bound are open, the least recently used idle ones are
// closed. A borrowed (pinned) handle is never closed by eviction, so the
// bound can be exceeded by the handles in use at that moment, and an idle
// partition holds no descriptor at all once its files are evicted.
//
// Closing a handle with unsynced writes loses nothing: the data is in the
// page cache, and a later Sync through a new handle writes it back and
// reports a write-back error no one has seen (Linux samples an unseen error
// for new descriptors). A close error of an evicted handle is kept and
// returned by that file's next Sync and Close, so a flush cannot miss it.
//
// Its mutex ranks above the leaves: file operations happen under index
// locks. Opening and closing run outside it.
type FileCache struct {
	mu    lockorder.Mutex[lockorder.FileCache]
	max   int // 0: no bound
	open  int // handles open: pinned or idle
	inUse int // handles pinned by operations
	// idle is the sentinel of a circular list of open, unpinned files,
	// most recently used first.
	idle cachedFile

	hits, misses, evictions atomic.Int64
	cacheDropped            atomic.Int64 // bytes DropCache was asked to drop
	// reservedSegments counts segments started with their blocks reserved
	// (preallocate); reserveFailures the reservations that failed.
	reservedSegments, reserveFailures atomic.Int64
}

// NewFileCache returns a cache that keeps at most max handles open, plus
// any beyond that in use at the moment; max <= 0 means no bound (every file
// stays open until closed, as when each segment owned its descriptors).
func NewFileCache(max int) *FileCache {
	c := &FileCache{max: max}
	c.idle.prev, c.idle.next = &c.idle, &c.idle
	return c
}

// FileCacheStats is a snapshot of a cache's counters.
type FileCacheStats struct {
	Open      int   // handles open now
	InUse     int   // of those, handles operations are using
	Hits      int64 // operations that found their handle open
	Misses    int64 // operations that had to open it again
	Evictions int64 // handles closed to stay within the bound
	// CacheDroppedBytes counts the bytes of follower segments dropped from
	// the page cache behind their tail (Config.FollowerCachedBytes).
	CacheDroppedBytes int64
	// ReservedSegments counts the segments started with their blocks
	// reserved (preallocate), ReserveFailures the reservations the file
	// system refused (full, or unable).
	ReservedSegments, ReserveFailures int64
}

// Stats returns the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	open, inUse := c.open, c.inUse
	c.mu.Unlock()
	return FileCacheStats{Open: open, InUse: inUse, Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		CacheDroppedBytes: c.cacheDropped.Load(), ReservedSegments: c.reservedSegments.Load(), ReserveFailures: c.reserveFailures.Load()}
}

// create creates (or truncates) path and returns it as a cached file.
func (c *FileCache) create(fsys vfs.FS, path string) (vfs.File, error) {
	f, err := fsys.Create(path)
	if err != nil {
		return nil, err
	}
	return c.adopt(fsys, path, f), nil
}

// openFile opens an existing path (read-write) as a cached file. The file
// is opened now, so a missing or unreadable one is reported here.
func (c *FileCache) openFile(fsys vfs.FS, path string) (vfs.File, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	return c.adopt(fsys, path, f), nil
}

func (c *FileCache) adopt(fsys vfs.FS, path string, f vfs.File) *cachedFile {
	cf := &cachedFile{c: c, fs: fsys, path: path}
	c.mu.Lock()
	cf.f = f
	c.open++
	c.pushIdleLocked(cf)
	victims := c.evictLocked()
	c.mu.Unlock()
	c.closeVictims(victims)
	return cf
}

func (c *FileCache) pushIdleLocked(cf *cachedFile) {
	cf.prev, cf.next = &c.idle, c.idle.next
	cf.prev.next, cf.next.prev = cf, cf
}

func (c *FileCache) unlinkIdleLocked(cf *cachedFile) {
	cf.prev.next, cf.next.prev = cf.next, cf.prev
	cf.prev, cf.next = nil, nil
}

type victim struct {
	cf *cachedFile
	f  vfs.File
}

// evictLocked detaches the least recently used idle handles while more
// than max are open; the caller closes them after unlocking.
func (c *FileCache) evictLocked() []victim {
	var out []victim
	for c.max > 0 && c.open > c.max && c.idle.prev != &c.idle {
		cf := c.idle.prev
		c.unlinkIdleLocked(cf)
		out = append(out, victim{cf, cf.f})
		cf.f = nil
		c.open--
	}
	return out
}

func (c *FileCache) closeVictims(vs []victim) {
	for _, v := range vs {
		c.evictions.Add(1)
		if err := v.f.Close(); err != nil {
			c.mu.Lock()
			v.cf.err = errors.Join(v.cf.err, err)
			c.mu.Unlock()
		}
	}
}

// cachedFile is a segment file whose descriptor the FileCache may close
// while it is idle; it implements vfs.File, each call borrowing the handle
// for its duration. The Log's locks keep it from being closed (or its
// file removed or renamed) while an operation is in flight.
type cachedFile struct {
	c    *FileCache
	fs   vfs.FS
	path string

	// Guarded by c.mu.
	f          vfs.File // nil while evicted
	pins       int      // operations using f
	closed     bool
	err        error       // close error of an evicted handle
	prev, next *cachedFile // links in c.idle while f != nil && pins == 0
}

// acquire returns the open handle, opening it again if it was evicted, and
// pins it until release.
func (cf *cachedFile) acquire() (vfs.File, error) {
	c := cf.c
	c.mu.Lock()
	if cf.closed {
		c.mu.Unlock()
		return nil, &fs.PathError{Op: "use", Path: cf.path, Err: os.ErrClosed}
	}
	if cf.f != nil {
		if cf.pins == 0 {
			c.unlinkIdleLocked(cf)
			c.inUse++
		}
		cf.pins++
		c.mu.Unlock()
		c.hits.Add(1)
		return cf.f, nil
	}
	c.mu.Unlock()

	f, err := cf.fs.Open(cf.path)
	if err != nil {
		return nil, err
	}
	c.misses.Add(1)
	var extra vfs.File
	c.mu.Lock()
	switch {
	case cf.closed:
		c.mu.Unlock()
		f.Close()
		return nil, &fs.PathError{Op: "use", Path: cf.path, Err: os.ErrClosed}
	case cf.f != nil: // another operation reopened it meanwhile
		extra = f
		if cf.pins == 0 {
			c.unlinkIdleLocked(cf)
			c.inUse++
		}
	default:
		cf.f = f
		c.open++
		c.inUse++
	}
	cf.pins++
	f = cf.f
	victims := c.evictLocked()
	c.mu.Unlock()
	if extra != nil {
		extra.Close()
	}
	c.closeVictims(victims)
	return f, nil
}

// release unpins the handle; the last operation out puts it on the idle
// list, or closes it if the file was closed meanwhile.
func (cf *cachedFile) release() {
	c := cf.c
	c.mu.Lock()
	cf.pins--
	if cf.pins > 0 {
		c.mu.Unlock()
		return
	}
	c.inUse--
	if cf.closed {
		f := cf.f
		cf.f = nil
		c.open--
		c.mu.Unlock()
		f.Close()
		return
	}
	c.pushIdleLocked(cf)
	victims := c.evictLocked()
	c.mu.Unlock()
	c.closeVictims(victims)
}

func (cf *cachedFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	return f.ReadAt(p, off)
}

func (cf *cachedFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	return f.WriteAt(p, off)
}

// Sync also reports a close error of an earlier, evicted handle.
func (cf *cachedFile) Sync() error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	err = f.Sync()
	cf.c.mu.Lock()
	err = errors.Join(cf.err, err)
	cf.c.mu.Unlock()
	return err
}

// StartWriteback starts writeback of a range of the file (when its file
// system can), pinning the handle for the call.
func (cf *cachedFile) StartWriteback(off, n int64) error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	return vfs.StartWriteback(f, off, n)
}

// DropCache drops a range of the file's clean pages from the page cache
// (when its file system can), pinning the handle for the call, and counts
// the bytes asked for in the cache's stats.
func (cf *cachedFile) DropCache(off, n int64) error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	cf.c.cacheDropped.Add(n)
	return vfs.DropCache(f, off, n)
}

// ReserveBlocks and AllocatedBytes pass the calls to the file (when its
// file system can), pinning the handle for the call.
func (cf *cachedFile) ReserveBlocks(n int64) error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	if ok, err := vfs.ReserveBlocks(f, n); !ok {
		return errors.ErrUnsupported
	} else {
		return err
	}
}

func (cf *cachedFile) AllocatedBytes() (int64, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	n, ok, err := vfs.AllocatedBytes(f)
	if !ok {
		return 0, errors.ErrUnsupported
	}
	return n, err
}

func (cf *cachedFile) Truncate(size int64) error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	return f.Truncate(size)
}

func (cf *cachedFile) Size() (int64, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	return f.Size()
}

func (cf *cachedFile) Name() string { return cf.path }

// Close closes the handle (when no operation is using it; else the last
// one to finish does) and makes later operations fail. Later calls do
// nothing.
func (cf *cachedFile) Close() error {
	c := cf.c
	c.mu.Lock()
	if cf.closed {
		c.mu.Unlock()
		return nil
	}
	cf.closed = true
	err := cf.err
	var f vfs.File
	if cf.f != nil && cf.pins == 0 {
		c.unlinkIdleLocked(cf)
		f = cf.f
		cf.f = nil
		c.open--
	}
	c.mu.Unlock()
	if f != nil {
		err = errors.Join(err, f.Close())
	}
	return err
}
