package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client/assign"
	"tidemark.io/services/platform/kerr"
)

// GroupConsumer reads the partitions a consumer group assigns it, from the
// group's committed offsets, and commits its progress to the group's
// coordinator. A goroutine of its own keeps it in the group (join, sync,
// heartbeat, rejoin); the partitions it is given change hands only inside
// Poll and Close, where the rebalance callbacks run.
//
// Delivery is at least once: a position is committed (automatically every
// AutoCommitInterval at the start of a Poll, before partitions are revoked,
// and on Close; or by CommitSync/CommitAsync) only after the Poll that
// returned its records has been followed by another call, so a member that
// dies re-reads, through the next owner, only what came after its last
// commit.
type GroupConsumer struct {
	c         *Client
	opts      GroupOptions
	reset     ResetPolicy
	protocol  assign.RebalanceProtocol
	coord     *coordinator
	records   chan fetched  // from the partition fetchers
	wake      chan struct{} // one slot: a rebalance event is waiting
	fetchBase context.Context
	stopFetch context.CancelFunc
	loopStop  context.CancelFunc
	loopDone  chan struct{}
	// lastPoll is when Poll was last called (unix nanoseconds) and polled
	// (one slot) wakes a member that left on its poll timeout.
	lastPoll atomic.Int64
	polling  atomic.Bool // a Poll is running (it may wait longer than the interval)
	polled   chan struct{}

	pollMu sync.Mutex // serializes Poll and Close

	// commitSlot (one slot) is held by the commit being sent: one at a
	// time, so they reach the coordinator in order. A channel, not a
	// mutex, so that a caller waits for it only as long as its ctx allows.
	commitSlot    chan struct{}
	lastCommitted map[TopicPartition]commitMark // guarded by commitSlot
	// asyncBase bounds the commits sent on goroutines of their own
	// (CommitAsync, the auto-commit): Close, when its ctx ends or it
	// returns, and Abandon cancel it with ErrClosed as the cause.
	asyncBase context.Context
	stopAsync context.CancelCauseFunc
	// workers are the partition fetchers and the goroutines that send
	// commits: the consumer's own work. Each starts under mu while stopped
	// is false, so Close and Abandon, which set stopped before they wait,
	// never race an Add from zero.
	workers sync.WaitGroup
	// callbacks are the goroutines running CommitAsync's done: the
	// application's code. A sender starts its callbacks before it leaves
	// workers, and a refused commit's report starts under mu while
	// stopped is false. Close and Abandon wait for them but for the one
	// they are called from (a done may close its consumer), Close no
	// longer holding pollMu.
	callbacks callbackGoroutines

	mu             sync.Mutex // guards everything below; never held across a call or callback
	member         memberState
	parts          map[TopicPartition]*partState
	pending        []*rebalanceEvent
	fatal          error
	closed         bool // Poll refuses
	finished       bool // Close is over: commits refuse too
	stopped        bool // Close or Abandon waits for the workers: none starts
	lastAutoCommit time.Time
	// queued is the CommitAsync waiting for the commit slot (only while
	// the slot is held): whoever releases the slot sends it instead.
	queued *asyncCommit
}

// memberState is who the member is in which generation, as commits need it.
type memberState struct {
	id         string
	generation int32
}

// partState is one assigned partition: its fetcher and the position of the
// records handed to the user.
type partState struct {
	tp       TopicPartition
	stop     context.CancelFunc
	consumed int64 // the next offset after what Poll returned; -1 before it is known
	// epoch is the leader epoch of the record before consumed (-1 when not
	// known), committed with it: the last one returned, else the one
	// committed with the offset the partition started at.
	epoch int32
}

// fetched is what a partition fetcher hands to Poll.
type fetched struct {
	ps    *partState
	recs  []Record
	next  int64
	epoch int32 // of the record before next
	err   error
}

// rebalanceEvent is a change of assignment the membership goroutine asks
// Poll to carry out; done closes when it has.
type rebalanceEvent struct {
	revoke []TopicPartition // given up: committed, then OnPartitionsRevoked
	lost   []TopicPartition // no longer ours: OnPartitionsLost, no commit
	assign []TopicPartition // added: fetched from their committed offsets
	done   chan struct{}
}

