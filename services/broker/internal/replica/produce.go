package replica

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
)

// MaxFetchWaitMs is the longest max wait a fetch may ask, a consumer's or a
// follower's (a leader refuses more); a follower whose
// replica.fetch.wait.max.ms is longer asks this.
const MaxFetchWaitMs = 60000

// DefaultProduceTimeout bounds an acks=all wait when a gRPC request gives
// none (timeout_ms 0).
const DefaultProduceTimeout = 30 * time.Second

// ProduceResult is a leader's answer to a produce.
type ProduceResult struct {
	BaseOffset     int64
	LastOffset     int64
	LogAppendTime  int64
	LogStartOffset int64
	LeaderEpoch    int32
	Duplicate      bool
}

// Produce appends one record batch (in the log's format) on the leader and,
// for acks=-1, waits until the high watermark covers it (F15–F17), for at
// most timeout: 0 does not wait, as Kafka's timeout 0, and answers
// REQUEST_TIMED_OUT unless the ISR already holds the batch.
func (m *Manager) Produce(ctx context.Context, tp TP, acks int16, batch []byte, timeout time.Duration) (ProduceResult, error) {
	return m.timedProduce(ctx, tp, acks, -1, batch, timeout)
}

// ProduceSince is an acks=all Produce that writes only while this broker
// leads tp in the leadership that began in leader epoch since (as
// LeadingSince reports it), and answers NOT_LEADER_OR_FOLLOWER otherwise:
// the group coordinator's writes, made from the state it loaded in that
// leadership, must not land in a later one.
func (m *Manager) ProduceSince(ctx context.Context, tp TP, since int32, batch []byte, timeout time.Duration) (ProduceResult, error) {
	return m.timedProduce(ctx, tp, -1, since, batch, timeout)
}

func (m *Manager) timedProduce(ctx context.Context, tp TP, acks int16, since int32, batch []byte, timeout time.Duration) (res ProduceResult, err error) {
	start := m.now()
	defer func() {
		if o, ok := m.metrics.produceByAcks[acks]; ok { // invalid acks are refused, not timed
			o.Observe(m.now().Sub(start).Seconds())
		}
		if err != nil {
			code := kerr.CodeOf(err)
			m.metrics.refused.WithLabelValues(code.String()).Inc()
			if refusedForISR(code) {
				m.noteUnderMinISR(tp, code, err)
			}
		}
	}()
	return m.produce(ctx, tp, acks, since, batch, timeout)
}

// produce appends batch; since >= 0 fences it to the leadership that began
// in that epoch.
func (m *Manager) produce(ctx context.Context, tp TP, acks int16, since int32, batch []byte, timeout time.Duration) (ProduceResult, error) {
	if err := partition.CheckAcks(acks); err != nil {
		return ProduceResult{}, err
	}
	r, err := m.hosted(tp)
	if err != nil {
		return ProduceResult{}, err
	}
	var reorder *waiter
	var reorderDeadline time.Time
	for {
		res, err := m.appendAsLeader(ctx, r, tp, acks, since, batch, timeout)
		if kerr.CodeOf(err) != kerr.OutOfOrderSequenceNumber || ctx.Err() != nil {
			return res, err
		}
		// An idempotent producer keeps up to five batches in flight, and
		// gRPC may hand them to handlers out of order: a batch one ahead of
		// its predecessor waits briefly for it instead of bouncing back
		// (a real gap still fails once the wait is over).
		if reorder == nil {
			reorder = newWaiter()
			r.dataWaiters.add(reorder)
			defer r.dataWaiters.remove(reorder)
			reorderDeadline = m.now().Add(reorderWait)
		}
		left := reorderDeadline.Sub(m.now())
		if left <= 0 {
			return res, err
		}
		t := m.clock.NewTimer(left)
		select {
		case <-reorder.ch:
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
	}
}

type appendedKey struct{}

// WithAppended returns ctx carrying fn, which Produce calls once the batch
// is in the leader's log (before an acks=all wait; not on a refusal). The
// Kafka listener starts one connection's appends in request order with it,
// as Kafka does, while their acks=all waits overlap.
func WithAppended(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, appendedKey{}, fn)
}

func appended(ctx context.Context) {
	if fn, ok := ctx.Value(appendedKey{}).(func()); ok {
		fn()
	}
}

// reorderWait bounds how long an out-of-order idempotent batch waits for
// the batches before it.
const reorderWait = 50 * time.Millisecond

