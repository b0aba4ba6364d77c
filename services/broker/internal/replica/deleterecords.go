package replica

import (
	"context"
	"time"

	"tidemark.io/services/platform/kerr"
)

// DeleteRecordsPartition is one partition of a DeleteRecords request.
type DeleteRecordsPartition struct {
	TP TP
	// Offset is the new log start; -1 is the HW.
	Offset int64
}

// DeleteRecordsResult is one partition's answer: the low watermark (-1
// with an error but REQUEST_TIMED_OUT) or the error.
type DeleteRecordsResult struct {
	LowWatermark int64
	Err          error
}

// DeleteRecords raises the log start of each partition, which this broker
// must lead, to its offset (-1: the HW), then waits until every live
// replica's log start is there too (KIP-107, Kafka's DelayedDeleteRecords):
// followers learn the leader's log start from their fetch answers, and
// their next fetch tells it back. A partition's answer is its low
// watermark, the least log start among the live replicas; REQUEST_TIMED_OUT
// (with the low watermark reached) when timeout passes first, at once with
// timeout 0. The partitions wait side by side on one waiter, one deadline.
func (m *Manager) DeleteRecords(ctx context.Context, parts []DeleteRecordsPartition, timeout time.Duration) []DeleteRecordsResult {
	results := make([]DeleteRecordsResult, len(parts))
	var pending []pendingDelete
	for i, p := range parts {
		r, err := m.hosted(p.TP)
		if err != nil {
			results[i] = DeleteRecordsResult{LowWatermark: -1, Err: err}
			continue
		}
		target, low, moved, err := m.deleteOnLeader(r, p.Offset)
		if err == nil && moved {
			err = m.persistLogStart(p.TP)
		}
		if err != nil {
			results[i] = DeleteRecordsResult{LowWatermark: -1, Err: m.withLeaderHint(p.TP, err)}
			continue
		}
		results[i].LowWatermark = low
		if low < target {
			pending = append(pending, pendingDelete{at: i, r: r, target: target})
		}
	}
	if len(pending) > 0 {
		m.awaitLowWatermarks(ctx, pending, results, timeout)
	}
	return results
}

// pendingDelete is a partition whose low watermark is still below target.
type pendingDelete struct {
	at     int
	r      *Replica
	target int64
}

// deleteOnLeader moves the leader's log start and returns the offset the
// request waits for, the low watermark now, and whether the start moved.
func (m *Manager) deleteOnLeader(r *Replica, offset int64) (target, low int64, moved bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	target, err = r.state.DeleteRecordsOffset(offset)
	if err != nil {
		return 0, 0, false, err
	}
	// A leader cut off from etcd and its followers may be deposed already:
	// as an acks=all write, the deletion needs its followers' word.
	if err := m.fencedLocked(r, m.now()); err != nil {
		return 0, 0, false, err
	}
	if !r.cfg.Delete() {
		return 0, 0, false, kerr.New(kerr.PolicyViolation, "records of %s-%d cannot be deleted: its cleanup.policy is %q", r.tp.Topic, r.tp.Partition, r.cfg.CleanupPolicy)
	}
	// The log start never goes back: an offset below it only waits.
	before := r.log.LogStartOffset()
	if err := r.log.AdvanceLogStartOffset(target, r.state.HighWatermark()); err != nil {
		return 0, 0, false, err
	}
	r.state.SetLogStartOffset(r.log.LogStartOffset())
	low, err = r.state.LowWatermark(m.brokerAlive)
	return target, low, r.log.LogStartOffset() != before, err
}

// persistLogStart writes tp's moved log start to disk before anyone is
// told of it (an answer, a follower's fetch): the periodic checkpoint may be
// a minute away, and a crash before it would bring the deleted records back.
func (m *Manager) persistLogStart(tp TP) error {
	if err := m.logs.PersistLogStart(tp); err != nil {
		return kerr.New(kerr.KafkaStorageError, "%s-%d: writing the log start checkpoint: %v", tp.Topic, tp.Partition, err)
	}
	return nil
}

// brokerAlive reports whether the metadata holds broker id as registered:
// a dead broker's replica does not hold the low watermark back, as Kafka's
// lowWatermarkIfLeader skips brokers its metadata cache has not alive.
func (m *Manager) brokerAlive(id int32) bool {
	_, ok := m.opts.Meta.Broker(id)
	return ok
}

// wakeDeleteRecords has every parked DeleteRecords check its low
// watermark again: the live brokers changed.
func (m *Manager) wakeDeleteRecords() {
	for _, r := range m.Replicas() {
		r.lwWaiters.wakeAll()
	}
}

// awaitLowWatermarks parks until every pending partition's low watermark
// reaches its target, or its leadership ends, or timeout, and fills in
// their results. The waiter is registered before the first check, so no
// wake-up between a check and the wait is lost.
func (m *Manager) awaitLowWatermarks(ctx context.Context, pending []pendingDelete, results []DeleteRecordsResult, timeout time.Duration) {
	w := newWaiter()
	defer releaseWaiter(w) // after the removals below
	for _, p := range pending {
		p.r.lwWaiters.add(w)
		defer p.r.lwWaiters.remove(w)
	}
	var expired <-chan time.Time
	for {
		pending = m.settleDeletes(pending, results)
		if len(pending) == 0 {
			return
		}
		if timeout <= 0 {
			m.failDeletes(pending, results, nil, timeout)
			return
		}
		if expired == nil {
			timer := m.clock.NewTimer(timeout)
			defer timer.Stop()
			expired = timer.C()
		}
		select {
		case <-w.ch:
		case <-expired:
			m.failDeletes(pending, results, nil, timeout)
			return
		case <-ctx.Done():
			m.failDeletes(pending, results, ctx.Err(), timeout)
			return
		case <-m.stop:
			m.failDeletes(pending, results, kerr.New(kerr.NotLeaderOrFollower, "broker %d is shutting down", m.opts.BrokerID), timeout)
			return
		}
	}
}

// settleDeletes answers the pending partitions whose low watermark reached
// its target or whose leadership ended, and returns the others.
func (m *Manager) settleDeletes(pending []pendingDelete, results []DeleteRecordsResult) []pendingDelete {
	left := pending[:0]
	for _, p := range pending {
		p.r.mu.Lock()
		low, err := p.r.state.LowWatermark(m.brokerAlive)
		p.r.mu.Unlock()
		switch {
		case err != nil:
			results[p.at] = DeleteRecordsResult{LowWatermark: -1, Err: m.withLeaderHint(p.r.tp, err)}
		case low >= p.target:
			results[p.at] = DeleteRecordsResult{LowWatermark: low}
		default:
			results[p.at].LowWatermark = low
			left = append(left, p)
		}
	}
	return left
}

// failDeletes answers the partitions still pending with err, or
// REQUEST_TIMED_OUT and the low watermark reached when err is nil.
func (m *Manager) failDeletes(pending []pendingDelete, results []DeleteRecordsResult, err error, timeout time.Duration) {
	for _, p := range pending {
		res := &results[p.at]
		if err != nil {
			res.Err = err
			continue
		}
		res.Err = m.lowWatermarkTimedOut(p.r, res.LowWatermark, p.target, timeout)
	}
}

func (m *Manager) lowWatermarkTimedOut(r *Replica, low, target int64, timeout time.Duration) error {
	return kerr.New(kerr.RequestTimedOut, "%s-%d: low watermark %d has not reached %d within %s", r.tp.Topic, r.tp.Partition, low, target, timeout)
}
