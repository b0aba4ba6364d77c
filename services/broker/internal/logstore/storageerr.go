package logstore

import "tidemark.io/services/platform/kerr"

// The public operations below report every KAFKA_STORAGE_ERROR they return
// to Options.OnStorageError: the owner of the data directory decides what
// a failing disk means (tidemark, like Kafka, takes the whole log dir
// offline). The log itself stays as consistent as the error left it.

// note passes a storage error to the log's owner and returns err.
func (l *Log) note(err error) error {
	if err != nil && l.onStorageError != nil && kerr.CodeOf(err) == kerr.KafkaStorageError {
		l.onStorageError(err)
	}
	return err
}

// ReadInto is Read reading into buf when it is large enough (its capacity
// counts), so a caller that pools buffers avoids allocating, and faulting
// in, fresh memory for every fetch. Records then aliases buf.
func (l *Log) ReadInto(buf []byte, offset int64, maxBytes int, upperBound int64) (ReadResult, error) {
	r, err := l.readInto(buf, offset, maxBytes, upperBound)
	return r, l.note(err)
}

// OffsetForTimestamp: see offsetForTimestamp.
func (l *Log) OffsetForTimestamp(ts, upperBound int64) (TimestampOffset, bool, error) {
	to, found, err := l.offsetForTimestamp(ts, upperBound)
	return to, found, l.note(err)
}

// DeleteOldSegments: see deleteOldSegments.
func (l *Log) DeleteOldSegments(hw int64) (int, error) {
	n, err := l.deleteOldSegments(hw)
	return n, l.note(err)
}

// AdvanceLogStartOffset: see advanceLogStartOffset.
func (l *Log) AdvanceLogStartOffset(offset, hw int64) error {
	return l.note(l.advanceLogStartOffset(offset, hw))
}

// TruncateTo: see truncateTo.
func (l *Log) TruncateTo(offset int64) (int64, error) {
	leo, err := l.truncateTo(offset)
	return leo, l.note(err)
}

// TruncateFullyAndStartAt: see truncateFullyAndStartAt.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	return l.note(l.truncateFullyAndStartAt(offset))
}

// AssignEpochStartOffset: see assignEpochStartOffset.
func (l *Log) AssignEpochStartOffset(leaderEpoch int32) error {
	return l.note(l.assignEpochStartOffset(leaderEpoch))
}

// Clean: see clean.
func (l *Log) Clean(opts CleanOptions) (CleanResult, error) {
	r, err := l.clean(opts)
	return r, l.note(err)
}

// FlushIfDue: see flushIfDue.
func (l *Log) FlushIfDue() error { return l.note(l.flushIfDue()) }

// MaxTimestampOffset: see maxTimestampOffset.
func (l *Log) MaxTimestampOffset() (TimestampOffset, bool, error) {
	to, found, err := l.maxTimestampOffset()
	return to, found, l.note(err)
}
