package logstore

import (
	"slices"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
)

// DeleteOldSegments deletes the segments that lie wholly below the log
// start (a crash brought back what retention or DeleteRecords had deleted,
// or they were kept for the log start checkpoint), whatever the cleanup
// policy, as Kafka's retention pass does; then it applies retention.ms and
// retention.bytes, unless cleanup.policy is compact alone (the cleaner, not
// retention, bounds such a log). It deletes whole segments from the oldest
// on, only ones lying entirely below hw (the caller's high watermark), and
// moves the log start to the first segment kept. When every segment
// qualifies, a new empty segment is rolled at the LEO first so the log
// always has one. It returns how many it deleted.
func (l *Log) deleteOldSegments(hw int64) (int, error) {
	cfg := l.Config()
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return 0, err
	}
	segs := l.segments()
	leo := l.leo.Load()
	end := func(i int) int64 {
		if i == len(segs)-1 {
			return leo
		}
		return segs[i+1].base
	}
	deletable := func(i int) bool { return segs[i].size.Load() > 0 && end(i) <= hw }

	n := 0
	for n < len(segs)-1 && end(n) <= l.logStart.Load() {
		n++ // unreadable: wholly below the log start
	}
	if cfg.RetentionDeletes() && cfg.RetentionMs >= 0 {
		for n < len(segs) && deletable(n) && now.Sub(l.segmentTime(segs[n])) > cfg.RetentionMs {
			n++
		}
	}
	if cfg.RetentionDeletes() && cfg.RetentionBytes >= 0 {
		var total int64
		for _, s := range segs[n:] {
			total += s.size.Load()
		}
		for n < len(segs) && deletable(n) && total-segs[n].size.Load() >= cfg.RetentionBytes {
			total -= segs[n].size.Load()
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if n == len(segs) {
		// Every segment goes: the new one's entry is synced before the
		// old ones are deleted, so a crash cannot leave no segment at all.
		// Their unflushed tail is synced before it: a power loss before
		// their renames are durable brings them back, and a tail lost
		// then left a gap below the new segment, where loading cut the
		// log, its next offset back below offsets already handed out.
		if err := l.syncUnflushedLocked(segs, end); err != nil {
			return 0, err
		}
		if err := l.rollLocked(leo, true); err != nil {
			return 0, err
		}
		// The recovery point follows to the new segment, whose snapshot
		// is the only one left (the old ones go with the log start): the
		// flush makes it durable, or a power loss could take it and the
		// producers retention keeps with it. The recovery points are
		// checkpointed at once too, not up to a minute later.
		l.flushAndCheckpointInBackgroundLocked(leo)
	}
	return n, l.deleteLeadingLocked(n)
}

// syncUnflushedLocked fsyncs the log files of the segments holding data
// above the recovery point (end(i) is where segs[i] ends). It runs under
// mu: only retention emptying the log calls it, on a log idle for
// retention.ms as a rule, whose pages the kernel has written back long
// since. A failed fsync fails the log, as a flush's does.
func (l *Log) syncUnflushedLocked(segs []*segment, end func(int) int64) error {
	rp := l.recoveryPoint.Load()
	for i, s := range segs {
		if end(i) <= rp || s.size.Load() == 0 {
			continue
		}
		if err := s.syncLog(); err != nil {
			return l.fail(err)
		}
	}
	return nil
}

// segmentTime is what retention.ms compares with: the newest record's
// timestamp, or the file's modification time when no record has one.
func (l *Log) segmentTime(s *segment) time.Time {
	if ts := s.maxTS.Load(); ts >= 0 {
		return time.UnixMilli(ts)
	}
	if fi, err := l.fs.Stat(s.logPath); err == nil {
		return fi.ModTime()
	}
	return l.now()
}

// deleteLeadingLocked deletes the n oldest segments (never the active one)
// and raises the log start to the first one left. Under the locks the
// segments only leave the log: their files are closed and they are
// unpublished, so no reader can reach them. Renaming their files to
// .deleted (Kafka's retired files) and unlinking them happen in the
// background (retireInBackgroundLocked): each rename must be durable before
// the next segment's, a directory fsync per segment, which waits behind the
// device's trims of the files unlinked before, and freeing a segment's
// blocks can take as long as the device wants; every append and read of the
// partition would wait for both.
//
// fileMu (exclusive) is all it takes as a rule: readers hold it shared, so
// none is inside a segment when its files close. The long background work
// (flushes, writebacks, reservations) holds syncMu instead, and waiting for
// a flush's fsync here would hold up the partition's appends and, with a
// writer waiting on fileMu, its reads. A flush touches only segments above
// the recovery point or with indexes not yet durable, so segments below it
// with durable indexes (those retention deletes, the roll's flush having
// covered them) are safe from it; for any other, as DeleteRecords can ask
// for right after a write, syncMu is taken too.
func (l *Log) deleteLeadingLocked(n int) error {
	segs := l.segments()
	n = min(n, len(segs)-1)
	unflushed := segs[n].base > l.recoveryPoint.Load() || !allIndexesDurable(segs[:n])
	if unflushed {
		l.syncMu.Lock()
	}
	l.fileMu.Lock()
	gone := slices.Clone(segs[:n])
	for _, s := range gone {
		_ = s.closeFiles() // read-only files: nothing to lose
	}
	l.publish(slices.Clone(segs[n:]))
	l.stats.deletedSegments.Add(int64(n))
	if first := segs[n].base; first > l.logStart.Load() {
		l.logStart.Store(first)
	}
	l.fileMu.Unlock()
	if unflushed {
		l.syncMu.Unlock()
	}
	l.retireInBackgroundLocked(gone)
	return l.afterLogStartMovedLocked()
}

func allIndexesDurable(segs []*segment) bool {
	for _, s := range segs {
		if !s.indexesDurable.Load() {
			return false
		}
	}
	return true
}

// retireInBackgroundLocked renames the files of segments that have left the
// log to .deleted, oldest first, syncing the directory after each segment's,
// then unlinks them, in a goroutine of the background group. Passes run one
// after another in the order they were started (each waits for the one
// before), so a later segment's rename is never made durable before an
// earlier one's: a file system may keep some renames of a crash and lose
// others (ext4 without a journal does), and a kept later one with a lost
// earlier one leaves a gap below the segments kept, at which loading cuts
// the log, flushed records above it and all. A crash before a rename only
// brings a segment below the log start back, for retention to delete
// again. The caller holds mu.
func (l *Log) retireInBackgroundLocked(segs []*segment) {
	if len(segs) == 0 {
		return
	}
	prev := l.retirements
	done := make(chan struct{})
	l.retirements = done
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		if prev != nil {
			<-prev
		}
		retired := l.renameRetiring(segs)
		close(done) // the next pass's renames may go; the unlinks wait for the device
		l.removeRetired(retired)
	}()
}

