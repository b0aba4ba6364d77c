package logstore

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// Open opens (or creates) the partition log in opts.Dir, recovering it as
// DESIGN.md ("Storage: the partition log", Recovery) describes. A damaged tail is cut with a warning and
// counted in Stats; an error is returned only when the log cannot be loaded
// safely (unreadable directory or file, corrupt leader-epoch checkpoint), and
// names the file and the reason.
func Open(opts Options) (*Log, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if opts.Files == nil {
		opts.Files = NewFileCache(0)
	}
	l := &Log{fs: opts.FS, files: opts.Files, dir: strings.TrimSuffix(opts.Dir, "/"), logger: opts.Logger, now: opts.Now,
		producers: newProducerState(), onRPLowered: opts.RecoveryPointLowered, persistRPs: opts.PersistRecoveryPoints,
		onStorageError: opts.OnStorageError, observeWrite: opts.ObserveWrite}
	if l.logger == nil {
		l.logger = discardLogger
	}
	l.logger = l.logger.With("dir", l.dir)
	if l.now == nil {
		l.now = time.Now
	}
	cfg := opts.Config
	l.cfg.Store(&cfg)
	l.truncatedTo.Store(math.MaxInt64)
	l.spareFailedAt.Store(-1)
	if _, err := l.fs.Stat(l.dir + "/" + cleanerCheckpoint); err == nil {
		l.gapsAllowed.Store(true)
		l.gapsMarked.Store(true)
	} else if cfg.Compacted() {
		l.gapsAllowed.Store(true)
	}
	flushed, err := readFlushedOffset(l.fs, l.dir)
	if err != nil {
		// Trusting less is safe: gaps above the recovery point end the log.
		l.logger.Warn("flushed-offset checkpoint unreadable; ignoring it", "err", err)
		flushed = -1
	}
	l.flushedOffset.Store(flushed)
	l.newestGap.Store(-1)
	l.gapsTrustedTo = math.MaxInt64
	if !opts.CleanShutdown {
		l.gapsTrustedTo = max(opts.RecoveryPoint, flushed)
	}

	segs, err := l.load(opts)
	if err != nil {
		for _, s := range segs {
			s.closeFiles()
		}
		return nil, err
	}
	id, err := readTopicID(l.fs, l.dir)
	if err != nil {
		for _, s := range segs {
			s.closeFiles()
		}
		return nil, err
	}
	if id != "" {
		l.topicID.Store(&id)
	}
	l.lastFlush.Store(l.now().UnixNano())
	return l, nil
}

