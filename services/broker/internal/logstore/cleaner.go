package logstore

import (
	"errors"
	"math"
	"sync/atomic"
	"time"
)

// cleanerStats are the Manager's cleaner counters, for metrics.
type cleanerStats struct {
	passes, aborted, failures     atomic.Int64
	bytesRead, bytesWritten       atomic.Int64
	recordsRemoved, tombstonesOut atomic.Int64
	lastDurationNs                atomic.Int64
	maxDirtyRatio                 atomic.Uint64 // float64 bits
}

// CleanerStats is a snapshot of the log cleaner's work on this data dir.
type CleanerStats struct {
	Passes, Aborted, Failures int64
	BytesRead, BytesWritten   int64
	RecordsRemoved            int64
	TombstonesRemoved         int64
	LastDuration              time.Duration
	// MaxDirtyRatio is the largest dirty ratio of a compacted log seen by
	// the last RunCleaner.
	MaxDirtyRatio float64
}

// Add sums two directories' counters (the last duration and the dirty
// ratio are the larger of the two).
func (s CleanerStats) Add(o CleanerStats) CleanerStats {
	return CleanerStats{
		Passes: s.Passes + o.Passes, Aborted: s.Aborted + o.Aborted, Failures: s.Failures + o.Failures,
		BytesRead: s.BytesRead + o.BytesRead, BytesWritten: s.BytesWritten + o.BytesWritten,
		RecordsRemoved: s.RecordsRemoved + o.RecordsRemoved, TombstonesRemoved: s.TombstonesRemoved + o.TombstonesRemoved,
		LastDuration: max(s.LastDuration, o.LastDuration), MaxDirtyRatio: max(s.MaxDirtyRatio, o.MaxDirtyRatio),
	}
}

// CleanerStats returns the cleaner's counters.
func (m *Manager) CleanerStats() CleanerStats {
	c := &m.cleaner
	return CleanerStats{
		Passes: c.passes.Load(), Aborted: c.aborted.Load(), Failures: c.failures.Load(),
		BytesRead: c.bytesRead.Load(), BytesWritten: c.bytesWritten.Load(),
		RecordsRemoved: c.recordsRemoved.Load(), TombstonesRemoved: c.tombstonesOut.Load(),
		LastDuration:  time.Duration(c.lastDurationNs.Load()),
		MaxDirtyRatio: math.Float64frombits(c.maxDirtyRatio.Load()),
	}
}

func (m *Manager) cleanerLoop() {
	defer close(m.cleanerDone)
	backoff := m.opts.CleanerBackoff
	if backoff <= 0 {
		backoff = 15 * time.Second
	}
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		if m.RunCleaner() {
			continue // there may be more to do
		}
		t := time.NewTimer(backoff)
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// RunCleaner cleans the compacted log with the highest dirty ratio among
// those that need it (min.cleanable.dirty.ratio reached, a dirty segment
// older than max.compaction.lag.ms, or tombstones past delete.retention.ms),
// below its high watermark. It reports whether it cleaned one.
func (m *Manager) RunCleaner() bool {
	if m.opts.HighWatermark == nil {
		return false
	}
	var (
		best      *Log
		bestTP    TopicPartition
		bestHW    int64
		bestMark  TruncationMark
		bestRatio = -1.0
		maxRatio  float64
	)
	for tp, l := range m.openLogs() {
		cfg := l.Config()
		if !cfg.Compacted() {
			continue
		}
		// Before the HW: a truncation below it after this read must
		// abort the pass, not be cleaned over.
		mark := l.TruncationMark()
		hw, ok := m.opts.HighWatermark(tp)
		if !ok {
			continue
		}
		c, err := l.Cleanable(hw)
		if err != nil {
			continue
		}
		maxRatio = max(maxRatio, c.Ratio)
		if c.NeedsCleaning(cfg) && c.Ratio > bestRatio {
			best, bestTP, bestHW, bestMark, bestRatio = l, tp, hw, mark, c.Ratio
		}
	}
	m.cleaner.maxDirtyRatio.Store(math.Float64bits(maxRatio))
	if best == nil {
		return false
	}
	mapBytes := m.opts.CleanerDedupeBytes
	if mapBytes <= 0 {
		mapBytes = 128 << 20
	}
	st := &m.cleaner
	res, err := best.Clean(CleanOptions{UpperBound: bestHW, Truncations: bestMark, MapBytes: mapBytes, Stop: m.stop,
		Swapped: func(g CleanResult) {
			st.bytesWritten.Add(g.BytesWritten)
			st.recordsRemoved.Add(g.RecordsRemoved)
			st.tombstonesOut.Add(g.TombstonesRemoved)
		}})
	st.bytesRead.Add(res.BytesRead)
	switch {
	case errors.Is(err, ErrCleanAborted) || errors.Is(err, ErrClosed):
		st.aborted.Add(1)
		m.logger.Info("log cleaning aborted: the log changed under it", "partition", bestTP.String())
		return false
	case err != nil:
		st.failures.Add(1)
		m.logger.Warn("log cleaning failed", "partition", bestTP.String(), "err", err)
		return false
	}
	st.passes.Add(1)
	st.lastDurationNs.Store(int64(res.Duration))
	m.logger.Info("cleaned log", "partition", bestTP.String(), "dirty_ratio", res.DirtyRatio,
		"first_dirty_offset", res.FirstDirty, "cleaned_to_offset", res.MapEnd, "high_watermark", bestHW,
		"segments_before", res.SegmentsBefore, "segments_after", res.SegmentsAfter,
		"bytes_read", res.BytesRead, "bytes_written", res.BytesWritten,
		"records_removed", res.RecordsRemoved, "tombstones_removed", res.TombstonesRemoved, "duration", res.Duration)
	return res.SegmentsBefore > 0
}
