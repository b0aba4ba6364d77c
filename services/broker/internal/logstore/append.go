package logstore

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// AppendInfo describes an append.
type AppendInfo struct {
	// FirstOffset and LastOffset span the appended records.
	FirstOffset, LastOffset int64
	// MaxTimestamp is the largest batch maxTimestamp appended.
	MaxTimestamp int64
	RecordCount  int
	// Duplicate is set when the leader recognised a retried idempotent batch:
	// nothing was appended and the offsets are those of the original.
	Duplicate bool
	// LogEndOffset is the LEO after the append.
	LogEndOffset int64
}

// ErrNonContiguous is returned by AppendAsFollower for batches that start
// below the log end offset or overlap each other. Gaps are accepted: a
// compacted leader log has them.
var ErrNonContiguous = errors.New("follower batches are not contiguous with the log")

// AppendAsLeader appends one or more batches (concatenated, as produced)
// as the leader of leaderEpoch. Each batch is validated (framing, CRC,
// contents), checked against max.message.bytes and the idempotent producer
// state, then given offsets from the LEO and stamped with leaderEpoch by
// patching records in place: the caller's buffer is modified and must not
// be reused until the call returns.
//
// A retry of one of a producer's last five batches returns the original
// offsets with Duplicate set and appends nothing. Errors: CORRUPT_MESSAGE,
// INVALID_RECORD, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
// OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
// DUPLICATE_SEQUENCE_NUMBER (a retried batch inside a multi-batch append),
// FENCED_LEADER_EPOCH (leaderEpoch older than one already in the log) and
// KAFKA_STORAGE_ERROR; on any error the log is unchanged.
func (l *Log) AppendAsLeader(records []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.AppendAsLeaderWithin(records, leaderEpoch, 0)
}

// AppendAsLeaderWithin is AppendAsLeader that also refuses, with
// RECORD_LIST_TOO_LARGE, batches whose records carry more than maxHeaders
// record headers in all (0: no bound), as produce.max.records.per.request
// asks: each decodes into an object on a structured read. They are counted
// by validation's own walk, so a compressed batch is decompressed once.
func (l *Log) AppendAsLeaderWithin(records []byte, leaderEpoch int32, maxHeaders int64) (AppendInfo, error) {
	if leaderEpoch < 0 {
		return AppendInfo{}, kerr.New(kerr.InvalidRequest, "leader epoch %d is negative", leaderEpoch)
	}
	info, err := l.append(records, leaderEpoch, true, maxHeaders)
	return info, l.note(err)
}

// AppendAsFollower appends batches fetched from the leader, keeping the
// leader's offsets and epochs. No batch may start below the LEO or the end of
// the previous one (ErrNonContiguous otherwise; gaps left by compaction are
// fine); each is
// validated, and its epoch recorded in the leader-epoch cache.
// max.message.bytes is not applied: the leader already accepted the batch.
// Batches after a gap are durable when it returns (FlushGaps).
func (l *Log) AppendAsFollower(records []byte) (AppendInfo, error) {
	info, err := l.AppendAsFollowerUnflushed(records)
	if err != nil {
		return info, err
	}
	return info, l.FlushGaps()
}

// AppendAsFollowerUnflushed is AppendAsFollower without its flush of
// batches after a gap, for a caller holding a lock others need meanwhile
// (the replica fetcher holds its partition's, which reads take): it must
// call FlushGaps before it tells the leader the new log end.
func (l *Log) AppendAsFollowerUnflushed(records []byte) (AppendInfo, error) {
	info, err := l.append(records, -1, false, 0)
	return info, l.note(err)
}

// FlushGaps flushes up to the log end when a follower appended a batch after
// a gap above the flushed offset, so the flushed-offset checkpoint covers it
// (flushedoffset.go); otherwise it does nothing. Recovery after a crash
// trusts gaps only up to that checkpoint or the recovery point's, and
// without it a follower's gapped records the leader counted as replicated
// would be cut on every replica that crashed before its next flush.
func (l *Log) FlushGaps() error {
	if !l.GapsUnflushed() {
		return nil
	}
	return l.note(l.flushUpTo(l.LogEndOffset()))
}

