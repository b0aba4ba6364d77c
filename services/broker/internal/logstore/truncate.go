package logstore

import (
	"slices"
	"sort"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// TruncateTo removes every record at or after offset, in whole batches: when
// offset falls inside a batch, that whole batch goes too, so the new LEO is
// the batch's base offset, at or below offset. It returns the new LEO. An
// offset at or beyond the LEO removes no record, but the epoch cache still
// loses the entries starting at or after the LEO, as Kafka's truncateTo
// does: a replica that led an epoch without writing in it keeps that epoch's
// entry at its LEO, and as a follower it would keep announcing an epoch the
// leader's log does not have. One below the first segment empties the log
// and restarts it at offset (TruncateFullyAndStartAt).
//
// The leader-epoch cache loses entries starting at or after the new LEO, the
// producer table is rebuilt as of the new LEO, the recovery point and log
// start are lowered to it if above. The truncation is made durable before
// returning. A failure part-way marks the log failed (KAFKA_STORAGE_ERROR on
// every later write) since its files may no longer agree.
func (l *Log) truncateTo(offset int64) (int64, error) {
	if offset < 0 {
		return 0, kerr.New(kerr.InvalidRequest, "truncation offset %d is negative", offset)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return 0, err
	}
	leo := l.leo.Load()
	if offset >= leo {
		// A failed checkpoint write leaves the cache as it was, consistent
		// with the log: the caller may retry.
		if err := l.epochs.TruncateFromEnd(leo); err != nil {
			return 0, err
		}
		return leo, nil
	}
	if offset < l.segments()[0].base {
		if err := l.truncateFullyLocked(offset); err != nil {
			return 0, err
		}
		if err := l.recoveryPointLowered(); err != nil {
			return 0, err
		}
		return offset, nil
	}
	newLEO, err := l.truncateLocked(offset)
	if err != nil {
		return 0, l.fail(err)
	}
	if err := l.recoveryPointLowered(); err != nil {
		return 0, err
	}
	return newLEO, nil
}

// recoveryPointLowered has the owner persist the lowered recovery point; if
// it cannot, the log fails: a stale, higher checkpoint would let loading
// trust data written after the truncation without validating it.
func (l *Log) recoveryPointLowered() error {
	if l.onRPLowered != nil {
		if err := l.onRPLowered(); err != nil {
			return l.fail(err)
		}
	}
	return nil
}

func (l *Log) truncateLocked(offset int64) (int64, error) {
	l.truncations.Add(1)
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	segs := l.segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	s := segs[i]
	pos, h, found, err := findBatch(s, offset, s.size.Load())
	if err != nil {
		return 0, err
	}
	newLEO := offset
	if found && h.BaseOffset() <= offset {
		newLEO = h.BaseOffset()
	} else {
		// offset is in a gap compaction left (the batch found, if any, is
		// the first after it): the log ends where the last batch before it
		// does, as loading would find it after a crash, and no read meets
		// a gap at the end of the log.
		if newLEO, err = endBefore(s, offset, pos); err != nil {
			return 0, err
		}
	}
	var retired []string
	defer func() { l.unlinkInBackgroundLocked(retired) }()
	for j := len(segs) - 1; j > i; j-- {
		names, err := segs[j].retire(l.fs)
		retired = append(retired, names...)
		if err != nil {
			l.publish(slices.Clone(segs[:j]))
			return 0, err
		}
		l.stats.deletedSegments.Add(1)
	}
	l.publish(slices.Clone(segs[:i+1]))
	if err := l.fs.SyncDir(l.dir); err != nil {
		return 0, storageErr(err, "syncing %s", l.dir)
	}
	if err := l.cutSegment(s, pos, newLEO); err != nil {
		return 0, err
	}
	l.leo.Store(newLEO)
	l.noteTruncation(newLEO)
	l.afterTruncateLocked(newLEO)
	if err := l.truncateCleanerCheckpointLocked(newLEO); err != nil {
		return 0, err
	}
	if err := l.lowerFlushedOffset(newLEO); err != nil {
		return 0, err
	}
	return newLEO, nil
}

// cutSegment truncates s, which becomes the active segment, to pos, where
// the batch at offset next began, and trims its indexes to match.
func (l *Log) cutSegment(s *segment, pos, next int64) error {
	s.reserved.Store(0) // the cut frees the blocks past pos; a background release must not cut again
	s.recent.clear()    // before the cut: a later append may reuse the positions
	if err := s.log.Truncate(pos); err != nil {
		return storageErr(err, "truncating %s to %d", s.logPath, pos)
	}
	if err := s.log.Sync(); err != nil {
		return storageErr(err, "syncing %s", s.logPath)
	}
	rel := next - s.base
	for _, ix := range []*sparseIndex{s.index, s.timeIndex} {
		if err := ix.activate(); err != nil {
			return storageErr(err, "reading %s", ix.path)
		}
	}
	keepOffsets, err := s.index.countBefore(func(e []byte) bool {
		r, _ := decodeOffsetEntry(e)
		return int64(r) < rel
	})
	if err != nil {
		return storageErr(err, "reading %s", s.index.path)
	}
	if err := s.index.truncateEntries(keepOffsets); err != nil {
		return storageErr(err, "truncating %s", s.index.path)
	}
	keepTimes, err := s.timeIndex.countBefore(func(e []byte) bool {
		_, r := decodeTimeEntry(e)
		return int64(r) < rel
	})
	if err != nil {
		return storageErr(err, "reading %s", s.timeIndex.path)
	}
	if err := s.timeIndex.truncateEntries(keepTimes); err != nil {
		return storageErr(err, "truncating %s", s.timeIndex.path)
	}
	s.size.Store(pos)
	s.next = next
	// What is appended from pos on is new to the page cache: writebacks
	// and a follower's drops resume from there, not from where they had
	// reached. syncMu is held, so no writeback goroutine runs meanwhile.
	if s.writtenBack.Load() > pos {
		s.writtenBack.Store(pos)
	}
	if s.droppedTo.Load() > pos {
		s.droppedTo.Store(pos &^ (dropAlign - 1))
	}
	return l.resetSegmentStats(s)
}

// resetSegmentStats recomputes the timestamp and index-interval bookkeeping
// of a segment after truncation: the last time-index entry covers what is
// before it, and the batches from there on are walked.
func (l *Log) resetSegmentStats(s *segment) error {
	size := s.size.Load()
	s.maxTS.Store(-1)
	s.offsetOfMaxTS, s.lastTimeEntryTS = s.base, -1
	from := int64(0)
	if e, ok, _ := s.timeIndex.last(); ok {
		ts, rel := decodeTimeEntry(e)
		s.maxTS.Store(ts)
		s.lastTimeEntryTS = ts
		s.offsetOfMaxTS = s.base + int64(rel)
		p, err := s.lookup(s.offsetOfMaxTS)
		if err != nil {
			return err
		}
		from = p
	}
	lastIndexed := int64(0)
	if e, ok, _ := s.index.last(); ok {
		_, p := decodeOffsetEntry(e)
		lastIndexed = int64(p)
	}
	err := walkHeaders(s, from, size, func(h recordbatch.Batch, _, _ int64) bool {
		if ts := h.MaxTimestamp(); ts > s.maxTS.Load() {
			s.maxTS.Store(ts)
			s.offsetOfMaxTS = h.LastOffset()
		}
		return true
	})
	if err != nil {
		return tornAsStorage(err, s.logPath)
	}
	s.bytesSinceIndex = size - lastIndexed
	switch {
	case size == 0:
		s.rollBase = time.Time{}
	case s.rollBase.IsZero():
		s.rollBase = l.now()
	}
	return nil
}

// afterTruncateLocked brings the epoch cache, producer table, recovery point
// and log start in line with a new, lower LEO.
func (l *Log) afterTruncateLocked(leo int64) {
	if err := l.epochs.TruncateFromEnd(leo); err != nil {
		l.fail(err)
	}
	if l.recoveryPoint.Load() > leo {
		l.recoveryPoint.Store(leo)
	}
	if l.logStart.Load() > leo {
		l.logStart.Store(leo)
	}
	// The producer table is reloaded as of the new LEO: newest snapshot at
	// or below it plus a replay; snapshots above it are deleted.
	if err := l.loadProducers(leo); err != nil {
		l.fail(err)
	}
}

// TruncateFullyAndStartAt deletes the whole log and restarts it, empty, at
// offset: log start, LEO and recovery point all become offset, the epoch
// cache and producer table are cleared. A follower does this when its LEO is
// below the leader's log start.
func (l *Log) truncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return kerr.New(kerr.InvalidRequest, "start offset %d is negative", offset)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return err
	}
	if err := l.truncateFullyLocked(offset); err != nil {
		return err
	}
	return l.recoveryPointLowered()
}

