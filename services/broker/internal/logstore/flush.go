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
// continue meanwhile; holding fileMu for reading keeps truncation and
// deletion away, and flushMu makes concurrent flushes queue (a later one
// usually finds its work done: group commit).
func (l *Log) flushUpTo(target int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.fileMu.RLock()
	defer l.fileMu.RUnlock()
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
	if target > rp {
		l.recoveryPoint.Store(target)
		l.lastFlush.Store(l.now().UnixNano())
	}
	if synced {
		l.stats.flushes.Add(1)
	}
	return nil
}
