package logstore

import "errors"

// Close flushes the log, writes out the active segment's indexes and a
// producer snapshot at the LEO, and closes every file. It returns nil only
// when all of that is durable: only then may the caller record a clean
// shutdown. Later calls do nothing.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed.Swap(true) {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	l.bg.Wait() // no new ones: they start only from appends, which now fail
	var errs []error
	if p := l.failed.Load(); p != nil {
		errs = append(errs, *p)
	} else if err := l.flushUpTo(l.LogEndOffset()); err != nil {
		errs = append(errs, err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if len(errs) == 0 {
		errs = append(errs, l.finishActiveLocked())
		l.takeSnapshotLocked(l.leo.Load(), true)
	}
	if l.spareReady.Swap(false) {
		_ = l.fs.Remove(l.sparePath()) // loading would delete it anyway (.tmp)
	}
	for _, s := range l.segments() {
		if err := s.closeFiles(); err != nil {
			errs = append(errs, storageErr(err, "closing %s", s.logPath))
		}
	}
	l.filesClosed = true
	return errors.Join(errs...)
}

// finishActiveLocked makes the active segment's file exactly its committed
// batches and its indexes complete and durable, so the next open can trust
// them.
func (l *Log) finishActiveLocked() error {
	s := l.active()
	committed := s.size.Load()
	if size, err := s.log.Size(); err != nil {
		return storageErr(err, "reading the size of %s", s.logPath)
	} else if size > committed {
		if err := s.log.Truncate(committed); err != nil {
			return storageErr(err, "truncating %s", s.logPath)
		}
		if err := s.log.Sync(); err != nil {
			return storageErr(err, "syncing %s", s.logPath)
		}
	}
	if err := s.releaseReservation(); err != nil { // the size stays: nothing to sync
		return err
	}
	s.maybeAppendTimeEntry()
	for _, ix := range []*sparseIndex{s.index, s.timeIndex} {
		if err := ix.flush(); err != nil {
			return storageErr(err, "writing %s", ix.path)
		}
		if err := ix.sync(); err != nil {
			return storageErr(err, "syncing %s", ix.path)
		}
	}
	return nil
}
