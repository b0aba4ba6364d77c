package replica

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
)

// alterBackoff spaces retries of AlterPartition after a failure.
const alterBackoff = 200 * time.Millisecond

// alterAttemptTimeout bounds one AlterPartition call.
const alterAttemptTimeout = 10 * time.Second

// isrExpirationLoop runs F7 every replica.lag.time.max.ms / 2 on every
// partition this broker leads, and re-evaluates its HW (ReevaluateHW).
func (m *Manager) isrExpirationLoop() {
	for {
		lag := time.Duration(m.BrokerConfig().ReplicaLagTimeMaxMs) * time.Millisecond
		if !m.sleep(context.Background(), max(lag/2, 10*time.Millisecond)) {
			return
		}
		now := m.now()
		for _, r := range m.Replicas() {
			r.mu.Lock()
			if !r.state.IsLeader() {
				r.mu.Unlock()
				m.checkHW(r, now, lag) // a stall ends with the leadership
				continue
			}
			out := r.state.MaybeShrinkISR(now)
			if upd := r.state.ReevaluateHW(now); upd.Advanced() {
				m.tracedAdvanceLocked(r, "broker.hw_reevaluated", upd, "a follower outside the ISR stopped holding it back")
			}
			r.mu.Unlock()
			m.checkHW(r, now, lag)
			if out.Proposal != nil {
				m.submitAlter(r, *out.Proposal)
			}
		}
	}
}

// submitAlter logs an ISR change proposal in Kafka's words and queues it for
// the controller. The leader already uses the maximal ISR meanwhile.
func (m *Manager) submitAlter(r *Replica, p partition.Proposal) {
	kind := "isr-expand"
	if p.Kind == partition.ShrinkISR {
		kind = "isr-shrink"
	}
	m.log.Info(p.LogLine(), "topic", r.tp.Topic, "partition", r.tp.Partition,
		"leader_epoch", p.Request.LeaderEpoch, "partition_epoch", p.Request.PartitionEpoch, "reason", p.Reason)
	m.emit(Event{Kind: kind, TP: r.tp, Reason: p.LogLine(), LeaderEpoch: p.Request.LeaderEpoch, ISR: p.To})
	// The span lasts until the controller answers: a trace shows how long
	// the ISR change took to commit, and how it ended.
	_, span := m.tracer.Start(context.Background(), "broker."+strings.ReplaceAll(kind, "-", "_"), trace.WithAttributes(
		attribute.String("tidemark.topic", r.tp.Topic), attribute.Int("tidemark.partition", int(r.tp.Partition)),
		attribute.String("tidemark.isr.before", partition.FormatIDs(p.From)), attribute.String("tidemark.isr.after", partition.FormatIDs(p.To)),
		attribute.Int("tidemark.leader_epoch", int(p.Request.LeaderEpoch)), attribute.String("tidemark.reason", p.LogLine()),
		attribute.String("tidemark.detail", p.Reason)))
	m.alter.enqueue(r, p.Request, span)
}

type alterItem struct {
	r    *Replica
	req  partition.AlterPartitionRequest
	span trace.Span
}

// alterSender sends queued ISR changes to the active controller, batched,
// and feeds each answer back to its partition's state machine (F10).
//
// It holds at most one change per partition, as Kafka's
// AlterPartitionManager does: the controller refuses a request naming a
// partition twice, and a partition has one proposal in flight at a time,
// so a newer one replaces the queued one, and a queued change its
// partition no longer waits for (new metadata replaced it) is dropped
// rather than sent.
type alterSender struct {
	m       *Manager
	mu      lockorder.Mutex[lockorder.Leaf]
	pending []alterItem
	// stopped: the sender has stopped, and a change queued now is never
	// sent.
	stopped bool
	kick    chan struct{}
	// failures is the run of failed sends, read and written by the
	// sender's goroutine only (send).
	failures alterFailures
}

// alterFailWarnEvery spaces the warnings of a run of failed AlterPartition
// sends: while no controller answers (an etcd outage, every controller
// down) the sender retries every alterBackoff, and a warning per attempt
// was five a second for as long as the outage lasted.
const alterFailWarnEvery = time.Minute

// alterFailures is a run of AlterPartition sends that failed or were
// refused as a whole: the first is a warning, later ones a warning at most
// once per alterFailWarnEvery with the count since, and the first send
// that gets through after them says so once.
type alterFailures struct {
	count           int
	since, lastWarn time.Time
}