func (l *Log) load(opts Options) ([]*segment, error) {
	if err := vfs.MkdirAllDurable(l.fs, l.dir); err != nil {
		return nil, storageErr(err, "creating partition directory %s", l.dir)
	}
	if err := l.finishSwaps(); err != nil {
		return nil, err
	}
	bases, err := l.scanDir()
	if err != nil {
		return nil, err
	}
	epochEntries, epochFound, err := readEpochCheckpoint(l.fs, l.dir)
	if err != nil {
		return nil, storageErr(err, "loading leader epochs of %s", l.dir)
	}

	var segs []*segment
	rebuild := map[*segment]bool{}
	for _, base := range bases {
		s, bad, err := openSegment(l.files, l.fs, l.dir, base)
		if err != nil {
			return segs, err
		}
		segs = append(segs, s)
		rebuild[s] = bad
	}
	if segs, err = l.recoverSegments(segs, rebuild, opts); err != nil {
		return segs, err
	}
	if n := len(segs); n > 0 && opts.LogStartOffset > segs[n-1].next {
		// Every record left lies below the checkpointed log start: a
		// power loss took the unflushed tail the log start had passed.
		// The log restarts empty there, as Kafka's loader restarts it:
		// cut back to its last record, its next offset went below
		// offsets already handed out.
		l.logger.Warn("log start offset checkpoint is beyond the log end; restarting the log empty at the log start",
			"log_start_offset", opts.LogStartOffset, "log_end_offset", segs[n-1].next)
		if err := l.retireSegments(segs); err != nil {
			return segs, err
		}
		segs = nil
	}
	if len(segs) == 0 {
		s, err := createSegment(l.files, l.fs, l.dir, max(opts.LogStartOffset, 0))
		if err != nil {
			return nil, err
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			s.closeFiles()
			return nil, storageErr(err, "syncing %s", l.dir)
		}
		segs = []*segment{s}
	}
	for _, s := range segs[:len(segs)-1] {
		if n := reservedBeyondEnd(s); n > 0 { // a crash left it reserved
			s.reserved.Store(n)
			if err := s.releaseReservation(); err != nil {
				return segs, err
			}
		}
		if err := s.seal(); err != nil {
			return segs, err
		}
		// Trusted indexes are covered by the recovery point; rebuilt ones
		// were synced by recoverSegment.
		s.indexesDurable.Store(true)
	}
	act := segs[len(segs)-1]
	// Reserved here, before any append: a new log's first segment or the
	// one a restart continues (spare.go).
	if cfg := l.Config(); cfg.Preallocate {
		l.reserveLocked(act, cfg.SegmentBytes)
	} else if n := reservedBeyondEnd(act); n > 0 {
		act.reserved.Store(n)
		if err := act.releaseReservation(); err != nil {
			return segs, err
		}
	}
	if err := act.index.activate(); err != nil {
		return segs, storageErr(err, "reading index %s", act.index.path)
	}
	if err := act.timeIndex.activate(); err != nil {
		return segs, storageErr(err, "reading time index %s", act.timeIndex.path)
	}
	l.initRollBase(act)
	l.publish(segs)

	leo := act.next
	l.leo.Store(leo)
	// Recovery may have cut durable data (a batch failing its CRC): the
	// flushed offset must not cover what is appended there next.
	if err := l.lowerFlushedOffset(leo); err != nil {
		return segs, err
	}
	// The cleaner checkpoint follows the log end too: a crash between a
	// truncation's cut and the checkpoint's rewrite left it beyond. It is
	// rewritten now, before the log grows past the old first dirty offset
	// and the cut can no longer be told.
	if err := l.truncateCleanerCheckpointLocked(leo); err != nil {
		return segs, err
	}
	l.logStart.Store(max(opts.LogStartOffset, segs[0].base)) // at most leo: see above
	if opts.CleanShutdown {
		l.recoveryPoint.Store(leo)
	} else {
		l.recoveryPoint.Store(min(max(opts.RecoveryPoint, 0), leo))
	}

	if err := l.loadEpochs(epochEntries, epochFound); err != nil {
		return segs, err
	}
	// A snapshot at or below the recovered LEO covers batches that are all
	// still in the log (a torn one fails its CRC), so it is used as Kafka's
	// rebuildProducerState uses it, not only one at or below the
	// checkpointed recovery point: that lags the rolls by up to a
	// checkpoint interval, and the older snapshots are pruned, so the
	// producers retention kept (in no batch left) would be forgotten.
	if err := l.loadProducers(leo); err != nil {
		return segs, err
	}
	return segs, nil
}