// splitBatches validates the batches of records; a leader's come with what
// validation saw of their records, for the checks after it.
func splitBatches(records []byte, leader bool) ([]recordbatch.Batch, []recordbatch.Summary, error) {
	if len(records) == 0 {
		return nil, nil, kerr.New(kerr.InvalidRecord, "no batches to append")
	}
	var out []recordbatch.Batch
	var sums []recordbatch.Summary
	for b, err := range recordbatch.All(records) {
		if err != nil {
			return nil, nil, err
		}
		// A leader takes dense batches from clients; a follower stores the
		// leader's, which compaction may have thinned.
		if leader {
			sum, err := b.ValidateSummary()
			if err != nil {
				return nil, nil, fmt.Errorf("batch %d: %w", len(out), err)
			}
			sums = append(sums, sum)
		} else if err := b.ValidateStored(); err != nil {
			return nil, nil, fmt.Errorf("batch %d: %w", len(out), err)
		}
		out = append(out, b)
	}
	return out, sums, nil
}

func (l *Log) append(records []byte, epoch int32, leader bool, maxHeaders int64) (AppendInfo, error) {
	batches, sums, err := splitBatches(records, leader)
	if err != nil {
		return AppendInfo{}, err
	}
	cfg := l.Config()
	if leader {
		for i, b := range batches {
			if len(b) > cfg.MaxMessageBytes {
				return AppendInfo{}, kerr.New(kerr.MessageTooLarge, "batch %d is %d bytes, max.message.bytes is %d", i, len(b), cfg.MaxMessageBytes)
			}
		}
		if int64(len(records)) > cfg.SegmentBytes {
			return AppendInfo{}, kerr.New(kerr.RecordListTooLarge, "%d bytes exceed segment.bytes %d", len(records), cfg.SegmentBytes)
		}
		if maxHeaders > 0 {
			var n int64
			for _, s := range sums {
				n += s.Headers
			}
			if n > maxHeaders { // only a produce request bounds them: name its field
				return AppendInfo{}, kerr.BadField(kerr.RecordListTooLarge, "record_batch",
					"the batch's records hold %d record headers; produce.max.records.per.request is %d", n, maxHeaders)
			}
		}
		if err := l.checkTimestamps(batches, sums, cfg); err != nil {
			return AppendInfo{}, err
		}
		if cfg.Compacted() {
			if err := checkKeys(sums); err != nil {
				return AppendInfo{}, err
			}
		}
	}

	l.mu.Lock()
	info, flushTo, err := l.appendLocked(records, batches, epoch, leader, cfg)
	l.mu.Unlock()
	if err != nil || flushTo < 0 {
		return info, err
	}
	if err := l.flushUpTo(flushTo); err != nil {
		return info, err
	}
	return info, nil
}