// failed logs a failed send, or counts it until the next warning is due.
func (f *alterFailures) failed(m *Manager, msg string, attrs ...any) {
	now := m.now()
	if f.count == 0 {
		f.since = now
	}
	f.count++
	if f.count > 1 && now.Sub(f.lastWarn) < alterFailWarnEvery {
		return
	}
	if f.count > 1 {
		attrs = append(attrs, "failed_attempts", f.count, "failing_for", now.Sub(f.since).Round(time.Millisecond))
	}
	m.log.Warn(msg, attrs...)
	f.lastWarn = now
}

// dropped ends a run of failures whose changes are no longer wanted.
func (f *alterFailures) dropped(m *Manager) {
	if f.count == 0 {
		return
	}
	m.log.Info("AlterPartition no longer retried: new metadata replaced the ISR changes that waited", "failed_attempts", f.count,
		"failing_for", m.now().Sub(f.since).Round(time.Millisecond))
	*f = alterFailures{}
}

// delivered ends a run of failures.
func (f *alterFailures) delivered(m *Manager, controller int32) {
	if f.count == 0 {
		return
	}
	m.log.Info("AlterPartition delivered again", "controller", controller, "failed_attempts", f.count,
		"failing_for", m.now().Sub(f.since).Round(time.Millisecond))
	*f = alterFailures{}
}

func newAlterSender(m *Manager) *alterSender {
	return &alterSender{m: m, kick: make(chan struct{}, 1)}
}

func (s *alterSender) enqueue(r *Replica, req partition.AlterPartitionRequest, span trace.Span) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		failSpans([]alterItem{{r, req, span}}, senderStopped)
		return
	}
	var replaced []alterItem
	s.pending, replaced = withoutReplica(s.pending, r)
	s.pending = append(s.pending, alterItem{r, req, span})
	s.mu.Unlock()
	endSpans(replaced, "superseded", "a newer ISR change of the partition replaced it")
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// requeue puts failed items back ahead of the queue, except those whose
// partition queued a newer change meanwhile.
func (s *alterSender) requeue(retry []alterItem) {
	s.mu.Lock()
	var keep, dropped []alterItem
	for _, it := range retry {
		if slices.ContainsFunc(s.pending, func(q alterItem) bool { return q.r == it.r }) {
			dropped = append(dropped, it)
			continue
		}
		keep = append(keep, it)
	}
	s.pending = append(keep, s.pending...)
	s.mu.Unlock()
	endSpans(dropped, "superseded", "a newer ISR change of the partition replaced it")
}

// withoutReplica splits items into those of other replicas and r's.
func withoutReplica(items []alterItem, r *Replica) (rest, of []alterItem) {
	for _, it := range items {
		if it.r == r {
			of = append(of, it)
		} else {
			rest = append(rest, it)
		}
	}
	return rest, of
}

func endSpans(items []alterItem, outcome, reason string) {
	for _, it := range items {
		it.span.SetAttributes(attribute.String("tidemark.outcome", outcome), attribute.String("tidemark.outcome_reason", reason))
		it.span.End()
	}
}

// senderStopped is why a change the sender still held was never answered.
const senderStopped = "the broker stopped before the controller answered the ISR change"

// failSpans ends the spans of changes that will never be answered, with an
// error status saying why: a span never ended is never exported.
func failSpans(items []alterItem, reason string) {
	for _, it := range items {
		it.span.SetStatus(codes.Error, reason)
	}
	endSpans(items, "unsent", reason)
}

// end stops the sender: the changes still queued, and any queued later,
// end their spans unsent.
func (s *alterSender) end() {
	s.mu.Lock()
	left := s.pending
	s.pending, s.stopped = nil, true
	s.mu.Unlock()
	failSpans(left, senderStopped)
}

// stillWanted keeps the items their partitions still wait for: a proposal
// that new metadata replaced, or one parked until metadata arrives, is not
// sent again.
func stillWanted(items []alterItem) []alterItem {
	var keep, stale []alterItem
	for _, it := range items {
		it.r.mu.Lock()
		pr, parked, ok := it.r.state.Pending()
		it.r.mu.Unlock()
		if ok && !parked && pr.Request.Seq == it.req.Seq {
			keep = append(keep, it)
		} else {
			stale = append(stale, it)
		}
	}
	endSpans(stale, "abandoned", "the partition no longer waits for this change (new metadata)")
	return keep
}

func (s *alterSender) take() []alterItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.pending
	s.pending = nil
	return out
}

func (s *alterSender) run(stop <-chan struct{}) {
	defer s.end()
	for {
		select {
		case <-s.kick:
		case <-stop:
			return
		}
		for items := s.take(); len(items) > 0; items = s.take() {
			items = stillWanted(items)
			if len(items) == 0 {
				continue
			}
			retry := s.send(items, stop)
			if len(retry) > 0 {
				stopping := !s.m.sleep(context.Background(), alterBackoff)
				s.requeue(retry)
				if stopping {
					return
				}
			}
		}
		// Drained with failures unresolved: new metadata replaced the
		// changes that waited (a controller elected meanwhile decided
		// their partitions' ISR itself).
		s.failures.dropped(s.m)
	}
}