// scanDir lists the segment bases and clears leftovers: temp files of
// interrupted atomic writes and the spare segment, retired (.deleted)
// segment files not yet unlinked, and indexes whose log file is gone.
// Retired files, and temp files renamed so (their names are free at once
// for the files they stand for), are unlinked in the background, as at
// run time: a crash amid retention leaves whole segments, and a spare
// segment has all its blocks reserved, so freeing them can wait for the
// device, which would lengthen every restart after a crash.
func (l *Log) scanDir() ([]int64, error) {
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, storageErr(err, "listing partition directory %s", l.dir)
	}
	var retired []string
	defer func() { l.unlinkInBackgroundLocked(retired) }()
	var bases []int64
	indexes := map[int64][]string{}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		switch p := l.dir + "/" + name; {
		case strings.HasSuffix(name, deletedSuffix):
			retired = append(retired, p)
			continue
		case strings.HasSuffix(name, tmpSuffix):
			if err := l.fs.Rename(p, p+deletedSuffix); err != nil {
				_ = l.fs.Remove(p)
			} else {
				retired = append(retired, p+deletedSuffix)
			}
			continue
		}
		if b, ok := parseOffsetName(name, logSuffix); ok {
			bases = append(bases, b)
			continue
		}
		for _, suf := range []string{indexSuffix, timeIndexSuffix} {
			if b, ok := parseOffsetName(name, suf); ok {
				indexes[b] = append(indexes[b], name)
			}
		}
	}
	slices.Sort(bases)
	for b, names := range indexes {
		if _, ok := slices.BinarySearch(bases, b); !ok {
			for _, n := range names {
				_ = l.fs.Remove(l.dir + "/" + n)
			}
		}
	}
	return bases, nil
}

// openSegment opens an existing segment. bad is true when an index was
// missing or malformed and has been recreated empty, to be rebuilt.
func openSegment(files *FileCache, fsys vfs.FS, dir string, base int64) (s *segment, bad bool, err error) {
	lp, ip, tp := segmentPaths(dir, base)
	s = &segment{base: base, dir: dir, logPath: lp, next: base, offsetOfMaxTS: base, lastTimeEntryTS: -1}
	s.maxTS.Store(-1)
	if s.log, err = files.openFile(fsys, lp); err != nil {
		return nil, false, storageErr(err, "opening segment %s", lp)
	}
	size, err := s.log.Size()
	if err != nil {
		s.closeFiles()
		return nil, false, storageErr(err, "reading the size of %s", lp)
	}
	s.size.Store(size)
	open := func(path string, entry int) (*sparseIndex, error) {
		ix, err := openIndex(files, fsys, path, entry, false)
		if err == nil {
			return ix, nil
		}
		bad = true
		if ix, err = openIndex(files, fsys, path, entry, true); err != nil {
			return nil, storageErr(err, "recreating index %s", path)
		}
		return ix, nil
	}
	if s.index, err = open(ip, offsetEntrySize); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	if s.timeIndex, err = open(tp, timeEntrySize); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	return s, bad, nil
}

// recoverSegments checks every segment and returns the ones kept: the
// longest run of intact, contiguous segments, the last possibly cut short.
func (l *Log) recoverSegments(segs []*segment, rebuild map[*segment]bool, opts Options) ([]*segment, error) {
	from := len(segs) // first segment to re-validate in full
	if !opts.CleanShutdown {
		from = 0
		for i, s := range segs {
			if s.base <= opts.RecoveryPoint {
				from = i
			}
		}
	}
	// A segment wholly below the checkpointed log start holds nothing
	// readable. A crash may bring one back damaged: its retirement's
	// rename was not durable, and a segment DeleteRecords deleted right
	// after its roll was never synced. So after a crash it is re-validated
	// whatever the recovery point says, and damage there, or a gap after
	// it, drops it with the segments before it, never the ones after:
	// cutting the log there deleted every later segment, flushed records
	// above the log start and all. Kafka's loader recovers such a segment
	// alone too.
	belowStart := func(i int) bool { return i+1 < len(segs) && segs[i+1].base <= opts.LogStartOffset }
	first := 0 // segs[:first] were dropped so
	for i, s := range segs {
		// Compaction may leave a gap between segments, never an overlap.
		if i > first && (segs[i-1].next > s.base || (segs[i-1].next != s.base && !l.gapOK(s.base))) {
			if belowStart(i - 1) {
				if err := l.dropBelowStart(segs[first:i], "a gap follows it"); err != nil {
					return segs[first:], err
				}
				first = i
			} else {
				l.truncated("segment does not follow on from the previous one", "segment", s.logPath,
					"expected_base", segs[i-1].next)
				kept, err := l.dropSegments(segs, i)
				return kept[first:], err
			}
		}
		full := i >= from || rebuild[s] || (!opts.CleanShutdown && belowStart(i))
		if !full {
			ok, err := l.checkSegment(s, i == len(segs)-1)
			if err != nil {
				return segs[first:], err
			}
			if !ok && belowStart(i) {
				if err := l.dropBelowStart(segs[first:i+1], "it failed its sanity check"); err != nil {
					return segs[first:], err
				}
				first = i + 1
				continue
			}
			if !ok {
				l.stats.rebuiltIndexes.Add(1)
				l.logger.Warn("rebuilding index that failed its sanity check", "segment", s.logPath)
				full = true
			}
		} else if rebuild[s] {
			l.stats.rebuiltIndexes.Add(1)
			l.logger.Warn("rebuilding missing or malformed index", "segment", s.logPath)
		}
		if full {
			below := belowStart(i)
			cut, err := l.recoverSegment(s, below)
			if err != nil {
				return segs[first:], err
			}
			if cut && below {
				if err := l.dropBelowStart(segs[first:i+1], "it is damaged"); err != nil {
					return segs[first:], err
				}
				first = i + 1
				continue
			}
			if cut && i+1 < len(segs) {
				kept, err := l.dropSegments(segs, i+1)
				return kept[first:], err
			}
		}
	}
	return segs[first:], nil
}

