package logstore

import (
	"slices"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
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
// and raises the log start to the first one left. The segments' files are
// renamed out of the log under the locks and unlinked in the background
// (Kafka's .deleted files): freeing a segment's blocks can take as long as
// the device wants (a file system mounted with discard trims them first),
// and every append and read of the partition would wait for it.
func (l *Log) deleteLeadingLocked(n int) error {
	l.fileMu.Lock()
	segs := l.segments()
	n = min(n, len(segs)-1)
	var err error
	var retired []string
	deleted := 0
	for ; deleted < n; deleted++ {
		var names []string
		names, err = segs[deleted].retire(l.fs)
		retired = append(retired, names...)
		if err == nil {
			// Each segment's renames are durable before the next one's: a
			// file system may keep some renames of a crash and lose others
			// (ext4 without a journal does), and a kept later one with a
			// lost earlier one left a gap below the segments kept, at
			// which loading cut the log, flushed records above it and all.
			if err = l.fs.SyncDir(l.dir); err != nil {
				err = storageErr(err, "syncing %s", l.dir)
			}
		}
		if err != nil {
			break
		}
	}
	l.unlinkInBackgroundLocked(retired)
	l.publish(slices.Clone(segs[deleted:]))
	l.stats.deletedSegments.Add(int64(deleted))
	if first := segs[deleted].base; first > l.logStart.Load() {
		l.logStart.Store(first)
	}
	l.fileMu.Unlock()
	if err != nil {
		return l.fail(err)
	}
	return l.afterLogStartMovedLocked()
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
		// partition's locks: its fsyncs wait for the device. fileMu
		// (shared) keeps an abandoned log, whose directory the next Open
		// owns, from writing it after that.
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			l.fileMu.RLock()
			defer l.fileMu.RUnlock()
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
