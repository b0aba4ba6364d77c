package logstore

import "time"

// Flush makes everything appended so far durable and moves the recovery
// point to the LEO read at the start of the call.
func (l *Log) Flush() error { return l.note(l.flushUpTo(l.LogEndOffset())) }

// FlushIfDue flushes when flush.ms has passed since the last flush and
// there is unflushed data; the Manager calls it periodically.
func (l *Log) flushIfDue() error {
	iv := l.Config().FlushInterval
	if iv <= 0 || l.LogEndOffset() <= l.RecoveryPoint() {
		return nil
	}
	if l.now().Sub(time.Unix(0, l.lastFlush.Load())) < iv {
		return nil
	}
	return l.flushUpTo(l.LogEndOffset())
}

// flushUpTo fsyncs the segments holding [recovery point, target), and the
// indexes of every sealed segment the new recovery point covers, then
// advances the recovery point. It runs without the writer mutex, so appends
// continue meanwhile; holding syncMu for reading keeps truncation, the
// cleaner's swaps and closing away (retention deletes only segments no
// flush touches, see deleteLeadingLocked), and flushMu makes concurrent flushes queue (a later one
// usually finds its work done: group commit).
func (l *Log) flushUpTo(target int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.syncMu.RLock()
	defer l.syncMu.RUnlock()
	if l.filesClosed {
		return ErrClosed
	}
	target = min(target, l.leo.Load())
	rp := l.recoveryPoint.Load()
	covered := max(target, rp)
	segs := l.segments()
	synced := false
	for i, s := range segs {
		if i == len(segs)-1 {
			if s.base < target && target > rp {
				if err := s.syncLog(); err != nil {
					return l.fail(err)
				}
				synced = true
			}
			break
		}
		end := segs[i+1].base
		if end > rp && s.base < target {
			if err := s.syncLog(); err != nil {
				return l.fail(err)
			}
			synced = true
		}
		if end <= covered && !s.indexesDurable.Load() {
			if err := s.syncIndexes(); err != nil {
				return l.fail(err)
			}
		}
	}
	if l.dirSyncPending.Load() {
		if err := l.syncRolledEntries(); err != nil {
			return l.fail(err)
		}
	}
	if err := l.recordFlushed(covered); err != nil {
		return l.fail(err)
	}
	if target > rp {
		l.recoveryPoint.Store(target)
		l.lastFlush.Store(l.now().UnixNano())
	}
	if synced {
		l.stats.flushes.Add(1)
	}
	return nil
}

// syncRolledEntries makes the files of the rolls since the last flush
// durable: their producer snapshots (all of them, as Kafka's flush after a
// roll syncs that roll's snapshot: the recovery point may move past an older
// one, and loading after a power loss may need it), then the directory (new
// segment files, the snapshots' renames). Called under flushMu.
func (l *Log) syncRolledEntries() error {
	l.dirSyncPending.Store(false) // a roll from here on sets it again
	l.unsyncedMu.Lock()
	offs := l.unsyncedSnapshots
	l.unsyncedSnapshots = nil
	l.unsyncedMu.Unlock()
	for i, off := range offs {
		if err := syncSnapshot(l.fs, l.dir, off); err != nil {
			l.unsyncedMu.Lock()
			l.unsyncedSnapshots = append(offs[i:], l.unsyncedSnapshots...)
			l.unsyncedMu.Unlock()
			l.dirSyncPending.Store(true)
			return err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		l.dirSyncPending.Store(true)
		return storageErr(err, "syncing %s", l.dir)
	}
	return nil
}