// NewGroupConsumer joins the group in the background and returns at once;
// Poll returns records once partitions are assigned.
func NewGroupConsumer(c *Client, opts GroupOptions) (*GroupConsumer, error) {
	if c == nil {
		return nil, noClient()
	}
	opts, reset, err := opts.resolve(c)
	if err != nil {
		return nil, err
	}
	gc := &GroupConsumer{
		c: c, opts: opts, reset: reset, protocol: opts.rebalanceProtocol(),
		coord:         &coordinator{c: c, group: opts.GroupID},
		records:       make(chan fetched, 64),
		wake:          make(chan struct{}, 1),
		polled:        make(chan struct{}, 1),
		loopDone:      make(chan struct{}),
		commitSlot:    make(chan struct{}, 1),
		lastCommitted: map[TopicPartition]commitMark{},
		member:        memberState{generation: -1},
		parts:         map[TopicPartition]*partState{},
	}
	gc.lastPoll.Store(time.Now().UnixNano())
	gc.fetchBase, gc.stopFetch = context.WithCancel(context.Background())
	gc.asyncBase, gc.stopAsync = context.WithCancelCause(context.Background())
	var loopCtx context.Context
	loopCtx, gc.loopStop = context.WithCancel(context.Background())
	m := &membership{gc: gc, generation: -1}
	go func() {
		defer close(gc.loopDone)
		m.run(loopCtx)
	}()
	return gc, nil
}

// pollExpired reports whether the user has gone longer than
// max.poll.interval.ms without calling Poll.
func (gc *GroupConsumer) pollExpired() bool {
	return !gc.polling.Load() && time.Since(time.Unix(0, gc.lastPoll.Load())) > gc.opts.RebalanceTimeout
}

// GroupID is the group's id.
func (gc *GroupConsumer) GroupID() string { return gc.opts.GroupID }

// MemberID is the id the coordinator gave this member ("" before it joined)
// and Generation the generation it last synced (-1 before).
func (gc *GroupConsumer) MemberID() string {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.member.id
}

func (gc *GroupConsumer) Generation() int32 {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.member.generation
}

// Assignment lists the partitions Poll reads now, sorted.
func (gc *GroupConsumer) Assignment() []TopicPartition {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return sortedTPs(slices.Collect(maps.Keys(gc.parts)))
}

// Positions are the offsets the next commit of all positions would write:
// for each assigned partition whose position is known, the offset after
// the last record Poll returned.
func (gc *GroupConsumer) Positions() map[TopicPartition]int64 {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.positionsLocked(nil)
}

func (gc *GroupConsumer) positionsLocked(only []TopicPartition) map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	for tp, ps := range gc.parts {
		if ps.consumed >= 0 && (only == nil || slices.Contains(only, tp)) {
			out[tp] = ps.consumed
		}
	}
	return out
}

// Poll returns the records fetched since the last call from the assigned
// partitions, waiting up to MaxWait for some; none is not an error. It
// first carries out any waiting rebalance (running the callbacks) and the
// auto-commit when one is due. A fatal error (FENCED_INSTANCE_ID, an
// unusable configuration, a partition with no committed offset under
// auto.offset.reset=none) is returned by every later call. Poll must not
// be called from several goroutines at once.
func (gc *GroupConsumer) Poll(ctx context.Context) ([]Record, error) {
	gc.pollMu.Lock()
	defer gc.pollMu.Unlock()
	if gc.isClosed() {
		return nil, fmt.Errorf("group %s: %w", gc.opts.GroupID, ErrClosed)
	}
	gc.polling.Store(true)
	defer func() {
		gc.lastPoll.Store(time.Now().UnixNano())
		gc.polling.Store(false)
	}()
	select {
	case gc.polled <- struct{}{}:
	default:
	}
	// Waiting events first: a fatal error comes with its partitions lost.
	gc.runEvents(ctx)
	if err := gc.failed(ctx); err != nil {
		return nil, err
	}
	gc.maybeAutoCommit()
	wait := time.NewTimer(gc.opts.MaxWait)
	defer wait.Stop()
	var out []Record
	for {
		select {
		case f := <-gc.records:
			if err := gc.take(f, &out); err != nil {
				return out, err
			}
			if len(out) == 0 {
				continue
			}
			for more := true; more; { // whatever else is ready, without waiting
				select {
				case f := <-gc.records:
					if err := gc.take(f, &out); err != nil {
						return out, err
					}
				default:
					more = false
				}
			}
			return out, nil
		case <-gc.wake:
			gc.runEvents(ctx)
			if err := gc.failed(ctx); err != nil {
				return out, err
			}
		case <-gc.loopDone:
			gc.runEvents(ctx)
			if err := gc.failed(ctx); err != nil {
				return nil, err
			}
			return out, nil
		case <-wait.C:
			return out, nil
		case <-ctx.Done():
			return out, ctxError(ctx, nil, "poll group %s", gc.opts.GroupID)
		}
	}
}

