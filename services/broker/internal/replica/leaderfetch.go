package replica

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/telemetry"
)

// FollowerFetch is one follower's batched fetch (F2).
type FollowerFetch struct {
	ReplicaID   int32
	BrokerEpoch int64
	MaxWait     time.Duration
	MinBytes    int
	MaxBytes    int
	Partitions  []FollowerFetchPartition
}

// FollowerFetchPartition is one partition of a follower fetch.
type FollowerFetchPartition struct {
	TP                 TP
	FetchOffset        int64
	CurrentLeaderEpoch int32
	LastFetchedEpoch   int32 // -1: none, no divergence check
	LogStartOffset     int64
	MaxBytes           int
}

// FollowerFetchAnswer is the leader's answer for one partition (F4).
type FollowerFetchAnswer struct {
	TP             TP
	Err            error
	HighWatermark  int64
	LeaderLEO      int64
	LogStartOffset int64
	Diverging      *partition.EpochEndOffset
	Records        []byte
	// HWBefore/HWAfter record what this fetch did to the leader's HW:
	// equal unless this fetch moved it.
	HWBefore, HWAfter int64
	ISR               []int32
	// Held: the leader's replication throttle kept the records back.
	Held bool
	// buf is the pooled buffer Records aliases (RecycleFetch).
	buf *[]byte
}

// ReplicaFetch serves a follower's batched fetch on the leader (F3, F8, F13,
// F18): epoch checks, divergence detection, the read, the follower's LEO and
// caught-up time, ISR expansion and the HW. With fewer than MinBytes ready
// it parks until an append or HW move on any of its partitions, or MaxWait.
func (m *Manager) ReplicaFetch(ctx context.Context, f FollowerFetch) []FollowerFetchAnswer {
	start := m.now()
	answers := make([]FollowerFetchAnswer, len(f.Partitions))
	defer func() {
		m.metrics.followerLat.Observe(m.now().Sub(start).Seconds())
		n := 0
		for _, a := range answers {
			n += len(a.Records)
		}
		m.metrics.followerOut.Add(float64(n))
	}()
	// A parked fetch may read several times, and the read that moved a HW
	// (if any) need not be the last: its move is kept for the answer. A
	// move made by others meanwhile is not this fetch's.
	type hwMove struct {
		HWBefore, HWAfter int64
		ISR               []int32 // at the move, for its trace
	}
	// A follower fetch names few partitions: their bookkeeping stays on
	// the stack (this runs for every fetch, several per acks=all write).
	var movedSpace [4]hwMove
	var moved []hwMove
	if len(f.Partitions) > len(movedSpace) {
		moved = make([]hwMove, len(f.Partitions))
	} else {
		moved = movedSpace[:len(f.Partitions)]
	}
	defer func() {
		for i := range answers {
			if mv := moved[i]; mv.HWAfter > mv.HWBefore {
				answers[i].HWBefore, answers[i].HWAfter = mv.HWBefore, mv.HWAfter
				answers[i].ISR = mv.ISR
			}
		}
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			traceHWMoves(span, f, answers)
		}
	}()
	// Watch before the first read, so an append between a read and parking
	// cannot be missed (it would cost a whole max wait). One deferred
	// function does all the clean-up: a defer inside a loop is allocated on
	// the heap, each time.
	w := newWaiter()
	var watchedSpace [4]*Replica
	watched := watchedSpace[:0]
	var parked Timer
	defer func() {
		if parked != nil {
			parked.Stop()
			m.metrics.parkedFetch.Add(-1)
		}
		for _, r := range watched {
			r.dataWaiters.remove(w)
		}
		releaseWaiter(w) // after the removals
	}()
	for _, p := range f.Partitions {
		if r, ok := m.Replica(p.TP); ok {
			r.dataWaiters.add(w)
			watched = append(watched, r)
		}
	}
	var deadline <-chan time.Time
	for pass := 0; ; pass++ {
		total, final, held := 0, false, false
		budget := f.MaxBytes
		if budget <= 0 {
			budget = 10 << 20
		}
		for i, p := range f.Partitions {
			// Only the first partition to bring records may go over the
			// budget with one whole batch (KIP-74), as Kafka's
			// readFromLog: later ones read whole batches that fit, or
			// none.
			a := m.readForFollower(ctx, f, p, budget-total, total > 0)
			answers[i].recycle() // an earlier pass's read, replaced
			answers[i] = a
			if a.HWAfter > a.HWBefore {
				moved[i] = hwMove{a.HWBefore, a.HWAfter, a.ISR}
			}
			total += len(a.Records)
			held = held || a.Held
			if a.Err != nil || a.Diverging != nil {
				// Errors and divergence go back at once: the follower must
				// act on them. A HW move alone does not end a parked follower
				// fetch (as in Kafka): the follower learns it with the next
				// records or at max wait, which saves a round trip per write.
				final = true
			}
		}
		if final || total >= max(f.MinBytes, 1) || f.MaxWait <= 0 {
			return answers
		}
		if deadline == nil {
			wait := f.MaxWait
			if held {
				// A throttled partition may be let through again soon:
				// park no longer than the follower's own throttle pause.
				wait = min(wait, throttleBackoff)
			}
			parked = m.clock.NewTimer(wait)
			deadline = parked.C()
			m.metrics.parkedFetch.Add(1)
		}
		select {
		case <-w.ch:
		case <-deadline:
			m.refreshHighWatermarks(f, answers)
			return answers
		case <-ctx.Done():
			return answers
		case <-m.stop:
			return answers
		}
	}
}