// appendLocked does the append under l.mu. flushTo >= 0 asks the caller to
// flush up to that offset once the lock is released, before returning.
func (l *Log) appendLocked(records []byte, batches []recordbatch.Batch, epoch int32, leader bool, cfg Config) (info AppendInfo, flushTo int64, err error) {
	flushTo = -1
	if err := l.checkWritableLocked(); err != nil {
		return info, flushTo, err
	}
	leo := l.leo.Load()
	txn := l.producers.begin()
	nowMs := l.now().UnixMilli()
	if leader {
		if latest := l.epochs.LatestEpoch(); epoch < latest {
			return info, flushTo, kerr.New(kerr.FencedLeaderEpoch, "leader epoch %d is older than epoch %d already in the log", epoch, latest)
		}
		next := leo
		for i, b := range batches {
			dup, err := txn.check(b)
			if err != nil {
				return info, flushTo, err
			}
			if dup != nil {
				if len(batches) > 1 {
					return info, flushTo, kerr.New(kerr.DuplicateSequenceNumber, "batch %d of %d repeats sequences %d..%d of producer %d", i, len(batches), dup.FirstSeq, dup.LastSeq, b.ProducerID())
				}
				return AppendInfo{FirstOffset: dup.FirstOffset, LastOffset: dup.LastOffset, MaxTimestamp: dup.Timestamp,
					RecordCount: int(b.RecordCount()), Duplicate: true, LogEndOffset: leo}, flushTo, nil
			}
			b.SetBaseOffset(next)
			b.SetPartitionLeaderEpoch(epoch)
			next = b.NextOffset()
			txn.update(b, nowMs)
		}
	} else {
		next, newestGap := leo, int64(-1)
		for i, b := range batches {
			// A gap is legal: the leader's cleaner may have removed whole
			// batches (Kafka accepts it too); an overlap never is.
			if b.BaseOffset() < next {
				return info, flushTo, fmt.Errorf("%w: batch %d starts at offset %d, expected at least %d (an overlap); log end offset is %d",
					ErrNonContiguous, i, b.BaseOffset(), next, leo)
			}
			if b.BaseOffset() > next && !l.gapsMarked.Load() {
				if err := l.allowGapsLocked(); err != nil {
					return info, flushTo, err
				}
			}
			if b.BaseOffset() > next {
				newestGap = b.BaseOffset()
			}
			if b.PartitionLeaderEpoch() < 0 {
				return info, flushTo, kerr.New(kerr.InvalidRecord, "batch %d at offset %d has no leader epoch", i, b.BaseOffset())
			}
			next = b.NextOffset()
			txn.update(b, nowMs)
		}
		// Only once every batch passed: a refused append must not leave a
		// gap above the log end for every later flush to write out.
		if newestGap >= 0 {
			l.newestGap.Store(newestGap)
		}
	}

	// Epochs are recorded before the data, as in Kafka: an entry whose data
	// never lands is harmless, data without its entry is not.
	for _, b := range batches {
		if _, err := l.epochs.Assign(b.PartitionLeaderEpoch(), b.BaseOffset()); err != nil {
			return info, flushTo, err
		}
	}

	last := batches[len(batches)-1]
	rolledAt, err := l.maybeRollLocked(int64(len(records)), last.LastOffset(), cfg)
	if err != nil {
		return info, flushTo, err
	}
	act := l.active()
	pos := act.size.Load()
	began := time.Now() // the real clock: a system call's duration
	_, err = act.log.WriteAt(records, pos)
	if l.observeWrite != nil {
		l.observeWrite(time.Since(began))
	}
	if err != nil {
		// Drop whatever part was written; if that fails too, the next write
		// overwrites it and readers never look past the committed size.
		_ = act.log.Truncate(pos)
		return info, flushTo, storageErr(err, "appending %d bytes to %s at position %d", len(records), act.logPath, pos)
	}
	if pos == 0 {
		act.rollBase = l.now()
	}
	info = AppendInfo{FirstOffset: batches[0].BaseOffset(), LastOffset: last.LastOffset(), MaxTimestamp: -1, LogEndOffset: last.NextOffset()}
	p := pos
	for _, b := range batches {
		act.indexBatch(b, p, cfg.IndexIntervalBytes)
		p += int64(len(b))
		info.RecordCount += int(b.RecordCount())
		info.MaxTimestamp = max(info.MaxTimestamp, b.MaxTimestamp())
	}
	txn.commit()
	// Publish: size before LEO, so a reader that sees the new LEO also sees
	// the bytes.
	act.size.Store(p)
	l.leo.Store(info.LogEndOffset)

	if rolledAt >= 0 {
		l.flushInBackgroundLocked(rolledAt)
	}
	l.maybeStartWritebackLocked(act, p, !leader, cfg)
	l.maybeTendSpareLocked(act, p, cfg)
	if cfg.FsyncEveryAppend || (cfg.FlushMessages > 0 && info.LogEndOffset-l.recoveryPoint.Load() >= cfg.FlushMessages) {
		flushTo = info.LogEndOffset
	}
	return info, flushTo, nil
}

// maybeRollLocked starts a new segment at the LEO when n bytes ending at
// offset last do not fit the active one, or it is older than segment.ms
// (Config.rollAfter). It returns the new segment's base, or -1.
func (l *Log) maybeRollLocked(n, last int64, cfg Config) (int64, error) {
	act := l.active()
	if act.size.Load() == 0 {
		return -1, nil
	}
	expired := !act.rollBase.IsZero() && l.now().Sub(act.rollBase) >= cfg.rollAfter()
	if !expired && act.fits(n, last, cfg.SegmentBytes) {
		return -1, nil
	}
	base := l.leo.Load()
	return base, l.rollLocked(base, false)
}