func (gc *GroupConsumer) isClosed() bool {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.closed
}

// usable is the error every call returns after Close or a fatal error.
func (gc *GroupConsumer) usable() error {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.closed {
		return fmt.Errorf("group %s: %w", gc.opts.GroupID, ErrClosed)
	}
	return gc.fatal
}

// take adds a fetcher's records to out when the partition is still
// assigned to the fetcher that read them, and moves its position.
func (gc *GroupConsumer) take(f fetched, out *[]Record) error {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.parts[f.ps.tp] != f.ps {
		return nil // revoked since it was fetched
	}
	if f.err != nil {
		gc.fatal = f.err
		return f.err // the next Poll declares the partitions lost
	}
	*out = append(*out, f.recs...)
	f.ps.consumed, f.ps.epoch = f.next, f.epoch
	return nil
}

// post queues a rebalance event for Poll and returns it.
func (gc *GroupConsumer) post(ev *rebalanceEvent) *rebalanceEvent {
	ev.done = make(chan struct{})
	gc.mu.Lock()
	gc.pending = append(gc.pending, ev)
	gc.mu.Unlock()
	select {
	case gc.wake <- struct{}{}:
	default:
	}
	return ev
}

// runEvents carries out the waiting rebalance events, in order.
func (gc *GroupConsumer) runEvents(ctx context.Context) {
	for {
		gc.mu.Lock()
		if len(gc.pending) == 0 {
			gc.mu.Unlock()
			return
		}
		ev := gc.pending[0]
		gc.pending = gc.pending[1:]
		gc.mu.Unlock()
		gc.runEvent(ctx, ev)
		close(ev.done)
	}
}

func (gc *GroupConsumer) runEvent(ctx context.Context, ev *rebalanceEvent) {
	if len(ev.revoke) > 0 {
		if !gc.opts.DisableAutoCommit {
			gc.mu.Lock()
			offs := gc.positionsLocked(ev.revoke)
			gc.mu.Unlock()
			if err := gc.commit(ctx, offs, false); err != nil {
				gc.c.log.Warn("commit before revoking failed", "group", gc.opts.GroupID, "err", err)
			}
		}
		// The callback still sees the positions (it may commit them).
		if gc.opts.OnPartitionsRevoked != nil {
			gc.opts.OnPartitionsRevoked(ctx, ev.revoke)
		}
		gc.drop(ev.revoke)
	}
	if len(ev.lost) > 0 {
		gc.lose(ctx, ev.lost)
	}
	if len(ev.assign) > 0 {
		gc.mu.Lock()
		for _, tp := range ev.assign {
			if old := gc.parts[tp]; old != nil {
				old.stop()
			}
			fctx, stop := context.WithCancel(gc.fetchBase)
			ps := &partState{tp: tp, stop: stop, consumed: -1, epoch: -1}
			gc.parts[tp] = ps
			if !gc.stopped { // else Abandon runs alongside Poll: nothing reads it
				gc.workers.Go(func() { gc.fetch(fctx, ps) })
			}
		}
		gc.mu.Unlock()
		if gc.opts.OnPartitionsAssigned != nil {
			gc.opts.OnPartitionsAssigned(ctx, ev.assign)
		}
	}
}

// lose drops those of tps still assigned and tells OnPartitionsLost.
func (gc *GroupConsumer) lose(ctx context.Context, tps []TopicPartition) {
	gc.mu.Lock()
	var held []TopicPartition
	for _, tp := range tps {
		if gc.parts[tp] != nil {
			held = append(held, tp)
		}
	}
	gc.mu.Unlock()
	if len(held) == 0 {
		return
	}
	gc.drop(held)
	if gc.opts.OnPartitionsLost != nil {
		gc.opts.OnPartitionsLost(ctx, held)
	}
}

// failed returns the fatal error, if any, after the partitions still held
// are declared lost: whoever learns of it first (a commit, a heartbeat)
// the user hears of the loss before the error.
func (gc *GroupConsumer) failed(ctx context.Context) error {
	err := gc.usable()
	gc.mu.Lock()
	fatal := gc.fatal
	gc.mu.Unlock()
	if fatal != nil {
		gc.lose(ctx, gc.Assignment())
	}
	return err
}

