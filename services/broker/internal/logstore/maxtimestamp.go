package logstore

import "tidemark.io/services/recordbatch"

// maxTimestampOffset finds the record with the largest timestamp in the log
// (ListOffsets' MAX_TIMESTAMP, KIP-734), by Kafka's rule since KAFKA-16310:
// the first segment whose largest batch timestamp is the log's largest, in
// it the first batch carrying that timestamp, and in that batch the first
// record carrying it (for LogAppendTime batches every record carries the
// batch's timestamp, so its first record: its base offset unless the cleaner
// removed it). Each segment keeps its largest timestamp (maxTS) through
// appends, truncation, loading and cleaning, so only that segment is read,
// from its time index's entry below the timestamp. As Kafka, whole segments
// count, records below the log start in the first one included, and the
// search is not bounded by the high watermark: the caller decides whether
// what it found may be exposed. Nothing found (an empty log, or the largest
// batch not yet published) returns false.
//
// As Kafka's, the cleaner gives a partly kept batch the largest timestamp of
// its kept records, so on a compacted log the headers, the segments' maxima
// and the time index stay exact and the answer is found as above. Two kinds
// of batch may still carry a maximum no record has: an empty batch the
// cleaner keeps (its producer's last sequence, or its group's end; Kafka's
// keeps the header's maximum too), and a partly kept batch cleaned by an
// older tidemark, whose header kept the removed record's maximum (until a
// pass rewrites it; nothing on disk tells such a segment apart). Only then,
// when the segment holds no record carrying its maximum, are the log's
// records walked for the largest timestamp they really carry
// (scanRecordMax); Kafka answers nothing when only an empty batch carries
// the maximum.
func (l *Log) maxTimestampOffset() (TimestampOffset, bool, error) {
	l.fileMu.RLock()
	defer l.fileMu.RUnlock()
	if l.filesClosed {
		return TimestampOffset{}, false, ErrClosed
	}
	// The LEO first: a batch's maxTS is set before the LEO publishes it, so
	// every batch below bound counts in the maxima read after.
	bound := l.leo.Load()
	segs := l.segments()
	var top *segment
	for _, s := range segs {
		if top == nil || s.maxTS.Load() > top.maxTS.Load() {
			top = s
		}
	}
	if top == nil || top.maxTS.Load() < 0 || top.base >= bound {
		return TimestampOffset{}, false, nil
	}
	ts := top.maxTS.Load()
	from, err := top.timeLookup(ts)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	to, found, err := l.scanForTimestamp(top, max(from, top.base), top.base, bound, ts)
	if err != nil || found {
		return to, found, err
	}
	return l.scanRecordMax(segs, bound)
}

// scanRecordMax walks every batch below bound and returns the first record
// carrying the largest record timestamp; a batch is decoded only when its
// header's maximum is above the best so far.
func (l *Log) scanRecordMax(segs []*segment, bound int64) (TimestampOffset, bool, error) {
	best, found := TimestampOffset{Timestamp: -1}, false
	for _, s := range segs {
		if s.base >= bound {
			break
		}
		limit := s.size.Load()
		r := newBatchReader(s.log, s.logPath, limit, headerWindow)
		for pos := int64(0); pos < limit; {
			h, size, err := r.header(pos)
			if err != nil {
				return TimestampOffset{}, false, tornAsStorage(err, s.logPath)
			}
			if h.LastOffset() >= bound {
				return best, found, nil
			}
			switch {
			case h.MaxTimestamp() <= best.Timestamp || h.RecordCount() == 0:
			case h.TimestampType() == recordbatch.LogAppendTime && dense(h):
				// Every record carries the batch's timestamp.
				best, found = TimestampOffset{h.BaseOffset(), h.MaxTimestamp(), h.PartitionLeaderEpoch()}, true
			default:
				b, err := r.whole(pos, size)
				if err != nil {
					return TimestampOffset{}, false, tornAsStorage(err, s.logPath)
				}
				h = b // whole may have read the window again under h
				for rec, err := range b.Records() {
					if err != nil {
						return TimestampOffset{}, false, storageErr(err, "decoding batch at %s position %d", s.logPath, pos)
					}
					if h.TimestampType() == recordbatch.LogAppendTime {
						rec.Timestamp = h.MaxTimestamp() // its first kept record
					}
					if rec.Timestamp > best.Timestamp {
						best, found = TimestampOffset{rec.Offset, rec.Timestamp, h.PartitionLeaderEpoch()}, true
					}
				}
			}
			pos += size
		}
	}
	return best, found, nil
}
