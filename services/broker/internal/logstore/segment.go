package logstore

import (
	"errors"
	"math"
	"sync/atomic"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// segment is one "<base>.log" file with its offset and time indexes.
//
// size and maxTS are published atomically for readers; the other mutable
// fields belong to the Log's writer (its mutex).
type segment struct {
	base      int64
	dir       string
	logPath   string
	log       vfs.File // FileCache files: a descriptor is held only while in use or cached
	index     *sparseIndex
	timeIndex *sparseIndex

	size atomic.Int64 // bytes of whole, committed batches
	// writtenBack is where the last writeback started by the Log ended
	// (Config.WritebackBytes); written under the Log's mu.
	writtenBack atomic.Int64
	// droppedTo is where the page-cache drop behind a follower's tail
	// ended (Config.FollowerCachedBytes); used by the one writeback
	// goroutine a log runs at a time, and lowered by a truncation
	// (under syncMu held for writing, so never while that goroutine runs).
	droppedTo atomic.Int64
	maxTS     atomic.Int64 // largest batch maxTimestamp, -1 when empty

	// indexesDurable is false from sealing until a flush has synced the
	// sealed indexes; the recovery point may not cover the segment before.
	indexesDurable atomic.Bool

	next            int64 // offset after the last batch
	offsetOfMaxTS   int64
	lastTimeEntryTS int64 // timestamp of the last time-index entry, -1 when none
	bytesSinceIndex int64
	rollBase        time.Time // when segment.ms starts counting; zero until the first append
	// reserved is how many of the file's first bytes had blocks reserved
	// (preallocate; 0: none); what the segment did not use is given back
	// after it is sealed (in the background) or when it is closed. Zeroed
	// by whoever gives it back, a truncation included (under syncMu held
	// for writing).
	reserved atomic.Int64

	recent recentStarts // where the last batches begin: a read at the log's end starts there
}

func segmentPaths(dir string, base int64) (log, index, timeIndex string) {
	return dir + "/" + offsetName(base, logSuffix), dir + "/" + offsetName(base, indexSuffix), dir + "/" + offsetName(base, timeIndexSuffix)
}

// createSegment makes a new, empty, active segment. On failure nothing is
// left behind.
func createSegment(files *FileCache, fsys vfs.FS, dir string, base int64) (*segment, error) {
	return createSegmentFrom(files, fsys, dir, base, "", 0)
}

// createSegmentFrom is createSegment whose log file is spare, renamed into
// place, when spare is not empty and the rename works (a spare file holds
// spareBytes of reserved blocks and no bytes); otherwise a new file.
func createSegmentFrom(files *FileCache, fsys vfs.FS, dir string, base int64, spare string, spareBytes int64) (*segment, error) {
	lp, ip, tp := segmentPaths(dir, base)
	s := &segment{base: base, dir: dir, logPath: lp, next: base, offsetOfMaxTS: base, lastTimeEntryTS: -1}
	s.maxTS.Store(-1)
	fail := func(err error) (*segment, error) {
		s.closeFiles()
		for _, p := range []string{tp, ip, lp} {
			_ = fsys.Remove(p)
		}
		return nil, err
	}
	var err error
	if spare != "" && fsys.Rename(spare, lp) == nil {
		if s.log, err = files.openFile(fsys, lp); err != nil {
			return fail(storageErr(err, "opening segment %s", lp))
		}
		s.reserved.Store(spareBytes)
	} else if s.log, err = files.create(fsys, lp); err != nil {
		return fail(storageErr(err, "creating segment %s", lp))
	}
	if s.index, err = openIndex(files, fsys, ip, offsetEntrySize, true); err != nil {
		return fail(storageErr(err, "creating index %s", ip))
	}
	if s.timeIndex, err = openIndex(files, fsys, tp, timeEntrySize, true); err != nil {
		return fail(storageErr(err, "creating time index %s", tp))
	}
	s.index.mem = make([]byte, 0, 1024)
	s.timeIndex.mem = make([]byte, 0, 1024)
	return s, nil
}

func (s *segment) closeFiles() error {
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	if s.index != nil {
		errs = append(errs, s.index.close())
	}
	if s.timeIndex != nil {
		errs = append(errs, s.timeIndex.close())
	}
	return errors.Join(errs...)
}

// remove closes and deletes the segment's files, log file first, so that a
// crash part-way leaves only orphan indexes, which loading deletes.
func (s *segment) remove(fsys vfs.FS) error {
	s.closeFiles()
	lp, ip, tp := segmentPaths(s.dir, s.base)
	var errs []error
	for _, p := range []string{lp, ip, tp} {
		if err := fsys.Remove(p); err != nil && !vfs.IsNotExist(err) {
			errs = append(errs, storageErr(err, "deleting %s", p))
		}
	}
	return errors.Join(errs...)
}

// retire closes the segment's files and renames them (renameToDeleted).
func (s *segment) retire(fsys vfs.FS) ([]string, error) {
	s.closeFiles()
	return s.renameToDeleted(fsys)
}

// renameToDeleted renames each of the segment's files to its name with
// .deleted added, log file first (a crash part-way leaves orphan indexes,
// which loading deletes, as it deletes .deleted files), and returns the new
// names for unlinking later: a rename frees no blocks, so it does not wait
// for the device the way an unlink can.
func (s *segment) renameToDeleted(fsys vfs.FS) ([]string, error) {
	lp, ip, tp := segmentPaths(s.dir, s.base)
	var names []string
	var errs []error
	for _, p := range []string{lp, ip, tp} {
		switch err := fsys.Rename(p, p+deletedSuffix); {
		case err == nil:
			names = append(names, p+deletedSuffix)
		case !vfs.IsNotExist(err):
			errs = append(errs, storageErr(err, "retiring %s", p))
		}
	}
	return names, errors.Join(errs...)
}

// fits reports whether n more bytes, ending at offset last, can go in this
// segment without exceeding limit or the index's 32-bit fields.
func (s *segment) fits(n int64, last int64, limit int64) bool {
	size := s.size.Load()
	if size > 0 && size+n > limit {
		return false
	}
	return size+n <= math.MaxInt32 && last-s.base <= math.MaxInt32
}

// indexBatch records b, written at pos, in the indexes and the segment's
// timestamp bookkeeping (writer only).
func (s *segment) indexBatch(b recordbatch.Batch, pos int64, interval int64) {
	if ts := b.MaxTimestamp(); ts > s.maxTS.Load() {
		s.maxTS.Store(ts)
		s.offsetOfMaxTS = b.LastOffset()
	}
	if s.bytesSinceIndex > interval {
		s.index.append(offsetEntry(uint32(b.BaseOffset()-s.base), uint32(pos)))
		s.maybeAppendTimeEntry()
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(len(b))
	s.next = b.NextOffset()
	s.recent.add(b.BaseOffset()-s.base, pos)
}

// maybeAppendTimeEntry adds (maxTS, offsetOfMaxTS) when it moves the
// time index forward.
func (s *segment) maybeAppendTimeEntry() {
	ts := s.maxTS.Load()
	if ts < 0 || ts <= s.lastTimeEntryTS {
		return
	}
	s.timeIndex.append(timeEntry(ts, uint32(s.offsetOfMaxTS-s.base)))
	s.lastTimeEntryTS = ts
}

// seal makes the segment read-only: the final time-index entry is added and
// both indexes are written out and dropped from memory.
func (s *segment) seal() error {
	if s.timeIndex.active() {
		s.maybeAppendTimeEntry()
	}
	s.indexesDurable.Store(false)
	if err := s.index.seal(); err != nil {
		return storageErr(err, "writing index %s", s.index.path)
	}
	if err := s.timeIndex.seal(); err != nil {
		return storageErr(err, "writing time index %s", s.timeIndex.path)
	}
	return nil
}

// syncLog makes the log file durable.
func (s *segment) syncLog() error {
	if err := s.log.Sync(); err != nil {
		return storageErr(err, "syncing %s", s.logPath)
	}
	return nil
}

// syncIndexes makes a sealed segment's index files durable.
func (s *segment) syncIndexes() error {
	if err := s.index.sync(); err != nil {
		return storageErr(err, "syncing %s", s.index.path)
	}
	if err := s.timeIndex.sync(); err != nil {
		return storageErr(err, "syncing %s", s.timeIndex.path)
	}
	s.indexesDurable.Store(true)
	return nil
}

// lookup returns the position of the last indexed batch whose base offset is
// at most off: a place to start scanning for off.
func (s *segment) lookup(off int64) (int64, error) {
	rel := off - s.base
	e, ok, err := s.index.search(func(e []byte) bool {
		r, _ := decodeOffsetEntry(e)
		return int64(r) <= rel
	})
	if err != nil {
		return 0, storageErr(err, "reading index %s", s.index.path)
	}
	if !ok {
		return 0, nil
	}
	_, pos := decodeOffsetEntry(e)
	return int64(pos), nil
}

// timeLookup returns the offset of the last time-index entry whose timestamp
// is below ts (every record at or below it is older than ts), or the
// segment base: the first record at or after ts is not before it.
func (s *segment) timeLookup(ts int64) (int64, error) {
	e, ok, err := s.timeIndex.search(func(e []byte) bool {
		t, _ := decodeTimeEntry(e)
		return t < ts
	})
	if err != nil {
		return 0, storageErr(err, "reading time index %s", s.timeIndex.path)
	}
	if !ok {
		return s.base, nil
	}
	_, rel := decodeTimeEntry(e)
	return s.base + int64(rel), nil
}