// renameRetiring renames segs' files to .deleted in order, a directory sync
// after each segment's, and returns the new names. It stops at the first
// failure, which fails the log, and when the log's files are closed by
// Abandon: the directory is then the next Open's.
//
// The directory is synced before the first rename too: the entries of
// segments rolled since the last flush are not durable yet, and a power
// loss that kept a rename but lost the entry of the segment after it, while
// keeping a later one's, left that later segment first, and loading took
// its base for the log start, past records the log had.
func (l *Log) renameRetiring(segs []*segment) []string {
	var retired []string
	l.syncMu.RLock()
	closed := l.filesClosed
	var err error
	if !closed {
		if err = l.fs.SyncDir(l.dir); err != nil {
			err = storageErr(err, "syncing %s", l.dir)
		}
	}
	l.syncMu.RUnlock()
	if closed {
		return nil
	}
	if err != nil {
		if !l.abandoned() {
			_ = l.fail(err)
		}
		return nil
	}
	for _, s := range segs {
		l.syncMu.RLock()
		if l.filesClosed {
			l.syncMu.RUnlock()
			break
		}
		names, err := s.renameToDeleted(l.fs)
		l.syncMu.RUnlock()
		retired = append(retired, names...)
		if err == nil {
			if err = l.fs.SyncDir(l.dir); err != nil {
				err = storageErr(err, "syncing %s", l.dir)
			}
		}
		if err != nil {
			if !l.abandoned() { // an abandoned log's directory may be gone (Manager.Delete)
				_ = l.fail(err)
			}
			break
		}
	}
	return retired
}

