package logstore

import (
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// Preallocation (Config.Preallocate, the preallocate topic config).
//
// Appending to a segment whose blocks are not allocated yet leaves the
// allocation to the kernel's writeback of those bytes, which on ext4 may
// read block bitmaps from the device while holding the inode's locks and
// the tail page the next append needs: a follower's append then waits for
// the device, and every acks=all write with it. With preallocate the
// blocks are reserved before the segment is written (fallocate with
// FALLOC_FL_KEEP_SIZE), so writeback only fills them.
//
// Reserving takes the inode's lock for as long as the allocation reads
// bitmaps, so it is never done on a file being appended to (measured:
// appends waited 150-290 ms behind a reservation made ahead of them in the
// active segment). A new log's first segment and the active segment of a
// log being loaded are reserved before any append; every later segment
// starts from the log's spare file, made and reserved in the background
// once the active segment is half full or half way to segment.ms, and
// renamed into place at the roll (a rename is a directory operation: it
// does not wait for any allocation). A roll that finds no spare ready
// starts an unreserved segment, as without preallocate.
//
// The file's size stays its committed bytes, so recovery, reads and the
// size of a log are what they are without preallocate. A sealed or closed
// segment gives back what it did not use beyond releaseSlack (truncating a file to its size
// frees its blocks past the end: in the background after a roll, since
// freeing may wait for the device); loading gives back what a crash left
// reserved, and deletes a spare file a crash left (its name ends in .tmp).
// Disk use per partition is up to twice segment.bytes while a spare waits
// beside a half-full active segment. A file system that cannot reserve
// (or one that is full) is logged once per segment and appended to as
// without preallocate.

// spareName is the log's spare segment file.
const spareName = "spare-segment" + logSuffix + tmpSuffix

func (l *Log) sparePath() string { return l.dir + "/" + spareName }

// takeSpareLocked hands the spare file to a roll: its path and reserved
// bytes, or "" when there is none ready or preallocate is off.
func (l *Log) takeSpareLocked(cfg Config) (string, int64) {
	if !cfg.Preallocate || !l.spareReady.CompareAndSwap(true, false) {
		return "", 0
	}
	l.files.reservedSegments.Add(1)
	return l.sparePath(), l.spareBytes.Load()
}

// maybeTendSpareLocked starts making the spare once the active segment
// (size bytes) is half full or half its segment.ms old, or removing it
// when preallocate was turned off; in a goroutine, one at a time, which
// Close waits for.
func (l *Log) maybeTendSpareLocked(act *segment, size int64, cfg Config) {
	var create bool
	switch {
	case cfg.Preallocate && !l.spareReady.Load():
		if l.spareFailedAt.Load() == act.base {
			return
		}
		half := size >= cfg.SegmentBytes/2 || (!act.rollBase.IsZero() && l.now().Sub(act.rollBase) >= cfg.rollAfter()/2)
		if !half {
			return
		}
		create = true
	case !cfg.Preallocate && l.spareReady.Load():
	default:
		return
	}
	if !l.spareBusy.CompareAndSwap(false, true) {
		return
	}
	n, base := min(cfg.SegmentBytes, maxSegmentFile), act.base
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer l.spareBusy.Store(false)
		l.syncMu.RLock() // truncation and closing wait
		defer l.syncMu.RUnlock()
		if l.filesClosed {
			return
		}
		if create {
			l.makeSpare(n, base)
		} else if l.spareReady.CompareAndSwap(true, false) {
			_ = l.fs.Remove(l.sparePath())
		}
	}()
}

// maxSegmentFile is the largest segment file: positions are 32-bit.
const maxSegmentFile = 1<<31 - 1

// makeSpare creates the spare file with n bytes of blocks reserved. A
// failure is logged and not retried before the segment based at base rolls.
func (l *Log) makeSpare(n, base int64) {
	began := time.Now()
	f, err := l.fs.Create(l.sparePath())
	var ok bool
	if err == nil {
		ok, err = vfs.ReserveBlocks(f, n)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil || !ok {
		_ = l.fs.Remove(l.sparePath())
		l.spareFailedAt.Store(base)
		if err != nil {
			l.files.reserveFailures.Add(1)
			l.logger.Warn("could not reserve the blocks of the next segment (preallocate); it will be allocated as it is written", "bytes", n, "err", err)
		}
		return
	}
	l.spareBytes.Store(n)
	l.spareReady.Store(true)
	l.logger.Debug("reserved the blocks of the next segment", "bytes", n, "took", time.Since(began))
}

// reserveLocked reserves the blocks of s, a segment no append is writing
// (a new log's first, or the active one while loading), up to n bytes.
func (l *Log) reserveLocked(s *segment, n int64) {
	ok, err := vfs.ReserveBlocks(s.log, min(n, maxSegmentFile))
	switch {
	case err != nil:
		l.files.reserveFailures.Add(1)
		l.logger.Warn("could not reserve the blocks of the active segment (preallocate); it will be allocated as it is written", "segment", s.logPath, "err", err)
	case ok:
		s.reserved.Store(min(n, maxSegmentFile))
		l.files.reservedSegments.Add(1)
	}
}

// reservedBeyondEnd returns the bytes of blocks s holds when that is more
// than releaseSlack past its bytes (one a crash left reserved), else 0.
func reservedBeyondEnd(s *segment) int64 {
	n, ok, err := vfs.AllocatedBytes(s.log)
	if !ok || err != nil || n <= s.size.Load()+releaseSlack {
		return 0
	}
	return n
}

// releaseSlack is the unused reservation a segment keeps: giving blocks
// back frees them, and freeing may wait for the device (a file system
// mounted with discard trims as it frees: 12-224 ms measured here, while a
// roll's appends waited), so a segment that rolled on its size, whose
// unused tail is less than a batch of max.message.bytes, keeps it. Extent-
// tree blocks and a last partial block are within it too.
const releaseSlack = 1 << 20

// releaseReservation gives back the blocks s holds beyond its committed
// bytes, if more than releaseSlack (truncating a file to its size frees
// its blocks past the end). The caller holds mu (the active segment) or
// syncMu (a sealed one: a truncation, which could make it active again,
// zeroes reserved first).
func (s *segment) releaseReservation() error {
	r := s.reserved.Swap(0)
	if r-s.size.Load() <= releaseSlack {
		return nil
	}
	if err := s.log.Truncate(s.size.Load()); err != nil {
		return storageErr(err, "giving back the reserved blocks of %s", s.logPath)
	}
	return nil
}

// releaseInBackgroundLocked gives back a just-sealed segment's unused
// reserved blocks in a goroutine, which Close waits for: freeing blocks can
// wait for the device (above).
func (l *Log) releaseInBackgroundLocked(s *segment) {
	if s.reserved.Load()-s.size.Load() <= releaseSlack {
		s.reserved.Store(0)
		return
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		l.syncMu.RLock() // truncation and closing wait; retention may close s (the call then fails)
		defer l.syncMu.RUnlock()
		if l.filesClosed {
			return
		}
		if err := s.releaseReservation(); err != nil {
			l.logger.Debug("could not give back reserved blocks", "segment", s.logPath, "err", err)
		}
	}()
}