func (m *Manager) appendAsLeader(ctx context.Context, r *Replica, tp TP, acks int16, since int32, batch []byte, timeout time.Duration) (ProduceResult, error) {
	now := m.now()
	r.mu.Lock()
	if since >= 0 && r.state.IsLeader() && r.leaderSince != since {
		r.mu.Unlock()
		return ProduceResult{}, kerr.New(kerr.NotLeaderOrFollower,
			"broker %d has led %s-%d since leader epoch %d, not since %d", m.opts.BrokerID, tp.Topic, tp.Partition, r.leaderSince, since)
	}
	if !r.state.IsLeader() {
		r.mu.Unlock()
		return ProduceResult{}, m.withLeaderHint(tp, kerr.New(kerr.NotLeaderOrFollower,
			"broker %d is not the leader of %s-%d", m.opts.BrokerID, tp.Topic, tp.Partition))
	}
	if r.yieldingLocked() {
		y := *r.yielded
		r.mu.Unlock()
		return ProduceResult{}, m.errYielding(tp, y)
	}
	fenced := m.fence().Err
	if acks == -1 {
		fenced = m.fencedLocked(r, now)
	}
	if fenced != nil {
		r.mu.Unlock()
		return ProduceResult{}, fenced
	}
	if err := r.state.BeforeAppend(acks); err != nil {
		r.mu.Unlock()
		return ProduceResult{}, err
	}
	epoch := r.state.LeaderEpoch()
	// Record headers count against produce.max.records.per.request as
	// structured ones do (a group coordinator's records carry none).
	info, err := r.log.AppendAsLeaderWithin(batch, epoch, int64(m.BrokerConfig().ProduceMaxRecordsPerRequest))
	if err != nil {
		r.mu.Unlock()
		return ProduceResult{}, err
	}
	upd := r.state.OnLocalAppend(info.LogEndOffset, now)
	if !info.Duplicate {
		m.metrics.bytesIn.Add(float64(len(batch)))
	}
	res := ProduceResult{
		BaseOffset: info.FirstOffset, LastOffset: info.LastOffset, LogAppendTime: now.UnixMilli(),
		LogStartOffset: r.log.LogStartOffset(), LeaderEpoch: epoch, Duplicate: info.Duplicate,
	}
	r.mu.Unlock()
	appended(ctx)
	// New data: parked follower fetches can answer at once (F18), which is
	// what makes an acks=all write take about one follower round trip.
	r.wakeData()
	if upd.Advanced() {
		m.hwAdvanced(ctx, r, upd, "leader append")
	}
	if acks != -1 {
		// A pause after the check above must not end in an ack from a
		// broker that has since lost its lease.
		return res, m.fence().Err
	}
	return res, m.awaitCommit(ctx, r, epoch, info.LastOffset+1, timeout)
}