// dropBelowStart retires segments lying wholly below the log start, the
// oldest first, and syncs the directory: a crash part-way leaves the later
// ones, still below the start, for the next load.
func (l *Log) dropBelowStart(segs []*segment, why string) error {
	l.logger.Warn("dropping segments wholly below the log start", "reason", "the last one: "+why,
		"segments", len(segs), "first", segs[0].logPath, "last", segs[len(segs)-1].logPath)
	return l.retireSegments(segs)
}

// retireSegments retires segs, the oldest first, and syncs the directory.
func (l *Log) retireSegments(segs []*segment) error {
	var retired []string
	defer func() { l.unlinkInBackgroundLocked(retired) }()
	for _, s := range segs {
		names, err := s.retire(l.fs)
		retired = append(retired, names...)
		if err != nil {
			return err
		}
		l.stats.deletedSegments.Add(1)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return storageErr(err, "syncing %s", l.dir)
	}
	return nil
}

// truncated logs and counts one recovery truncation.
func (l *Log) truncated(msg string, args ...any) {
	l.stats.recoveredTruncations.Add(1)
	l.logger.Warn("recovery truncated the log: "+msg, args...)
}

// dropSegments deletes segs[from:], newest first, so a crash part-way still
// leaves a prefix of the log.
func (l *Log) dropSegments(segs []*segment, from int) ([]*segment, error) {
	for i := len(segs) - 1; i >= from; i-- {
		if err := segs[i].remove(l.fs); err != nil {
			return segs[:i], err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return segs[:from], storageErr(err, "syncing %s", l.dir)
	}
	return segs[:from], nil
}

// recoverSegment re-validates every batch of s (CRC, structure, offsets
// contiguous from the segment base, or only increasing where compaction may
// have left gaps, a leader epoch), cuts the file at the first
// bad or torn batch, and rebuilds both indexes. cut reports a truncation.
// A segment belowStart is dropped when cut, so its cut is not the log's.
func (l *Log) recoverSegment(s *segment, belowStart bool) (cut bool, err error) {
	size, err := s.log.Size()
	if err != nil {
		return false, storageErr(err, "reading the size of %s", s.logPath)
	}
	if err := s.index.reset(); err != nil {
		return false, storageErr(err, "resetting %s", s.index.path)
	}
	if err := s.timeIndex.reset(); err != nil {
		return false, storageErr(err, "resetting %s", s.timeIndex.path)
	}
	s.maxTS.Store(-1)
	s.recent.clear() // rebuilt by the walk, as the indexes are
	s.next, s.offsetOfMaxTS, s.bytesSinceIndex, s.lastTimeEntryTS = s.base, s.base, 0, -1
	interval := l.Config().IndexIntervalBytes

	r := newBatchReader(s.log, s.logPath, size, recoveryWindow)
	pos := int64(0)
	var reason error
	for pos < size {
		_, bsize, err := r.header(pos)
		if err != nil {
			if !errors.Is(err, errTorn) {
				return false, err
			}
			reason = err
			break
		}
		b, err := r.whole(pos, bsize)
		if err != nil {
			return false, err
		}
		if reason = b.ValidateStored(); reason != nil {
			break
		}
		// Offsets increase; compaction may leave gaps between batches.
		if b.BaseOffset() < s.next || (b.BaseOffset() != s.next && !l.gapOK(b.BaseOffset())) {
			reason = fmt.Errorf("batch at position %d has offset %d, expected %d", pos, b.BaseOffset(), s.next)
			break
		}
		if b.PartitionLeaderEpoch() < 0 {
			reason = fmt.Errorf("batch at position %d has no leader epoch", pos)
			break
		}
		s.indexBatch(b, pos, interval)
		pos += bsize
	}
	s.size.Store(pos)
	if pos < size {
		if belowStart {
			return true, nil
		}
		l.truncated(reason.Error(), "segment", s.logPath, "position", pos, "dropped_bytes", size-pos)
		if err := s.log.Truncate(pos); err != nil {
			return true, storageErr(err, "truncating %s", s.logPath)
		}
		if err := s.log.Sync(); err != nil {
			return true, storageErr(err, "syncing %s", s.logPath)
		}
		cut = true
	}
	s.maybeAppendTimeEntry()
	for _, ix := range []*sparseIndex{s.index, s.timeIndex} {
		if err := ix.flush(); err != nil {
			return cut, storageErr(err, "writing %s", ix.path)
		}
		if err := ix.sync(); err != nil {
			return cut, storageErr(err, "syncing %s", ix.path)
		}
	}
	return cut, nil
}

// checkSegment sanity-checks a segment whose data is trusted: the last index
// entries must point at real batches, and the batches after the last offset
// index entry (validated in full for the last segment) must walk cleanly to
// the end of the file. It sets next and the timestamp bookkeeping. ok=false
// means the segment must be recovered in full.
func (l *Log) checkSegment(s *segment, last bool) (ok bool, err error) {
	size := s.size.Load()
	from, expect := int64(0), s.base
	indexed := false // the walk starts at an index entry, which names its batch's offset exactly
	if e, found, err := s.index.last(); err != nil {
		return false, storageErr(err, "reading %s", s.index.path)
	} else if found {
		indexed = true
		rel, pos := decodeOffsetEntry(e)
		from, expect = int64(pos), s.base+int64(rel)
		if from >= size {
			return false, nil
		}
	}
	r := newBatchReader(s.log, s.logPath, size, recoveryWindow)
	maxTS := int64(-1)
	for pos := from; pos < size; {
		h, bsize, err := r.header(pos)
		if errors.Is(err, errTorn) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		gapOK := l.gapOK(h.BaseOffset()) && (pos != from || !indexed)
		if h.BaseOffset() < expect || (h.BaseOffset() != expect && !gapOK) || h.LastOffsetDelta() < 0 {
			return false, nil
		}
		if last {
			b, err := r.whole(pos, bsize)
			if err != nil {
				return false, err
			}
			if b.ValidateStored() != nil {
				return false, nil
			}
			h = b // whole may have read the window again under h
		}
		maxTS = max(maxTS, h.MaxTimestamp())
		expect = h.NextOffset()
		pos += bsize
	}
	s.next = expect
	if size > 0 && s.timeIndex.count == 0 {
		// Whole only when no batch has a timestamp (all -1, Kafka's
		// NO_TIMESTAMP): no time-index entry is written for those.
		if maxTS >= 0 {
			return false, nil
		}
		if ok, err := untimedBefore(s, from); !ok || err != nil {
			return false, err
		}
	}
	if s.timeIndex.count > 0 {
		e, _, err := s.timeIndex.last()
		if err != nil {
			return false, storageErr(err, "reading %s", s.timeIndex.path)
		}
		// Sealing and Close end the time index with the segment's largest
		// timestamp; a newer one in the tail means entries are missing.
		ts, rel := decodeTimeEntry(e)
		if s.base+int64(rel) >= s.next || ts < maxTS {
			return false, nil
		}
		maxTS, s.offsetOfMaxTS, s.lastTimeEntryTS = ts, s.base+int64(rel), ts
	}
	s.maxTS.Store(maxTS)
	s.bytesSinceIndex = size - from
	return true, nil
}

// untimedBefore reports whether no batch in s before position to carries a
// timestamp; a torn walk is not whole either.
func untimedBefore(s *segment, to int64) (bool, error) {
	untimed := true
	err := walkHeaders(s, 0, to, func(h recordbatch.Batch, _, _ int64) bool {
		untimed = h.MaxTimestamp() < 0
		return untimed
	})
	if errors.Is(err, errTorn) {
		return false, nil
	}
	return untimed, err
}

// initRollBase starts the active segment's segment.ms clock: the first
// batch's timestamp if it has one earlier than now (Kafka's rule), else now.
func (l *Log) initRollBase(s *segment) {
	if s.size.Load() == 0 {
		return
	}
	now := l.now()
	s.rollBase = now
	r := newBatchReader(s.log, s.logPath, s.size.Load(), recordbatch.HeaderSize)
	if h, _, err := r.header(0); err == nil {
		// A batch without a timestamp (-1) counts from now, as Kafka
		// counts from the segment's creation at load: read as a time it
		// is 1970, and every restart rolled at the next append.
		if ts := h.MaxTimestamp(); ts >= 0 && time.UnixMilli(ts).Before(now) {
			s.rollBase = time.UnixMilli(ts)
		}
	}
}

// loadEpochs installs the leader-epoch cache. A missing checkpoint on a
// non-empty log is rebuilt from the batches' epochs.
func (l *Log) loadEpochs(entries []EpochEntry, found bool) error {
	persist := func(e []EpochEntry) error { return writeEpochCheckpoint(l.fs, l.dir, e) }
	if !found && l.LogEndOffset() > l.segments()[0].base {
		l.logger.Warn("leader epoch checkpoint missing; rebuilding it from the log")
		c := NewLeaderEpochCache(nil, nil, discardLogger)
		err := l.walkLog(l.segments()[0].base, l.LogEndOffset(), func(h recordbatch.Batch) {
			c.Assign(h.PartitionLeaderEpoch(), h.BaseOffset())
		})
		if err != nil {
			return err
		}
		entries = c.Entries()
		if err := persist(entries); err != nil {
			return err
		}
	}
	l.epochs = NewLeaderEpochCache(entries, persist, l.logger)
	if err := l.epochs.TruncateFromEnd(l.LogEndOffset()); err != nil {
		return err
	}
	return l.epochs.TruncateFromStart(l.LogStartOffset())
}

// loadProducers rebuilds the producer table from the newest usable snapshot
// at or below trusted (the LEO), less the producers expired by now
// (producer.id.expiration.ms), then replays later batches. Snapshots
// beyond the log end are deleted; unreadable ones are deleted with a
// warning.
func (l *Log) loadProducers(trusted int64) error {
	snaps, err := listSnapshots(l.fs, l.dir)
	if err != nil {
		return err
	}
	leo := l.LogEndOffset()
	var above []int64
	for _, off := range snaps {
		if off > leo {
			above = append(above, off)
		}
	}
	if err := l.retireSnapshotsLocked(above); err != nil {
		return err
	}
	if len(above) > 0 {
		// Durable now: a snapshot above a truncation point that came back
		// after a crash, once the log has grown past it again, would be
		// trusted and claim the truncated batches.
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	ps, from := newProducerState(), l.segments()[0].base
	for i := len(snaps) - 1; i >= 0; i-- {
		off := snaps[i]
		if off > trusted {
			continue
		}
		path := l.dir + "/" + offsetName(off, snapshotSuffix)
		data, err := vfs.ReadFile(l.fs, path)
		if err != nil {
			return storageErr(err, "reading producer snapshot %s", path)
		}
		loaded, err := decodeSnapshot(data)
		if err != nil {
			l.logger.Warn("deleting unreadable producer snapshot", "file", path, "err", err)
			if err := removeSnapshot(l.fs, l.dir, off); err != nil {
				return err
			}
			continue
		}
		// Producers already expired when the snapshot is loaded are
		// dropped, as Kafka's loadFromSnapshot drops them: kept, one came
		// back after a restart until the next expiry pass.
		if iv := l.Config().ProducerIDExpiration; iv > 0 {
			loaded.expire(l.now().Add(-iv).UnixMilli())
		}
		ps, from = loaded, max(off, from)
		break
	}
	// A replayed batch's append time is not in the log; the load stands
	// for it, so a producer whose records carry an old CreateTime is not
	// forgotten at the first expiry pass after a crash (see update).
	nowMs := l.now().UnixMilli()
	replay := func(b recordbatch.Batch) {
		ps.apply(b)
		if b.HasProducerID() {
			e := ps.producers[b.ProducerID()]
			e.LastTimestamp = max(e.LastTimestamp, nowMs)
		}
	}
	if err := l.walkLog(from, leo, replay); err != nil {
		return err
	}
	// A producer whose batches below the first segment are gone (retention
	// kept it) keeps them through a truncation, which never cuts below the
	// first segment: rebuilt from there, below every snapshot left (the
	// two newest), the table would forget it, or, had it a batch in the
	// cut tail too, keep none of it, and a retry of a batch retention
	// took would be written again. At loading the table is empty.
	first := l.segments()[0].base
	for pid, e := range l.producers.producers {
		if _, ok := ps.producers[pid]; ok {
			continue
		}
		if kept := e.below(first); kept != nil {
			ps.producers[pid] = kept
		}
	}
	l.producers = ps
	return nil
}

// walkLog calls fn with the header of every batch whose base offset is in
// [from, to).
func (l *Log) walkLog(from, to int64, fn func(h recordbatch.Batch)) error {
	for _, s := range l.segments() {
		if s.next <= from || s.base >= to {
			continue
		}
		start := int64(0)
		if from > s.base {
			pos, _, found, err := findBatch(s, from, s.size.Load())
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			start = pos
		}
		err := walkHeaders(s, start, s.size.Load(), func(h recordbatch.Batch, _, _ int64) bool {
			if h.BaseOffset() >= to {
				return false
			}
			if h.BaseOffset() >= from {
				fn(h)
			}
			return true
		})
		if err != nil {
			return tornAsStorage(err, s.logPath)
		}
	}
	return nil
}

// gapOK says whether recovery may accept offsets skipping to off. Only on a
// log that may have gaps (compacted, or holding cleaned data), and only
// where the data was durable before the crash: below the checkpointed
// recovery point or the flushed offset (flushedoffset.go), or anywhere
// after a clean shutdown. Above it a gap is what a power loss
// leaves when a segment's unsynced tail is lost but a later segment's data
// survives, and the log must end there (a follower refetches what was cut,
// gaps and all). The cleaner persists the recovery point before it commits
// a swap, so cleaned segments always lie below it.
func (l *Log) gapOK(off int64) bool {
	return l.gapsAllowed.Load() && off <= l.gapsTrustedTo
}
