package logstore

import (
	"slices"
	"time"

	"tidemark.io/services/platform/kerr"
)

// DeleteOldSegments applies retention.ms and retention.bytes: it deletes
// whole segments from the oldest on, only ones lying entirely below hw (the
// caller's high watermark), and moves the log start to the first segment
// kept. When every segment qualifies, a new empty segment is rolled at the
// LEO first so the log always has one. It returns how many it deleted.
func (l *Log) deleteOldSegments(hw int64) (int, error) {
	cfg := l.Config()
	if !cfg.RetentionDeletes() {
		return 0, nil // cleanup.policy=compact: the cleaner, not retention, bounds the log
	}
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
	if cfg.RetentionMs >= 0 {
		for n < len(segs) && deletable(n) && now.Sub(l.segmentTime(segs[n])) > cfg.RetentionMs {
			n++
		}
	}
	if cfg.RetentionBytes >= 0 {
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
		if err := l.rollLocked(leo, true); err != nil {
			return 0, err
		}
	}
	return n, l.deleteLeadingLocked(n)
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
// and raises the log start to the first one left.
func (l *Log) deleteLeadingLocked(n int) error {
	l.fileMu.Lock()
	segs := l.segments()
	n = min(n, len(segs)-1)
	var err error
	deleted := 0
	for ; deleted < n; deleted++ {
		if err = segs[deleted].remove(l.fs); err != nil {
			break
		}
	}
	l.publish(slices.Clone(segs[deleted:]))
	l.stats.deletedSegments.Add(int64(deleted))
	if err == nil {
		if err = l.fs.SyncDir(l.dir); err != nil {
			err = storageErr(err, "syncing %s", l.dir)
		}
	}
	if first := segs[deleted].base; first > l.logStart.Load() {
		l.logStart.Store(first)
	}
	l.fileMu.Unlock()
	if err != nil {
		return l.fail(err)
	}
	return l.afterLogStartMovedLocked()
}

// afterLogStartMovedLocked trims the epoch cache and snapshots below the new
// log start. Producers are kept, as Kafka keeps them since KIP-360, until
// ProducerIDExpiration: a producer whose batches retention deleted may still
// retry its last batch, and forgetting it would write that batch twice.
func (l *Log) afterLogStartMovedLocked() error {
	start := l.logStart.Load()
	if err := l.epochs.TruncateFromStart(start); err != nil {
		return err
	}
	snaps, err := listSnapshots(l.fs, l.dir)
	if err != nil {
		return err
	}
	first := l.segments()[0].base
	for _, off := range snaps {
		if off < first {
			if err := removeSnapshot(l.fs, l.dir, off); err != nil {
				return err
			}
		}
	}
	return nil
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