// awaitCommit parks an acks=all produce until HW >= required (the produce
// purgatory, F17; Kafka's DelayedProduce). It fails with
// NOT_LEADER_OR_FOLLOWER when this broker is no longer the leader, or has
// not been leader without a break since the append's epoch: leadership that
// moved away and came back may have seen the records truncated and their
// offsets reused, even if a later HW passes them. A new leader epoch of the
// same, continuous leader (the controller bumps it on every write, an ISR
// shrink included) does not end the wait: a replica truncates only as a
// follower, so the records at those offsets are still the ones appended,
// and the leader recorded the new epoch's start after them (KAFKA-7415),
// so no follower truncates them either.
func (m *Manager) awaitCommit(ctx context.Context, r *Replica, epoch int32, required int64, timeout time.Duration) error {
	span := trace.SpanFromContext(ctx)
	w := newWaiter()
	defer releaseWaiter(w)
	r.hwWaiters.add(w)
	defer r.hwWaiters.remove(w)
	m.metrics.parkedProd.Add(1)
	defer m.metrics.parkedProd.Add(-1)
	var expired <-chan time.Time // nil with no wait: the check below answers
	if timeout > 0 {
		timer := m.clock.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C()
	}
	start := m.now()
	for {
		r.mu.Lock()
		var done bool
		var err error
		switch {
		case !r.state.IsLeader():
			done, err = true, kerr.New(kerr.NotLeaderOrFollower,
				"broker %d lost leadership of %s-%d while waiting for replication (appended in leader epoch %d, now epoch %d)",
				m.opts.BrokerID, r.tp.Topic, r.tp.Partition, epoch, r.state.LeaderEpoch())
		case r.leaderSince > epoch:
			done, err = true, kerr.New(kerr.NotLeaderOrFollower,
				"broker %d lost and regained leadership of %s-%d while waiting for replication (appended in leader epoch %d, leader again since epoch %d): the records may have been truncated",
				m.opts.BrokerID, r.tp.Topic, r.tp.Partition, epoch, r.leaderSince)
		default:
			if done, err = r.state.ProduceDone(required); !done {
				// Fenced and its followers gone (WakeParkedProduce wakes
				// this check): they follow a new leader, so the write
				// cannot commit here; the client retries there.
				if ferr := m.fencedLocked(r, m.now()); ferr != nil {
					done, err = true, ferr
				}
			}
		}
		hw := r.state.HighWatermark()
		by, linked := r.committedByLocked(required)
		r.mu.Unlock()
		if done {
			if err == nil && linked {
				// Answers "which follower fetch committed my write".
				span.AddLink(trace.Link{SpanContext: by, Attributes: []attribute.KeyValue{
					attribute.String("tidemark.link", "committed by")}})
			}
			if span.IsRecording() {
				span.AddEvent("committed", trace.WithAttributes(attribute.Int64("hw", hw),
					attribute.Int64("wait_us", m.now().Sub(start).Microseconds())))
			}
			if err == nil {
				m.metrics.appendToHW.Observe(m.now().Sub(start).Seconds())
			}
			return m.withLeaderHint(r.tp, err)
		}
		if timeout <= 0 {
			return kerr.New(kerr.RequestTimedOut, "%s-%d: high watermark %d has not reached %d, and the request's timeout is 0", r.tp.Topic, r.tp.Partition, hw, required)
		}
		select {
		case <-w.ch:
		case <-expired:
			return kerr.New(kerr.RequestTimedOut, "%s-%d: high watermark %d did not reach %d within %s", r.tp.Topic, r.tp.Partition, hw, required, timeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-m.stop:
			return kerr.New(kerr.NotLeaderOrFollower, "broker %d is shutting down", m.opts.BrokerID)
		}
	}
}

// leaderAndIsrAdvancedLocked traces a HW advance made by applying a
// LeaderAndIsr, so acks=all produces it committed link to a span as they
// do to a fetch or an ISR change of the leader's own.
func (m *Manager) leaderAndIsrAdvancedLocked(r *Replica, s partition.LeaderAndISR, upd partition.HWUpdate) {
	m.tracedAdvanceLocked(r, "broker.leader_and_isr", upd, "leader and ISR applied",
		attribute.Int("tidemark.leader_epoch", int(s.LeaderEpoch)), attribute.Int("tidemark.partition_epoch", int(s.PartitionEpoch)),
		attribute.String("tidemark.isr", partition.FormatIDs(s.ISR)))
}

// minISRLoweredAdvancedLocked traces a HW advance made by lowering the
// topic's min.insync.replicas: the ISR had held the HW below the effective
// min ISR (KAFKA-15583), and the acks=all produces it held link here.
func (m *Manager) minISRLoweredAdvancedLocked(r *Replica, from, to int, upd partition.HWUpdate) {
	m.tracedAdvanceLocked(r, "broker.min_insync_lowered", upd, "min.insync.replicas lowered",
		attribute.Int("tidemark.min_insync_replicas.before", from), attribute.Int("tidemark.min_insync_replicas.after", to),
		attribute.String("tidemark.isr", partition.FormatIDs(r.state.ISR())))
}

// tracedAdvanceLocked gives a HW advance no fetch made a span of its own,
// named for its cause, which the produces it committed link to.
func (m *Manager) tracedAdvanceLocked(r *Replica, name string, upd partition.HWUpdate, cause string, attrs ...attribute.KeyValue) {
	attrs = append(attrs, attribute.String("tidemark.topic", r.tp.Topic), attribute.Int("tidemark.partition", int(r.tp.Partition)),
		attribute.Int64("tidemark.hw.before", upd.Before), attribute.Int64("tidemark.hw.after", upd.After))
	ctx, span := m.tracer.Start(context.Background(), name, trace.WithAttributes(attrs...))
	span.AddEvent("high watermark advanced", trace.WithAttributes(
		attribute.Int64("hw.before", upd.Before), attribute.Int64("hw.after", upd.After)))
	r.markCommitLocked(upd.After, span.SpanContext())
	span.End()
	m.hwAdvanced(ctx, r, upd, cause)
}

// hwAdvanced wakes what waits on a HW move and records it.
func (m *Manager) hwAdvanced(ctx context.Context, r *Replica, upd partition.HWUpdate, cause string) {
	r.wakeHW()
	sc := trace.SpanContextFromContext(ctx)
	ev := Event{Kind: "hw-advance", TP: r.tp, Reason: cause}
	if sc.IsValid() {
		ev.TraceID = sc.TraceID().String()
	}
	m.emit(ev)
	if m.log.Enabled(ctx, slog.LevelDebug) { // its arguments allocate on every write
		m.log.Debug("high watermark advanced", "topic", r.tp.Topic, "partition", r.tp.Partition,
			"from", upd.Before, "to", upd.After, "cause", cause)
	}
}