// send delivers one batch; it returns the items to retry.
func (s *alterSender) send(items []alterItem, stop <-chan struct{}) []alterItem {
	m := s.m
	succeeded := m.opts.Meta.NewerController()
	ctrl := m.opts.Meta.Controller()
	if ctrl == nil || ctrl.GetAddress() == "" {
		return items
	}
	req := &controlv1.AlterPartitionRequest{BrokerId: m.opts.BrokerID, BrokerEpoch: m.opts.BrokerEpoch()}
	for _, it := range items {
		p := &controlv1.AlterPartitionItem{Topic: it.r.tp.Topic, Partition: it.r.tp.Partition,
			LeaderEpoch: it.req.LeaderEpoch, PartitionEpoch: it.req.PartitionEpoch}
		for _, b := range it.req.NewISR {
			p.NewIsr = append(p.NewIsr, &controlv1.IsrMember{BrokerId: b.ID, BrokerEpoch: b.BrokerEpoch})
		}
		req.Partitions = append(req.Partitions, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), alterAttemptTimeout)
	defer cancel()
	// A controller that froze holds the call until the timeout. Once this
	// broker admits its successor's first request, the call is given up and
	// retried after the backoff, to the controller the metadata names then.
	// A stopping broker gives it up too, or its shutdown waits the timeout.
	go func() {
		select {
		case <-succeeded:
			cancel()
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := m.transport.AlterPartition(ctx, ctrl.GetAddress(), req)
	if err != nil {
		s.failures.failed(m, "AlterPartition failed; will retry", "controller", ctrl.GetId(), "err", kerr.FromStatus(err))
		return items
	}
	if code := kerr.Code(resp.GetErrorCode()); code != kerr.None {
		s.failures.failed(m, "AlterPartition refused; will retry", "controller", ctrl.GetId(), "code", code.String())
		return items
	}
	s.failures.delivered(m, ctrl.GetId())
	byTP := map[TP]*controlv1.AlterPartitionResult{}
	for _, res := range resp.GetPartitions() {
		byTP[TP{Topic: res.GetTopic(), Partition: res.GetPartition()}] = res
	}
	var retry []alterItem
	now := m.now()
	for _, it := range items {
		res, ok := byTP[it.r.tp]
		if !ok {
			retry = append(retry, it)
			continue
		}
		it.r.mu.Lock()
		out := it.r.state.HandleAlterPartition(it.req, partition.AlterPartitionResult{
			Error: kerr.Code(res.GetErrorCode()), LeaderEpoch: res.GetLeaderEpoch(),
			PartitionEpoch: res.GetPartitionEpoch(), ISR: res.GetIsr(),
		}, now)
		if out.HW.Advanced() {
			// The ISR change committed records (a shrink past a follower
			// that held the HW back): acks=all produces link to its span.
			it.r.markCommitLocked(out.HW.After, it.span.SpanContext())
		}
		// Counted once committed, as Kafka's IsrShrinksPerSec: a proposal
		// the controller refused or could not write changed no ISR. Counted
		// before the lock is let go, so whoever sees the new ISR sees it
		// counted.
		if out.Action == partition.AlterCommitted {
			switch out.Kind {
			case partition.ShrinkISR:
				m.metrics.isrShrinks.Inc()
			case partition.ExpandISR:
				m.metrics.isrExpands.Inc()
			}
		}
		it.r.mu.Unlock()
		if out.Action != partition.AlterCommitted && out.Action != partition.AlterIgnored {
			m.log.Info("ISR change not committed", "topic", it.r.tp.Topic, "partition", it.r.tp.Partition,
				"action", out.Action.String(), "reason", out.Reason)
		}
		if out.HW.Advanced() {
			if it.span.IsRecording() {
				it.span.AddEvent("high watermark advanced", trace.WithAttributes(
					attribute.Int64("hw.before", out.HW.Before), attribute.Int64("hw.after", out.HW.After)))
			}
			m.hwAdvanced(trace.ContextWithSpan(context.Background(), it.span), it.r, out.HW, "ISR change committed")
		}
		if out.Action == partition.AlterRetry && out.Resend != nil {
			retry = append(retry, alterItem{it.r, *out.Resend, it.span})
			continue
		}
		it.span.SetAttributes(attribute.String("tidemark.outcome", out.Action.String()), attribute.String("tidemark.outcome_reason", out.Reason),
			attribute.Int("tidemark.partition_epoch", int(res.GetPartitionEpoch())))
		it.span.End()
	}
	return retry
}