// drop stops fetching tps and forgets their positions.
func (gc *GroupConsumer) drop(tps []TopicPartition) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for _, tp := range tps {
		if ps := gc.parts[tp]; ps != nil {
			ps.stop()
			delete(gc.parts, tp)
		}
	}
}

// fetch is one assigned partition's fetcher: it starts at the group's
// committed offset, with the leader epoch committed with it (or
// auto.offset.reset), and hands each fetch to Poll.
func (gc *GroupConsumer) fetch(ctx context.Context, ps *partState) {
	send := func(f fetched) bool {
		select {
		case gc.records <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	start, err := gc.startOffset(ctx, ps.tp)
	gc.c.log.Debug("fetcher starts", "topic", ps.tp.Topic, "partition", ps.tp.Partition, "offset", start.offset, "epoch", start.epoch, "err", err)
	if err != nil {
		if ctx.Err() == nil {
			send(fetched{ps: ps, err: err})
		}
		return
	}
	cs, err := NewConsumer(gc.c, ConsumerOptions{
		Topic: ps.tp.Topic, Partition: ps.tp.Partition, StartOffset: start.offset, StartLeaderEpoch: &start.epoch, Reset: gc.reset,
		MaxBytes: gc.opts.MaxBytes, MaxWait: gc.opts.MaxWait, MinBytes: gc.opts.MinBytes,
		Rack: gc.opts.Rack, RequestTimeout: gc.opts.RequestTimeout,
	})
	if err != nil {
		send(fetched{ps: ps, err: err})
		return
	}
	defer cs.Close()
	reported := int64(-1) // the position last sent
	for attempt := 1; ctx.Err() == nil; {
		recs, err := cs.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if kerr.CodeOf(err) == kerr.OffsetOutOfRange {
				send(fetched{ps: ps, err: err}) // auto.offset.reset=none
				return
			}
			gc.c.log.Debug("group fetch failed; retrying", "topic", ps.tp.Topic, "partition", ps.tp.Partition, "err", err)
			sleep(ctx, backoff(gc.c.opts.RetryBackoff, gc.c.opts.RetryBackoffMax, attempt))
			attempt++
			continue
		}
		attempt = 1
		if pos, epoch := cs.positionAndEpoch(); len(recs) > 0 || (pos >= 0 && pos != reported) {
			// A position that moved without records is reported too, so
			// that it is committed: the first one resolved (a reset to
			// latest), and one reset later on an idle partition (retention
			// emptied it, or a truncation moved it back). Uncommitted, the
			// partition's next owner started at the stale offset.
			reported = pos
			if !send(fetched{ps: ps, recs: recs, next: pos, epoch: epoch}) {
				return
			}
		}
	}
}

// committedOffset is a group's commit of one partition: the next offset
// to read and the leader epoch of the record before it (-1 when unknown).
type committedOffset struct {
	offset int64
	epoch  int32
}

// startOffset is where a newly assigned partition starts: the group's
// committed offset, with its leader epoch (KIP-320: a log truncated under
// it since is found by the first fetch, which would otherwise read on at
// that offset in the new log, skipping the records written there), else
// what auto.offset.reset says.
func (gc *GroupConsumer) startOffset(ctx context.Context, tp TopicPartition) (committedOffset, error) {
	for {
		got, err := gc.committedWithEpochs(ctx, []TopicPartition{tp}, true)
		if err == nil {
			if c, ok := got[tp]; ok {
				return c, nil
			}
			switch gc.reset {
			case ResetEarliest:
				return committedOffset{OffsetEarliest, -1}, nil
			case ResetLatest:
				return committedOffset{OffsetLatest, -1}, nil
			}
			return committedOffset{}, kerr.New(kerr.OffsetOutOfRange, "group %s has no committed offset for %s-%d and auto.offset.reset is none", gc.opts.GroupID, tp.Topic, tp.Partition)
		}
		if ctx.Err() != nil || !kerr.CodeOf(err).Retriable() {
			return committedOffset{}, err
		}
		// The API timeout passed (the coordinator is moving): keep trying
		// while the partition is ours.
		gc.c.log.Debug("fetching the committed offset failed; retrying", "group", gc.opts.GroupID, "err", err)
	}
}

// Committed returns the group's committed offsets for tps (all the group
// has when tps is empty); a partition without one is absent.
func (gc *GroupConsumer) Committed(ctx context.Context, tps ...TopicPartition) (map[TopicPartition]int64, error) {
	return gc.committed(ctx, tps, true)
}

func (gc *GroupConsumer) committed(ctx context.Context, tps []TopicPartition, stable bool) (map[TopicPartition]int64, error) {
	got, err := gc.committedWithEpochs(ctx, tps, stable)
	out := make(map[TopicPartition]int64, len(got))
	for tp, c := range got {
		out[tp] = c.offset
	}
	return out, err
}

func (gc *GroupConsumer) committedWithEpochs(ctx context.Context, tps []TopicPartition, stable bool) (map[TopicPartition]committedOffset, error) {
	req := &groupv1.OffsetFetchRequest{GroupId: gc.opts.GroupID, RequireStable: stable}
	for _, t := range groupTPs(tps) {
		req.Topics = append(req.Topics, &groupv1.OffsetFetchTopic{Name: t.Topic, Partitions: t.Partitions})
	}
	out := map[TopicPartition]committedOffset{}
	err := gc.coord.call(ctx, "offset fetch", gc.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		resp, err := gs.OffsetFetch(ctx, req)
		if err != nil {
			return err
		}
		clear(out)
		for _, t := range resp.GetTopics() {
			for _, p := range t.GetPartitions() {
				if code := kerr.Code(p.GetErrorCode()); code != kerr.None {
					return kerr.New(code, "offset of %s-%d", t.GetName(), p.GetPartition())
				}
				if p.GetCommittedOffset() >= 0 {
					out[TopicPartition{t.GetName(), p.GetPartition()}] = committedOffset{p.GetCommittedOffset(), p.GetCommittedLeaderEpoch()}
				}
			}
		}
		return nil
	})
	return out, err
}