// refreshHighWatermarks gives the answers of a fetch that waited out its
// max wait the HW as it is now, as Kafka's DelayedFetch reads again when it
// completes. The HW read with the records is a max wait old, and on a quiet
// partition it is usually the one this very fetch moved (a fetch reads the
// HW before recording its offset) or another follower's fetch moved since:
// the follower learned it only at the next max wait, so its HW, a consumer
// reading from it and its HW as a new leader lagged by two. The log start
// is read again too: a DeleteRecords made meanwhile waits for the follower
// to report the new start, and learned only at its next fetch's max wait,
// it held that request a whole max wait longer.
func (m *Manager) refreshHighWatermarks(f FollowerFetch, answers []FollowerFetchAnswer) {
	for i, p := range f.Partitions {
		a := &answers[i]
		if a.Err != nil || a.Diverging != nil {
			continue
		}
		r, ok := m.Replica(p.TP)
		if !ok {
			continue
		}
		r.mu.Lock()
		if r.state.ValidateFetch(f.ReplicaID, p.CurrentLeaderEpoch) == nil {
			a.HighWatermark = max(a.HighWatermark, r.state.HighWatermark())
			// Never above the HW just read: only records below it are deleted.
			a.LogStartOffset = max(a.LogStartOffset, r.log.LogStartOffset())
		}
		r.mu.Unlock()
	}
}

// readForFollower reads p for follower fetch f within budget; fitOnly
// leaves out a first batch larger than what is left (none at all once it is
// spent).
func (m *Manager) readForFollower(ctx context.Context, f FollowerFetch, p FollowerFetchPartition, budget int, fitOnly bool) FollowerFetchAnswer {
	a := FollowerFetchAnswer{TP: p.TP}
	r, err := m.hosted(p.TP)
	if err != nil {
		a.Err = err
		return a
	}
	now := m.now()
	r.mu.Lock()
	if err := r.state.ValidateFetch(f.ReplicaID, p.CurrentLeaderEpoch); err != nil {
		r.mu.Unlock()
		a.Err = m.withLeaderHint(p.TP, err)
		return a
	}
	// The leader epoch the fetch was validated against: the state is checked
	// again before the fetch is recorded, since the lock is released for the
	// read and a leadership change meanwhile makes the fetch stale.
	validatedEpoch := r.state.LeaderEpoch()
	throttled, hold := m.leaderThrottleLocked(r, f.ReplicaID)
	// F8: the leader LEO is read before the log read.
	leaderLEO := r.log.LogEndOffset()
	a.LeaderLEO, a.LogStartOffset = leaderLEO, r.log.LogStartOffset()
	a.HWBefore = r.state.HighWatermark()
	a.HighWatermark, a.HWAfter = a.HWBefore, a.HWBefore
	if p.LastFetchedEpoch >= 0 {
		div, diverged, err := r.state.CheckDivergence(p.LastFetchedEpoch, p.FetchOffset, r.epochs())
		if err != nil {
			r.mu.Unlock()
			a.Err = err
			return a
		}
		if diverged {
			// F13: no records and no follower-state update; the follower
			// truncates and fetches again.
			r.mu.Unlock()
			diverging := div // its own copy: div stays on the stack
			a.Diverging = &diverging
			return a
		}
	}
	r.mu.Unlock()

	maxBytes := p.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	if budget < maxBytes {
		// The response budget is spent; KIP-74 still sends a first batch.
		maxBytes = max(budget, 1)
	}
	a.Held = hold
	if !hold && !(fitOnly && budget <= 0) {
		rr, buf, err := readPooled(r.log, p.FetchOffset, maxBytes, leaderLEO)
		a.buf = buf
		if err != nil {
			a.recycle()
			a.Err = err
			return a
		}
		a.Records = rr.Records
		if fitOnly && len(a.Records) > budget {
			// Its first batch alone is over what is left: the answer
			// would pass the budget by a batch per partition (past
			// gRPC's message limit every round failed, and the fetcher
			// stalled for good).
			a.recycle()
			a.Records = nil
		}
		if throttled {
			m.leaderQuota().Record(len(a.Records))
		}
	}

	r.mu.Lock()
	if err := r.state.ValidateFetch(f.ReplicaID, validatedEpoch); err != nil {
		r.mu.Unlock()
		a.recycle()
		a.Err = m.withLeaderHint(p.TP, err)
		return a
	}
	out, err := r.state.UpdateFollowerFetch(partition.FollowerFetch{
		ReplicaID: f.ReplicaID, BrokerEpoch: f.BrokerEpoch, FetchOffset: p.FetchOffset,
		LogStartOffset: p.LogStartOffset, LeaderLEO: leaderLEO,
	}, now)
	// The answer carries the HW as it was when the records were read, as
	// Kafka's does: a follower learns the HW its own fetch moved on its next
	// round trip. That lag is the window of KIP-101's scenarios.
	if out.HW.Advanced() {
		// For the traces of the move only: most fetches move nothing.
		a.ISR = r.state.MaximalISR()
		// Only this fetch's own move: the HW read above may have been moved
		// since by another follower's fetch.
		a.HWBefore, a.HWAfter = out.HW.Before, out.HW.After
		r.markCommitLocked(out.HW.After, trace.SpanContextFromContext(ctx))
	}
	yielding := r.yielded != nil
	r.mu.Unlock()
	if yielding {
		r.wakeHW() // a yield waits for the next leader's fetch offset (yield.go)
	}
	if out.LogStartMoved {
		r.lwWaiters.wakeAll() // DeleteRecords waits for the low watermark
	}
	if err != nil {
		a.Err = m.withLeaderHint(p.TP, err)
		a.recycle()
		return a
	}
	if out.HW.Advanced() {
		// This round trip committed records: record it on the fetch's span,
		// which is why it is kept and exported (the trace of a commit).
		// One event per partition moved: a fetch of several partitions
		// moves several HWs, and the span's attributes hold one value each.
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(attribute.Bool(telemetry.AttrHWAdvanced, true), attribute.Int("tidemark.follower_id", int(f.ReplicaID)))
			span.AddEvent("high watermark advanced", trace.WithAttributes(
				attribute.String("tidemark.topic", p.TP.Topic), attribute.Int("tidemark.partition", int(p.TP.Partition)),
				attribute.Int64("tidemark.fetch_offset", p.FetchOffset), attribute.Int64("tidemark.leader_leo", leaderLEO),
				attribute.Int64("hw.before", out.HW.Before), attribute.Int64("hw.after", out.HW.After),
				attribute.String("tidemark.isr", partition.FormatIDs(a.ISR))))
		}
		m.hwAdvanced(ctx, r, out.HW, "follower fetch")
	}
	if out.Proposal != nil {
		m.submitAlter(r, *out.Proposal)
	}
	return a
}