// flushInBackgroundLocked flushes up to offset (a just-sealed segment) in a
// goroutine, as Kafka does after a roll: the append that rolled does not wait
// for the fsync. Close waits for it.
func (l *Log) flushInBackgroundLocked(offset int64) {
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		if err := l.flushUpTo(offset); err != nil && !errors.Is(err, ErrClosed) {
			l.logger.Error("flushing a rolled segment failed", "offset", offset, "err", err)
		}
	}()
}

// flushAndCheckpointInBackgroundLocked is flushInBackgroundLocked followed
// by a checkpoint of the recovery points (PersistRecoveryPoints), for a
// roll whose snapshot is the only one left and must be durable at once.
func (l *Log) flushAndCheckpointInBackgroundLocked(offset int64) {
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		if err := l.flushUpTo(offset); err != nil {
			if !errors.Is(err, ErrClosed) {
				l.logger.Error("flushing a rolled segment failed", "offset", offset, "err", err)
			}
			return
		}
		if l.persistRPs != nil {
			if err := l.persistRPs(); err != nil && !errors.Is(err, ErrClosed) {
				l.logger.Warn("checkpointing the recovery points after retention emptied the log failed", "err", err)
			}
		}
	}()
}

// maybeStartWritebackLocked starts the kernel writing back the active
// segment's bytes appended since the last start, once there are
// Config.WritebackBytes of them, in a goroutine (the call can block while
// the device's queue is full): the append never waits for it. One at a time
// per log; an append that finds one running leaves its bytes to the next.
// Close waits for it. A follower's append also drops what lies more than
// Config.FollowerCachedBytes behind its log's end from the page cache.
func (l *Log) maybeStartWritebackLocked(act *segment, size int64, follower bool, cfg Config) {
	step := cfg.writebackStep()
	from := act.writtenBack.Load() // lowered by a truncation (cutSegment)
	if step <= 0 || size-from < step || !l.writingBack.CompareAndSwap(false, true) {
		return
	}
	act.writtenBack.Store(size)
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer l.writingBack.Store(false)
		l.syncMu.RLock() // truncation and closing wait; retention may close act (a call on it then fails)
		defer l.syncMu.RUnlock()
		if l.filesClosed {
			return
		}
		if err := vfs.StartWriteback(act.log, from, size-from); err != nil {
			// Advisory: the kernel writes the pages back anyway.
			l.logger.Debug("starting writeback failed", "segment", act.logPath, "err", err)
		}
		l.stats.writebacks.Add(1)
		if window := cfg.followerCacheWindow(); follower && window > 0 {
			l.dropBehindTail(act, size, window)
		}
	}()
}

// dropBehindTail drops a follower's pages that lie more than window bytes
// behind the end of its log: the active segment's (act, size bytes long)
// before size-window, and those of the sealed segments before it, so the
// window's bytes stay cached across a roll and a sealed segment goes
// whole once the segments after it hold the window. A sealed segment is
// dropped only once a flush has covered it (the roll's, in the
// background): before that its pages may be dirty, which the kernel keeps.
// Drops go from the oldest bytes on, so the walk back stops at the first
// segment dropped whole: those before it are too.
func (l *Log) dropBehindTail(act *segment, size, window int64) {
	l.dropBehind(act, size-window)
	segs := l.segments()
	i := len(segs) - 1
	for i >= 0 && segs[i] != act {
		i-- // a roll since the append: act is sealed now, and the walk starts at it
	}
	rp := l.recoveryPoint.Load()
	kept := size // bytes of the window held by segments after the one looked at
	for i--; i >= 0; i-- {
		s, next := segs[i], segs[i+1]
		n := s.size.Load()
		whole := (n + dropAlign - 1) &^ (dropAlign - 1)
		if s.droppedTo.Load() >= whole {
			break
		}
		inWindow := max(window-kept, 0)
		kept += n
		if next.base > rp {
			continue // not flushed yet
		}
		if inWindow == 0 {
			l.dropWhole(s, whole)
		} else {
			l.dropBehind(s, n-inWindow)
		}
	}
}