// CommitSync commits offsets (the next offset to read, per partition; nil
// commits every known position) and returns once the coordinator has
// written them with acks=all. A member whose generation is over gets
// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or REBALANCE_IN_PROGRESS and
// should let the rebalance finish (keep polling) before committing again.
// A negative offset or partition, or no topic, is INVALID_REQUEST, and
// nothing is sent.
func (gc *GroupConsumer) CommitSync(ctx context.Context, offsets map[TopicPartition]int64) error {
	gc.mu.Lock()
	err := gc.commitRefusedLocked()
	gc.mu.Unlock()
	if err != nil {
		return err
	}
	if offsets == nil {
		offsets = gc.Positions()
	} else if err := checkCommitOffsets(offsets); err != nil {
		return err
	}
	return gc.commit(ctx, offsets, false)
}

// checkCommitOffsets refuses offsets no commit may hold. A consumer reads
// a committed offset below 0 as no commit at all, so a negative one sent
// on would erase the group's position.
func checkCommitOffsets(offsets map[TopicPartition]int64) error {
	for _, tp := range sortedTPs(slices.Collect(maps.Keys(offsets))) {
		field := fmt.Sprintf("offsets[%s-%d]", tp.Topic, tp.Partition)
		switch off := offsets[tp]; {
		case tp.Topic == "":
			return kerr.BadField(kerr.InvalidRequest, field, "names no topic")
		case tp.Partition < 0:
			return kerr.BadField(kerr.InvalidRequest, field, "partition must not be negative")
		case off < 0:
			return kerr.BadField(kerr.InvalidRequest, field, "offset must not be negative, got %d", off)
		}
	}
	return nil
}

// CommitAsync commits offsets as CommitSync does, on a goroutine of its
// own, and calls done (when not nil, on another goroutine) with the
// outcome. It never waits: one made while a commit is in flight is queued,
// and later ones fold into the queued one (the newest offset of each
// partition wins, which is what sending them in turn would leave), so
// commits reach the coordinator in the order they were made and the queue
// never grows; each done hears the outcome of the commit that carried its
// offsets. After Close done gets ErrClosed (after a fatal error, that
// error) and nothing is sent; one still in flight when Close ends gets
// ErrClosed too. Close and Abandon return only once the done callbacks of
// the commits made before them have (a done may call them: they do not
// wait for the callback they are called from).
func (gc *GroupConsumer) CommitAsync(offsets map[TopicPartition]int64, done func(map[TopicPartition]int64, error)) {
	if offsets == nil {
		offsets = gc.Positions()
	}
	offsets = maps.Clone(offsets)
	var dones []func(error)
	if done != nil {
		dones = []func(error){func(err error) { done(offsets, err) }}
	}
	check := checkCommitOffsets(offsets)
	gc.mu.Lock()
	defer gc.mu.Unlock()
	err := gc.commitRefusedLocked()
	if err == nil {
		err = check
	}
	switch {
	case err != nil && done == nil:
	case err != nil && gc.stopped:
		go done(offsets, err) // made after Close or Abandon: nothing waits for it
	case err != nil:
		gc.callbacks.start(func() { done(offsets, err) })
	case gc.queued != nil:
		maps.Copy(gc.queued.offsets, offsets)
		gc.queued.dones = append(gc.queued.dones, dones...)
	case gc.tryLockCommits():
		gc.sendLocked(&asyncCommit{offsets: maps.Clone(offsets), dones: dones})
	default:
		gc.queued = &asyncCommit{offsets: maps.Clone(offsets), dones: dones}
	}
}

