package logstore

import (
	"errors"
	"io"
	"sort"

	"tidemark.io/services/recordbatch"
)

// ReadResult is the outcome of a Read.
type ReadResult struct {
	// Records holds whole batches, concatenated, exactly as stored.
	Records []byte
	// NextOffset is where the next read should start: the offset after the
	// last batch returned, or the requested offset when none was.
	NextOffset int64
}

// Read returns whole batches starting with the one that contains offset
// (which may begin before offset when offset is mid-batch), up to maxBytes
// in total and only batches that end below upperBound (the caller passes the
// HW for consumers, the LEO for followers). The first batch is returned even
// when it is larger than maxBytes (KIP-74), so an oversized batch cannot stall
// replication. A read never crosses a segment boundary.
//
// offset below the log start or above the LEO is OFFSET_OUT_OF_RANGE; offset
// at or above upperBound, or at the LEO, gives an empty result. Read runs
// concurrently with appends and sees only data below the LEO published when
// it starts.
func (l *Log) Read(offset int64, maxBytes int, upperBound int64) (ReadResult, error) {
	return l.ReadInto(nil, offset, maxBytes, upperBound)
}

// readInto is ReadInto's work.
func (l *Log) readInto(buf []byte, offset int64, maxBytes int, upperBound int64) (ReadResult, error) {
	l.fileMu.RLock()
	defer l.fileMu.RUnlock()
	if l.filesClosed {
		return ReadResult{}, ErrClosed
	}
	leo, start := l.leo.Load(), l.logStart.Load()
	if offset < start || offset > leo {
		return ReadResult{}, outOfRange("offset %d is outside the log [%d, %d]", offset, start, leo)
	}
	bound := min(upperBound, leo)
	empty := ReadResult{NextOffset: offset}
	if offset >= bound {
		return empty, nil
	}
	// The batch holding offset, or the next one: compaction may have
	// removed offset, even the rest of its segment.
	var (
		s     *segment
		limit int64
		pos   int64
		first recordbatch.Batch
		found bool
	)
	segs := l.segments() // grows only at the end while fileMu is held
	for i := l.segmentIndex(offset); !found; i++ {
		if i >= len(segs) || segs[i].base >= bound {
			return empty, nil
		}
		s = segs[i]
		limit = s.size.Load()
		var err error
		if pos, first, found, err = findBatch(s, offset, limit); err != nil {
			return ReadResult{}, err
		}
		if !found && i == len(segs)-1 {
			return ReadResult{}, storageErr(errors.New("offset below the log end not found"), "reading offset %d from %s", offset, s.logPath)
		}
	}
	if first.LastOffset() >= bound {
		return empty, nil
	}
	firstSize, _ := recordbatch.PeekSize(first)
	n := min(max(int64(maxBytes), firstSize), limit-pos)
	if int64(cap(buf)) >= n {
		buf = buf[:n]
	} else {
		buf = make([]byte, n)
	}
	if got, err := s.log.ReadAt(buf, pos); err != nil && !(errors.Is(err, io.EOF) && int64(got) == n) {
		return ReadResult{}, storageErr(err, "reading %s at position %d", s.logPath, pos)
	}
	kept, next := 0, offset
	for b, err := range recordbatch.All(buf) {
		if err != nil || b.LastOffset() >= bound {
			break
		}
		kept += len(b)
		next = b.NextOffset()
	}
	return ReadResult{Records: buf[:kept:kept], NextOffset: next}, nil
}

// segmentIndex returns the position of the segment whose range holds
// offset: the last one with base <= offset.
func (l *Log) segmentIndex(offset int64) int {
	segs := l.segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return max(i-1, 0)
}

// TimestampOffset is a record OffsetForTimestamp found (Kafka's
// TimestampAndOffset).
type TimestampOffset struct {
	Offset, Timestamp int64
	// LeaderEpoch is the partition leader epoch of the record's batch.
	LeaderEpoch int32
}

// OffsetForTimestamp finds the first record, below upperBound and at or
// after the log start, whose timestamp is at least ts (for LogAppendTime
// batches, the batch's timestamp counts for every record; a batch the
// cleaner emptied has none). It uses the time index to skip ahead, then
// scans.
func (l *Log) offsetForTimestamp(ts, upperBound int64) (TimestampOffset, bool, error) {
	l.fileMu.RLock()
	defer l.fileMu.RUnlock()
	if l.filesClosed {
		return TimestampOffset{}, false, ErrClosed
	}
	start := l.logStart.Load()
	bound := min(upperBound, l.leo.Load())
	for _, s := range l.segments() {
		if s.base >= bound {
			break
		}
		if s.maxTS.Load() < ts {
			continue
		}
		from, err := s.timeLookup(ts)
		if err != nil {
			return TimestampOffset{}, false, err
		}
		to, found, err := l.scanForTimestamp(s, max(from, start), start, bound, ts)
		if err != nil || found {
			return to, found, err
		}
	}
	return TimestampOffset{}, false, nil
}

func (l *Log) scanForTimestamp(s *segment, from, start, bound, ts int64) (TimestampOffset, bool, error) {
	limit := s.size.Load()
	pos, _, ok, err := findBatch(s, from, limit)
	if err != nil || !ok {
		return TimestampOffset{}, false, err
	}
	r := newBatchReader(s.log, s.logPath, limit, headerWindow)
	for pos < limit {
		h, size, err := r.header(pos)
		if err != nil {
			return TimestampOffset{}, false, tornAsStorage(err, s.logPath)
		}
		if h.LastOffset() >= bound {
			return TimestampOffset{}, false, nil
		}
		// A batch the cleaner emptied holds no record to answer.
		if h.LastOffset() >= start && h.MaxTimestamp() >= ts && h.RecordCount() > 0 {
			epoch := h.PartitionLeaderEpoch()
			appendTime := h.TimestampType() == recordbatch.LogAppendTime
			if appendTime && dense(h) {
				return TimestampOffset{max(h.BaseOffset(), start), h.MaxTimestamp(), epoch}, true, nil
			}
			b, err := r.whole(pos, size)
			if err != nil {
				return TimestampOffset{}, false, tornAsStorage(err, s.logPath)
			}
			h = b // whole may have read the window again under h
			for rec, err := range b.Records() {
				if err != nil {
					return TimestampOffset{}, false, storageErr(err, "decoding batch at %s position %d", s.logPath, pos)
				}
				if appendTime {
					rec.Timestamp = h.MaxTimestamp()
				}
				if rec.Offset >= start && rec.Timestamp >= ts {
					return TimestampOffset{rec.Offset, rec.Timestamp, epoch}, true, nil
				}
			}
		}
		pos += size
	}
	return TimestampOffset{}, false, nil
}

// dense reports whether a batch holds every offset it spans: one the
// cleaner has not thinned, whose first record is at its base offset (every
// record of a LogAppendTime batch carries the batch's timestamp, so such a
// batch answers a lookup without being decoded).
func dense(h recordbatch.Batch) bool {
	return h.RecordCount() > 0 && h.RecordCount() == h.LastOffsetDelta()+1
}