// dropWhole drops every page of a sealed, flushed segment (whole bytes,
// its size rounded up to a page), from its start: a page an earlier drop
// met while it was still being written back stayed cached then, and is
// clean now. Only the bytes not dropped before are counted.
func (l *Log) dropWhole(s *segment, whole int64) {
	from := s.droppedTo.Load()
	if err := vfs.DropCache(s.log, 0, whole); err != nil {
		l.logger.Debug("dropping cached pages failed", "segment", s.logPath, "err", err)
		return
	}
	s.droppedTo.Store(whole)
	l.stats.droppedBytes.Add(whole - from)
}

// dropBehind drops a segment's pages before end (rounded down to a page)
// from the page cache, from where the last drop ended. Those bytes were
// handed to writeback several steps ago, or flushed; a page still dirty or
// being written stays cached, which costs memory, never data. Only the
// log's one writeback goroutine calls it.
func (l *Log) dropBehind(s *segment, end int64) {
	end &^= dropAlign - 1
	from := s.droppedTo.Load()
	if end <= from {
		return
	}
	if err := vfs.DropCache(s.log, from, end-from); err != nil {
		l.logger.Debug("dropping cached pages failed", "segment", s.logPath, "err", err)
		return
	}
	s.droppedTo.Store(end)
	l.stats.droppedBytes.Add(end - from)
}

// dropAlign is the granule of dropBehind's ranges: a page, so the page
// holding the window's first byte is never dropped.
const dropAlign = 4096

// rollLocked seals the active segment and starts a new one at base. On
// failure the old segment stays active and nothing new is left on disk. The
// caller arranges the sealed segment's flush.
//
// With syncDir false (a roll on the append path) nothing is fsynced here:
// the directory entries of the new files and the producer snapshot become
// durable with the next flush, before it moves the recovery point into the
// new segment (flushUpTo), as Kafka defers them to its flush (KAFKA-15046).
// Three fsyncs under mu stalled every append of the partition for tens of
// milliseconds, and a follower's for longer while the leader's flush of the
// sealed segment kept the disk busy.
func (l *Log) rollLocked(base int64, syncDir bool) error {
	spare, spareBytes := l.takeSpareLocked(l.Config())
	ns, err := createSegmentFrom(l.files, l.fs, l.dir, base, spare, spareBytes)
	if err != nil {
		return err
	}
	if syncDir {
		if err := l.fs.SyncDir(l.dir); err != nil {
			ns.remove(l.fs)
			return storageErr(err, "syncing %s", l.dir)
		}
	} else {
		l.dirSyncPending.Store(true)
	}
	old := l.active()
	if err := old.seal(); err != nil {
		ns.remove(l.fs)
		old.index.activate()
		old.timeIndex.activate()
		return err
	}
	l.publish(append(slices.Clip(l.segments()), ns))
	l.releaseInBackgroundLocked(old)
	l.stats.rolls.Add(1)
	l.takeSnapshotLocked(base, syncDir)
	return nil
}

// takeSnapshotLocked writes the producer table as of offset and keeps only
// the two newest snapshots. Snapshots only speed up loading, so a failure
// is logged, not returned. A snapshot written without durable (at a roll on
// the append path) is fsynced by the next flush; until then a crash may
// leave it torn, and loading drops a snapshot that fails its CRC and
// rebuilds the table from the log. The old snapshots of a roll are
// deleted in the background: deleting a file frees its blocks, which can
// wait for the device (a file system mounted with discard trims them as it
// frees them), and a roll holds mu.
func (l *Log) takeSnapshotLocked(offset int64, durable bool) {
	if err := writeSnapshot(l.fs, l.dir, offset, l.producers, durable); err != nil {
		l.logger.Warn("could not write producer snapshot", "offset", offset, "err", err)
		return
	}
	if !durable {
		l.unsyncedMu.Lock()
		l.unsyncedSnapshots = append(l.unsyncedSnapshots, offset)
		l.unsyncedMu.Unlock()
		l.dirSyncPending.Store(true)
	}
	if l.closed.Load() {
		l.removeRetired(l.retireOldSnapshots()) // Close: nothing waits on it
	} else {
		l.pruneInBackgroundLocked()
	}
}