// commitRefusedLocked is why a commit may not start: Close is over, or a
// fatal error.
func (gc *GroupConsumer) commitRefusedLocked() error {
	if gc.finished {
		return fmt.Errorf("group %s: %w", gc.opts.GroupID, ErrClosed)
	}
	return gc.fatal
}

// asyncCommit is one OffsetCommit sent on a goroutine of its own: the
// offsets of one or more CommitAsync calls, or of one auto-commit, and
// the CommitAsync callbacks to tell the outcome.
type asyncCommit struct {
	offsets map[TopicPartition]int64
	auto    bool
	dones   []func(error)
}

// sendLocked sends c on a goroutine of its own (a worker), under
// asyncBase, and passes on the commit slot the caller holds when it is
// done. It reports false, starting nothing, once the workers are being
// waited for: the caller sends c itself (asyncBase has ended, so at once).
func (gc *GroupConsumer) sendLocked(c *asyncCommit) bool {
	if gc.stopped {
		return false
	}
	gc.workers.Go(func() {
		err := gc.commitAsync(c)
		if len(c.dones) > 0 {
			// The application's code, on a goroutine counted apart,
			// started before this worker ends.
			gc.callbacks.start(func() {
				for _, done := range c.dones {
					done(err)
				}
			})
		}
	})
	return true
}

// sendAsync sends c on the caller's goroutine and tells its callbacks.
func (gc *GroupConsumer) sendAsync(c *asyncCommit) {
	err := gc.commitAsync(c)
	for _, done := range c.dones {
		done(err)
	}
}

// commitAsync sends c's commit and passes on the commit slot.
func (gc *GroupConsumer) commitAsync(c *asyncCommit) error {
	err := gc.commitLocked(gc.asyncBase, c.offsets, c.auto)
	if err != nil && c.auto {
		gc.c.log.Debug("auto-commit failed", "group", gc.opts.GroupID, "err", err)
	}
	gc.unlockCommits()
	return err
}