func (l *Log) truncateFullyLocked(offset int64) error {
	l.waitRetirementsLocked() // the new segment's names may be a retiring one's
	l.truncations.Add(1)
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	segs := l.segments()
	var retired []string
	defer func() { l.unlinkInBackgroundLocked(retired) }()
	for j := len(segs) - 1; j >= 0; j-- {
		names, err := segs[j].retire(l.fs)
		retired = append(retired, names...)
		if err != nil {
			l.publish(slices.Clone(segs[:max(j, 1)]))
			return l.fail(err)
		}
		l.stats.deletedSegments.Add(1)
	}
	snaps, err := listSnapshots(l.fs, l.dir)
	if err != nil {
		return l.fail(err)
	}
	if err := l.retireSnapshotsLocked(snaps); err != nil {
		return l.fail(err)
	}
	spare, spareBytes := l.takeSpareLocked(l.Config())
	s, err := createSegmentFrom(l.files, l.fs, l.dir, offset, spare, spareBytes)
	if err != nil {
		return l.fail(err)
	}
	l.publish([]*segment{s})
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(storageErr(err, "syncing %s", l.dir))
	}
	l.leo.Store(offset)
	l.logStart.Store(offset)
	l.recoveryPoint.Store(offset)
	l.noteTruncation(-1)
	l.producers = newProducerState()
	if err := l.epochs.Clear(); err != nil {
		return l.fail(err)
	}
	if err := l.truncateCleanerCheckpointLocked(offset); err != nil {
		return l.fail(err)
	}
	if err := l.lowerFlushedOffset(offset); err != nil {
		return l.fail(err)
	}
	return nil
}

// noteTruncation lowers truncatedTo to offset (-1: everything went).
func (l *Log) noteTruncation(offset int64) {
	for {
		cur := l.truncatedTo.Load()
		if offset >= cur || l.truncatedTo.CompareAndSwap(cur, offset) {
			return
		}
	}
}

// endBefore returns the end of the last batch of s that lies before
// position pos (s.base when there is none); off is an offset at or after it.
func endBefore(s *segment, off, pos int64) (int64, error) {
	start, err := s.lookup(off)
	if err != nil {
		return 0, err
	}
	end := s.base
	err = walkHeaders(s, start, pos, func(h recordbatch.Batch, _, _ int64) bool {
		end = h.NextOffset()
		return true
	})
	return end, tornAsStorage(err, s.logPath)
}