// pruneInBackgroundLocked runs retireOldSnapshots (fileMu held for reading)
// and removeRetired (no lock) in a goroutine, one at a time per log, which
// Close waits for; a request while one runs makes it prune again once done.
func (l *Log) pruneInBackgroundLocked() {
	l.pruneAgain.Store(true)
	if !l.pruning.CompareAndSwap(false, true) {
		return
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		for {
			for l.pruneAgain.Swap(false) {
				var retired []string
				l.fileMu.RLock() // truncation, deletion and closing wait for the renames
				if !l.filesClosed {
					retired = l.retireOldSnapshots()
				}
				l.fileMu.RUnlock()
				l.removeRetired(retired) // not for the unlinks, which may wait for the device
			}
			l.pruning.Store(false)
			// A request between the last Swap and the Store found pruning
			// set and left itself to this goroutine.
			if !l.pruneAgain.Load() || !l.pruning.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// retireOldSnapshots renames all but the two newest producer snapshots to
// .deleted and returns their new names, for removeRetired. Only older ones
// than it listed go, so a snapshot written meanwhile stays; one deleted
// meanwhile (a truncation, retention) is not an error.
func (l *Log) retireOldSnapshots() []string {
	snaps, err := listSnapshots(l.fs, l.dir)
	if err != nil {
		return nil
	}
	var retired []string
	for ; len(snaps) > 2; snaps = snaps[1:] {
		p := l.dir + "/" + offsetName(snaps[0], snapshotSuffix)
		switch err := l.fs.Rename(p, p+deletedSuffix); {
		case err == nil:
			retired = append(retired, p+deletedSuffix)
		case !vfs.IsNotExist(err):
			l.logger.Warn("could not delete old producer snapshot", "err", err)
			return retired
		}
	}
	return retired
}

// checkTimestamps refuses CreateTime batches with a record timestamp too far
// behind or ahead of the log's clock (KIP-937). LogAppendTime batches get the
// broker's time, so their own timestamps do not matter.
func (l *Log) checkTimestamps(batches []recordbatch.Batch, sums []recordbatch.Summary, cfg Config) error {
	for i, b := range batches {
		// Nothing stamps the broker's time into a producer's LogAppendTime
		// batch: its maxTimestamp would skip the bounds below and become
		// the segment's, which retention and ListOffsets trust. Kafka
		// refuses it too.
		if b.TimestampType() == recordbatch.LogAppendTime {
			return kerr.New(kerr.InvalidTimestamp, "batch %d: a producer may not set the timestamp type to LogAppendTime", i)
		}
	}
	if cfg.TimestampBeforeMaxMs == math.MaxInt64 && cfg.TimestampAfterMaxMs == math.MaxInt64 {
		return nil
	}
	now := l.now().UnixMilli()
	for i, b := range batches {
		if b.TimestampType() != recordbatch.CreateTime {
			continue
		}
		// Written so that no subtraction overflows: now >= 0 and both
		// bounds are below math.MaxInt64 when checked.
		if lo := sums[i].MinTimestamp; cfg.TimestampBeforeMaxMs != math.MaxInt64 && lo < now-cfg.TimestampBeforeMaxMs {
			return kerr.New(kerr.InvalidTimestamp, "batch %d: record timestamp %d is earlier than the broker's time %d minus message.timestamp.before.max.ms %d",
				i, lo, now, cfg.TimestampBeforeMaxMs)
		}
		if hi := b.MaxTimestamp(); hi > now && hi-now > cfg.TimestampAfterMaxMs {
			return kerr.New(kerr.InvalidTimestamp, "batch %d: record timestamp %d is later than the broker's time %d plus message.timestamp.after.max.ms %d",
				i, hi, now, cfg.TimestampAfterMaxMs)
		}
	}
	return nil
}

// checkKeys refuses records without a key, as Kafka does for a compacted
// topic: the cleaner keeps the latest record per key, and a keyless one has
// none.
func checkKeys(sums []recordbatch.Summary) error {
	for i, s := range sums {
		if s.Keyless >= 0 {
			return kerr.New(kerr.InvalidRecord, "batch %d, record %d has no key: a topic with cleanup.policy=compact needs one on every record", i, s.Keyless)
		}
	}
	return nil
}