// maybeAutoCommit starts the auto-commit of every position when one is
// due. One still in flight (a stalled coordinator holds it up to the API
// timeout) is not waited for: Poll would stall past its ctx while the
// leaders' records wait. The commit stays due, and the next Poll's carries
// the newer positions.
func (gc *GroupConsumer) maybeAutoCommit() {
	if gc.opts.DisableAutoCommit {
		return
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.stopped || time.Since(gc.lastAutoCommit) < gc.opts.AutoCommitInterval {
		return
	}
	if offs := gc.positionsLocked(nil); len(offs) > 0 {
		if !gc.tryLockCommits() {
			return
		}
		gc.sendLocked(&asyncCommit{offsets: offs, auto: true})
	}
	gc.lastAutoCommit = time.Now()
}

func (gc *GroupConsumer) commit(ctx context.Context, offsets map[TopicPartition]int64, auto bool) error {
	if err := gc.lockCommits(ctx); err != nil {
		return err
	}
	defer gc.unlockCommits()
	return gc.commitLocked(ctx, offsets, auto)
}

// lockCommits takes the commit slot, waiting for the commit in flight at
// most until ctx ends.
func (gc *GroupConsumer) lockCommits(ctx context.Context) error {
	if gc.tryLockCommits() { // a free slot is taken even when ctx has ended (select picks at random)
		return nil
	}
	select {
	case gc.commitSlot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctxError(ctx, nil, "offset commit (group %s): the one before is still in flight", gc.opts.GroupID)
	}
}

func (gc *GroupConsumer) tryLockCommits() bool {
	select {
	case gc.commitSlot <- struct{}{}:
		return true
	default:
		return false
	}
}

// unlockCommits hands the commit slot to the queued CommitAsync, if any,
// else frees it.
func (gc *GroupConsumer) unlockCommits() {
	gc.mu.Lock()
	next := gc.queued
	gc.queued = nil
	if next == nil {
		<-gc.commitSlot
	}
	sent := next == nil || gc.sendLocked(next)
	gc.mu.Unlock()
	if !sent {
		gc.sendAsync(next)
	}
}

// commitMark is the last offset this consumer committed for a partition,
// during which assignment of it (ps).
type commitMark struct {
	off int64
	ps  *partState
}

// commitLocked sends one OffsetCommit (retried on coordinator moves). An
// auto-commit leaves out partitions whose position is the one this
// consumer committed last during the same assignment. Kafka's consumer
// commits every position at each interval; an idle partition's commit is
// left out here, but a position that moved backwards (a seek back) is
// committed, and so is every partition's first position after it is
// assigned: the group's commit may have moved meanwhile (an admin reset
// while the group was empty), and before, a position below this consumer's
// own last commit was left out until it passed it.
func (gc *GroupConsumer) commitLocked(ctx context.Context, offsets map[TopicPartition]int64, auto bool) error {
	gc.mu.Lock()
	m := gc.member
	epochs := map[TopicPartition]int32{}
	assigned := make(map[TopicPartition]*partState, len(offsets))
	for tp := range offsets {
		ps := gc.parts[tp]
		assigned[tp] = ps
		if ps != nil && ps.consumed == offsets[tp] {
			epochs[tp] = ps.epoch
		}
	}
	gc.mu.Unlock()
	if auto {
		offsets = maps.Clone(offsets)
		maps.DeleteFunc(offsets, func(tp TopicPartition, off int64) bool {
			last, ok := gc.lastCommitted[tp]
			return ok && off == last.off && last.ps == assigned[tp]
		})
	}
	if len(offsets) == 0 {
		return nil
	}
	req := &groupv1.OffsetCommitRequest{
		GroupId: gc.opts.GroupID, GenerationId: m.generation, MemberId: m.id, GroupInstanceId: gc.opts.InstanceID,
	}
	for _, t := range groupTPs(slices.Collect(maps.Keys(offsets))) {
		ct := &groupv1.OffsetCommitTopic{Name: t.Topic}
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p}
			epoch, ok := epochs[tp]
			if !ok {
				epoch = -1
			}
			ct.Partitions = append(ct.Partitions, &groupv1.OffsetCommitPartition{Partition: p, CommittedOffset: offsets[tp], CommittedLeaderEpoch: epoch})
		}
		req.Topics = append(req.Topics, ct)
	}
	err := gc.coord.call(ctx, "offset commit", gc.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
		resp, err := gs.OffsetCommit(ctx, req)
		if err != nil {
			return err
		}
		for _, t := range resp.GetTopics() {
			for _, p := range t.GetPartitions() {
				if code := kerr.Code(p.GetErrorCode()); code != kerr.None {
					return kerr.New(code, "commit of %s-%d", t.GetName(), p.GetPartition())
				}
			}
		}
		return nil
	})
	if err != nil {
		if kerr.CodeOf(err) == kerr.FencedInstanceID {
			gc.setFatal(err)
		}
		return err
	}
	for tp, off := range offsets {
		gc.lastCommitted[tp] = commitMark{off: off, ps: assigned[tp]}
	}
	return nil
}

func (gc *GroupConsumer) setFatal(err error) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.fatal == nil {
		gc.fatal = err
	}
}

// Close leaves the group cleanly: it stops the membership goroutine,
// commits every position (with auto-commit), calls OnPartitionsRevoked,
// waits for the commits still in flight (CommitAsync's, the auto-commit),
// and sends LeaveGroup so the group rebalances at once (a static member
// does not leave: its instance id keeps its place until the session
// timeout). All of it within ctx (the API timeout when ctx has no
// deadline): a commit still in flight when ctx ends or Close returns is
// abandoned, its callback told ErrClosed, and every commit asked for after
// Close is refused with ErrClosed. It returns once every goroutine the
// consumer started has ended (see stopWorkers). It does not close the
// Client.
func (gc *GroupConsumer) Close(ctx context.Context) error {
	gc.pollMu.Lock()
	gc.mu.Lock()
	if gc.closed {
		gc.mu.Unlock()
		gc.pollMu.Unlock()
		return nil
	}
	gc.closed = true
	gc.mu.Unlock()
	ctx, cancel := gc.c.opts.withAPITimeout(ctx)
	defer cancel()
	closed := fmt.Errorf("group %s: %w", gc.opts.GroupID, ErrClosed)
	// The commits in flight end with ctx. The watch's goroutine, once
	// started, is waited for like the others.
	watchDone := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() {
		defer close(watchDone)
		gc.stopAsync(closed)
	})
	err := gc.leave(ctx)
	if !stopWatch() {
		<-watchDone
	}
	// Poll is refused from here on; a CommitAsync callback waited for
	// below may call Close (it returns at once) or Poll.
	gc.pollMu.Unlock()
	gc.stopWorkers(closed)
	gc.callbacks.waitOthers()
	return err
}

