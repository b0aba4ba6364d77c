package logstore

// AssignEpochStartOffset records that leaderEpoch starts at the current LEO.
// A new leader calls it on election, before any append (KAFKA-7415), so the
// epoch's start is known even if it never appends. Epochs not above the
// latest are ignored, as in LeaderEpochCache.Assign.
func (l *Log) assignEpochStartOffset(leaderEpoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return err
	}
	_, err := l.epochs.Assign(leaderEpoch, l.leo.Load())
	return err
}

// EndOffsetForEpoch answers OffsetsForLeaderEpoch (see
// LeaderEpochCache.EndOffsetFor) against the current LEO.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return l.epochs.EndOffsetFor(epoch, l.leo.Load())
}

// EpochForOffset is the leader epoch in which offset was written (see
// LeaderEpochCache.EpochFor), or UndefinedEpoch.
func (l *Log) EpochForOffset(offset int64) int32 { return l.epochs.EpochFor(offset) }

// LatestEpoch is the newest leader epoch in the log, or UndefinedEpoch.
func (l *Log) LatestEpoch() int32 { return l.epochs.LatestEpoch() }

// LatestEpochStartOffset is where the newest epoch began, the leader's
// "epoch start offset" a follower must reach before joining the ISR
// (KAFKA-7128); ok is false when no epoch is known.
func (l *Log) LatestEpochStartOffset() (offset int64, ok bool) {
	e, ok := l.epochs.Latest()
	return e.StartOffset, ok
}

// EpochEntries returns the leader-epoch cache, oldest first.
func (l *Log) EpochEntries() []EpochEntry { return l.epochs.Entries() }