// abandoned reports whether Abandon closed the log's files.
func (l *Log) abandoned() bool {
	l.syncMu.RLock()
	defer l.syncMu.RUnlock()
	return l.filesClosed
}

// waitRetirementsLocked waits until every segment retention took out of
// the log has had its files renamed: a segment about to be created at an
// offset below the log start (TruncateFullyAndStartAt) may have the same
// file names. The caller holds mu, which starts retirements.
func (l *Log) waitRetirementsLocked() {
	if l.retirements != nil {
		<-l.retirements
		l.retirements = nil
	}
}

// unlinkInBackgroundLocked deletes retired files in a goroutine of the
// log's background group (Close waits for it; after a crash, loading
// deletes what is left). The caller holds mu.
func (l *Log) unlinkInBackgroundLocked(names []string) {
	if len(names) == 0 {
		return
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		l.removeRetired(names)
	}()
}

// removeRetired unlinks retired (.deleted) files, holding none of the log's
// locks: an unlink frees the file's blocks, which can wait for the device.
func (l *Log) removeRetired(names []string) {
	for _, p := range names {
		if err := l.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
			l.logger.Warn("could not delete a retired file; loading the log deletes it", "file", p, "err", err)
		}
	}
}

// afterLogStartMovedLocked trims the epoch cache and snapshots below the new
// log start (snapshots retired as segments are: renamed now, unlinked in the
// background; the epoch checkpoint rewritten in the background). Producers are kept, as Kafka keeps them since KIP-360, until
// ProducerIDExpiration: a producer whose batches retention deleted may still
// retry its last batch, and forgetting it would write that batch twice.
func (l *Log) afterLogStartMovedLocked() error {
	start := l.logStart.Load()
	if l.epochs.TruncateFromStartDeferred(start) {
		// The checkpoint is rewritten in the background, off the
		// partition's locks: its fsyncs wait for the device. syncMu
		// (shared) keeps an abandoned log, whose directory the next Open
		// owns, from writing it after that.
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			l.syncMu.RLock()
			defer l.syncMu.RUnlock()
			if l.filesClosed {
				return
			}
			if err := l.epochs.Flush(); err != nil {
				_ = l.fail(storageErr(err, "writing the leader epoch checkpoint of %s", l.dir))
			}
		}()
	}
	snaps, err := listSnapshots(l.fs, l.dir)
	if err != nil {
		return err
	}
	first := l.segments()[0].base
	below := snaps[:0]
	for _, off := range snaps {
		if off < first {
			below = append(below, off)
		}
	}
	return l.retireSnapshotsLocked(below)
}

// AdvanceLogStartOffset raises the log start to offset (DeleteRecords, or a
// follower following its leader's log start). It may not pass hw or the LEO.
// Segments wholly below the new start are deleted.
func (l *Log) advanceLogStartOffset(offset, hw int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return err
	}
	if limit := min(hw, l.leo.Load()); offset > limit {
		return kerr.New(kerr.OffsetOutOfRange, "log start offset %d would pass the high watermark or log end %d", offset, limit)
	}
	if offset <= l.logStart.Load() {
		return nil
	}
	l.logStart.Store(offset)
	segs := l.segments()
	n := 0
	for n < len(segs)-1 && segs[n+1].base <= offset {
		n++
	}
	if n > 0 {
		return l.deleteLeadingLocked(n)
	}
	return l.afterLogStartMovedLocked()
}

// ExpireProducers forgets idempotent producers idle longer than
// producer.id.expiration.ms and returns how many.
func (l *Log) ExpireProducers() int {
	iv := l.Config().ProducerIDExpiration
	if iv <= 0 {
		return 0
	}
	cutoff := l.now().Add(-iv).UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.expire(cutoff)
}