// leave is Close's work within ctx: the last events, commit and
// revocation, the commits in flight and LeaveGroup.
func (gc *GroupConsumer) leave(ctx context.Context) error {
	gc.loopStop()
	<-gc.loopDone
	gc.runEvents(ctx)
	owned := gc.Assignment()
	var errs []error
	gc.mu.Lock()
	m, fatal := gc.member, gc.fatal
	gc.mu.Unlock()
	if len(owned) > 0 && fatal == nil && m.generation >= 0 {
		if !gc.opts.DisableAutoCommit {
			errs = append(errs, gc.commit(ctx, gc.Positions(), false))
		}
		if gc.opts.OnPartitionsRevoked != nil {
			gc.opts.OnPartitionsRevoked(ctx, owned)
		}
		gc.drop(owned)
	}
	if fatal != nil {
		gc.lose(ctx, gc.Assignment())
	}
	gc.stopFetch()
	gc.mu.Lock()
	gc.finished = true
	gc.mu.Unlock()
	gc.awaitCommits(ctx)
	if m.id != "" && gc.opts.InstanceID == "" && fatal == nil {
		err := gc.coord.call(ctx, "leave group", gc.opts.RequestTimeout, func(ctx context.Context, gs groupv1.GroupServiceClient) error {
			_, err := gs.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: gc.opts.GroupID,
				Members: []*groupv1.MemberIdentity{{MemberId: m.id, Reason: "the consumer is closing"}}})
			return err
		})
		if c := kerr.CodeOf(err); c != kerr.UnknownMemberID {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// awaitCommits waits, while ctx lasts, for the commits in flight to end:
// sent after them, LeaveGroup would have them refused.
func (gc *GroupConsumer) awaitCommits(ctx context.Context) {
	if gc.lockCommits(ctx) == nil {
		gc.unlockCommits()
	}
}

// Abandon stops the consumer at once, as if its process had died: no
// commit, no callback, no LeaveGroup (commits in flight are abandoned,
// their CommitAsync callbacks told ErrClosed). The coordinator removes the
// member when its session times out; until then its partitions stay with
// it. It returns once every goroutine the consumer started has ended,
// but for the CommitAsync callback it is called from, if any.
func (gc *GroupConsumer) Abandon() {
	gc.mu.Lock()
	gc.closed, gc.finished = true, true
	gc.mu.Unlock()
	gc.stopWorkers(fmt.Errorf("group %s: %w", gc.opts.GroupID, ErrClosed))
	gc.callbacks.waitOthers()
}

// stopWorkers ends the membership goroutine, the fetchers and the commits
// in flight, and waits for them (the CommitAsync callbacks apart). Once
// canceled, none waits for a broker (a canceled call returns at once), so
// a stalled coordinator or leader holds nothing up.
func (gc *GroupConsumer) stopWorkers(cause error) {
	gc.stopAsync(cause)
	gc.loopStop()
	gc.stopFetch()
	gc.mu.Lock()
	gc.stopped = true
	gc.mu.Unlock()
	<-gc.loopDone
	gc.workers.Wait()
}

// groupTPs groups partitions by topic, sorted.
func groupTPs(tps []TopicPartition) []assign.TopicPartitions {
	var out []assign.TopicPartitions
	for _, tp := range sortedTPs(tps) {
		if n := len(out); n > 0 && out[n-1].Topic == tp.Topic {
			out[n-1].Partitions = append(out[n-1].Partitions, tp.Partition)
			continue
		}
		out = append(out, assign.TopicPartitions{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
	}
	return out
}

func sortedTPs(tps []TopicPartition) []TopicPartition {
	tps = slices.Clone(tps)
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return slices.Compact(tps)
}