// traceHWMoves names on a fetch's span every partition whose HW the fetch
// moved, in tidemark.hw.advances ("topic-partition:before>after", as the
// follower's span lists them). A fetch that moved one partition's HW also
// carries that move as attributes of its own (tidemark.partition,
// tidemark.hw.before, ...), which a search by tag finds; with several
// partitions moved those would name only one of them, so the list and the
// per-partition events name them all, and tidemark.topic is kept only
// while every move is of one topic.
func traceHWMoves(span trace.Span, f FollowerFetch, answers []FollowerFetchAnswer) {
	var movedAt []int
	oneTopic := true
	for i, a := range answers {
		if a.HWAfter > a.HWBefore {
			oneTopic = oneTopic && (len(movedAt) == 0 || a.TP.Topic == answers[movedAt[0]].TP.Topic)
			movedAt = append(movedAt, i)
		}
	}
	if len(movedAt) == 0 {
		return
	}
	list := make([]string, 0, len(movedAt))
	for _, i := range movedAt {
		a := answers[i]
		list = append(list, hwAdvanceText(a.TP, a.HWBefore, a.HWAfter))
	}
	span.SetAttributes(attribute.String("tidemark.hw.advances", strings.Join(list, ",")),
		attribute.Int("tidemark.hw.partitions", len(movedAt)))
	if oneTopic {
		span.SetAttributes(attribute.String("tidemark.topic", answers[movedAt[0]].TP.Topic))
	}
	if len(movedAt) == 1 {
		i := movedAt[0]
		a := answers[i]
		span.SetAttributes(attribute.Int("tidemark.partition", int(a.TP.Partition)),
			attribute.Int64("tidemark.fetch_offset", f.Partitions[i].FetchOffset), attribute.Int64("tidemark.leader_leo", a.LeaderLEO),
			attribute.Int64("tidemark.hw.before", a.HWBefore), attribute.Int64("tidemark.hw.after", a.HWAfter),
			attribute.String("tidemark.isr", partition.FormatIDs(a.ISR)))
	}
}

// hwAdvanceText is one HW move as fetch spans list it.
func hwAdvanceText(tp TP, before, after int64) string {
	return tp.Topic + "-" + itoa(int64(tp.Partition)) + ":" + itoa(before) + ">" + itoa(after)
}

// isOutOfRange reports an OFFSET_OUT_OF_RANGE answer.
func isOutOfRange(err error) bool {
	var e *kerr.Error
	return errors.As(err, &e) && e.Code == kerr.OffsetOutOfRange
}
