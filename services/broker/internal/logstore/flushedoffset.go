package logstore

import (
	"strconv"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// flushedCheckpoint records, for a log that may have gaps, an offset below
// which its data was fsynced: loading trusts gaps up to it, as up to the
// recovery point (see gapOK). The recovery-point checkpoint is written once a
// minute and would lag a flush by as much; this one is written by the flush
// itself, and only when the flush made data after a gap durable. Such data
// is flushed before the follower reports its new log end to the leader
// (FlushGaps), whatever flush.ms says: a kill -9 of every replica must not
// cut records the leader counted as replicated.
const flushedCheckpoint = "flushed-offset-checkpoint"

// readFlushedOffset reads the flushed-offset checkpoint; -1 when there is
// none.
func readFlushedOffset(fsys vfs.FS, dir string) (int64, error) {
	path := dir + "/" + flushedCheckpoint
	rows, found, err := readCheckpoint(fsys, path, 1)
	if err != nil || !found {
		return -1, err
	}
	if len(rows) != 1 {
		return -1, &CheckpointError{File: path, Line: 2, Reason: "want one offset"}
	}
	off, err := strconv.ParseInt(rows[0][0], 10, 64)
	if err != nil || off < 0 {
		return -1, &CheckpointError{File: path, Line: 3, Reason: "bad offset " + strconv.Quote(rows[0][0])}
	}
	return off, nil
}

// recordFlushed writes target as the flushed offset when a follower
// appended a batch after a gap since the last one was written: everything
// below target is durable (flushUpTo calls it under flushMu after its
// syncs, the directory's included, before the flush returns), so loading
// after a crash keeps that batch, where the checkpointed recovery point may
// not reach it yet. Logs without such gaps never write it: the cost is one
// small atomic write per flush of a follower copying cleaned data.
func (l *Log) recordFlushed(target int64) error {
	if !l.GapsUnflushed() || target <= l.flushedOffset.Load() {
		return nil
	}
	if err := writeCheckpoint(l.fs, l.dir, flushedCheckpoint, []string{strconv.FormatInt(target, 10)}); err != nil {
		return err
	}
	l.flushedOffset.Store(target)
	return nil
}

// GapsUnflushed says whether a batch a follower appended after a gap lies
// above the flushed offset: whether FlushGaps has work to do (two atomic
// loads, for a caller that runs such flushes side by side).
func (l *Log) GapsUnflushed() bool { return l.newestGap.Load() > l.flushedOffset.Load() }

// lowerFlushedOffset brings the flushed offset down to a new log end
// (truncation, or a cut at loading) before anything is appended there:
// data written later in the range it covered is not durable, and must not
// have its gaps trusted. Called with syncMu held exclusively, or while
// loading. A newest gap above to went with the truncation: it is lowered
// to to, which still marks any older gap above the flushed offset, or every
// fetch would flush until the log end passed the gone one again.
func (l *Log) lowerFlushedOffset(to int64) error {
	if l.newestGap.Load() > to {
		l.newestGap.Store(to)
	}
	if l.flushedOffset.Load() <= to {
		return nil
	}
	if err := writeCheckpoint(l.fs, l.dir, flushedCheckpoint, []string{strconv.FormatInt(to, 10)}); err != nil {
		return err
	}
	l.flushedOffset.Store(to)
	return nil
}
