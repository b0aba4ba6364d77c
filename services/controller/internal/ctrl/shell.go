package ctrl

import (
	"context"
	"errors"
	"math"
	"time"

	"google.golang.org/grpc"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/sender"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// The shell: the loop's side of the core (core.go). It turns what reaches
// the loop into core events, executes the core's effects in order (etcd
// writes, sender queues, metrics, the event ring, answers, step-down) and
// feeds each write's outcome back. Everything here runs on the loop.

// link is a live broker incarnation's connection and sender.
type link struct {
	epoch int64
	conn  *grpc.ClientConn
	out   *sender.Sender
}

// step hands one event to the core and executes its effects.
func (a *Active) step(ev event) map[int32]<-chan error {
	a.tracked = map[int32][]<-chan error{}
	a.core.handle(ev)
	return a.flush()
}

// flush executes the core's pending effects in order, and those that follow
// from them (a write's continuation), until there are none. It returns the
// outcome channels of the requests pushed, by broker (the last one for a
// broker pushed twice). Effects that run shell code may flush again; each
// flush takes its batch first, so order holds.
func (a *Active) flush() map[int32]<-chan error {
	acks := map[int32]<-chan error{}
	for {
		batch := a.core.take()
		if len(batch) == 0 {
			return acks
		}
		for _, e := range batch {
			switch e := e.(type) {
			case effWriteStates:
				a.writeStates(e)
			case effWriteAssignment:
				ctx, cancel := a.writeCtx()
				res, err := a.sess.UpdateAssignment(ctx, e.update)
				cancel()
				a.core.handle(evAssignmentResult{res: res, err: err, resigning: err != nil && a.ctx.Err() != nil})
			case effReadTopic:
				ctx, cancel := a.writeCtx()
				t, err := a.d.Store.Topic(ctx, e.name)
				cancel()
				a.core.handle(evTopicRead{topic: t, err: err})
			case effPush:
				acks[e.to] = a.enqueue(e.to, e.req)
				if e.track && a.tracked != nil {
					a.tracked[e.to] = append(a.tracked[e.to], acks[e.to])
				}
				if e.group != 0 {
					a.groups[e.group] = append(a.groups[e.group], acks[e.to])
				}
			case effAwaitAcks:
				a.awaitAcks(e)
			case effTopicGone:
				close(e.t.done)
			case effMarkDeletion:
				ctx, cancel := a.writeCtx()
				err := a.sess.MarkTopicForDeletion(ctx, e.topic)
				cancel()
				a.core.handle(evMetaWriteResult{err: err, resigning: err != nil && a.ctx.Err() != nil})
			case effCreateTopic:
				ctx, cancel := a.writeCtx()
				t, err := a.sess.CreateTopic(ctx, e.topic)
				cancel()
				a.core.handle(evCreateTopicResult{topic: t, err: err, resigning: err != nil && a.ctx.Err() != nil})
			case effPutConfig:
				ctx, cancel := a.writeCtx()
				var err error
				if e.topic != "" {
					err = a.sess.PutTopicConfig(ctx, e.topic, e.cfg)
				} else {
					err = a.sess.PutBrokerConfig(ctx, e.entity, e.cfg)
				}
				cancel()
				a.core.handle(evMetaWriteResult{err: err, resigning: err != nil && a.ctx.Err() != nil})
			case effDeleteTopic:
				ctx, cancel := a.writeCtx()
				err := a.sess.DeleteTopic(ctx, e.topic)
				cancel()
				a.core.handle(evMetaWriteResult{err: err, resigning: err != nil && a.ctx.Err() != nil})
			case effArmTimer:
				a.armTimer(e)
			case effStopTimer:
				if t := a.timers[e.key]; t != nil {
					t.Stop()
					delete(a.timers, e.key)
				}
			case effKick:
				close(e.s.kick)
			case effProbe:
				a.probe(e)
			case effYield:
				a.yield(e)
			case effRevokeBroker:
				ctx, cancel := a.writeCtx()
				err := a.sess.RevokeBroker(ctx, e.id, e.epoch)
				cancel()
				if err == nil {
					a.d.Metrics.fastFailovers.Inc()
				}
				a.core.handle(evRevokeResult{err: err, resigning: err != nil && a.ctx.Err() != nil})
			case effBrokerUp:
				a.startLink(e.info)
			case effBrokerGone:
				a.dropBroker(e.info)
			case effEvent:
				a.addEvent(e.ev)
			case effDecision:
				a.decided(e)
			case effAnswer:
				e.reply(e.resp, e.err)
			case effStepDown:
				a.stepDown(e.cause)
			default:
				panic("ctrl: unknown effect")
			}
		}
	}
}

// writeStates runs one effWriteStates and feeds its outcome back.
func (a *Active) writeStates(e effWriteStates) {
	start := time.Now()
	ctx, cancel := a.writeCtx()
	res, err := a.sess.UpdatePartitionStates(ctx, e.updates)
	cancel()
	a.core.handle(evWriteResult{res: res, err: err, resigning: err != nil && a.ctx.Err() != nil})
	for _, f := range a.core.out {
		if d, ok := f.(effDecision); ok && d.elected {
			a.d.Metrics.electionSeconds.Observe(time.Since(start).Seconds())
			break
		}
	}
}

// decided counts, traces and records one written partition decision.
func (a *Active) decided(e effDecision) {
	if e.unclean {
		a.d.Metrics.unclean.Inc()
	}
	if e.label != "" {
		a.d.Metrics.elections.WithLabelValues(string(e.label)).Inc()
	}
	if e.shrunk != "" {
		a.d.Metrics.isrShrinks.WithLabelValues(string(e.shrunk)).Inc()
	}
	a.traceDecision(e.kind, e.c, e.old, e.now)
	a.addEvent(e.ev)
}

// addEvent stamps a core event that has no time and adds it to the ring.
func (a *Active) addEvent(ev *controlv1.ClusterEvent) {
	if ev.Time == 0 {
		ev.Time = time.Now().UnixMilli()
	}
	a.ring.add(ev)
	a.viewDirty = true
}

// startLink dials a new broker incarnation and starts its sender.
func (a *Active) startLink(info metastore.Broker) {
	l := &link{epoch: info.Epoch}
	conn, err := a.d.Dial(info.Address)
	if err != nil {
		// A malformed address: requests fail, the broker will be seen as
		// dead at lease expiry or fast failover.
		a.log.Error("cannot dial broker", "broker_id", info.ID, "address", info.Address, "err", err)
	}
	l.conn = conn
	var client controlv1.BrokerControlServiceClient = brokenClient{}
	if conn != nil {
		client = controlv1.NewBrokerControlServiceClient(conn)
	}
	l.out = sender.Start(sender.Options{
		Client:  client,
		Target:  sender.Target{ID: info.ID, Epoch: info.Epoch, Address: info.Address},
		Timeout: a.d.Settings.RequestTimeout,
		OnStale: func(err error) {
			a.post(func() { a.stepDown(errors.Join(errStaleEpoch, err)) })
		},
		OnOlderState: func(n int) { a.d.Metrics.olderStates.Add(float64(n)) },
		Gate:         a.gate.wait,
		Logger:       a.log,
	})
	if old := a.links[info.ID]; old != nil {
		a.closeLink(old)
	}
	a.links[info.ID] = l
}

// dropBroker stops a departed incarnation's sender.
func (a *Active) dropBroker(info metastore.Broker) {
	if l := a.links[info.ID]; l != nil && l.epoch == info.Epoch {
		delete(a.links, info.ID)
		a.closeLink(l)
	}
}

func (a *Active) closeLink(l *link) {
	l.out.Stop()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		l.out.Wait()
		if l.conn != nil {
			_ = l.conn.Close()
		}
	}()
}

// Synchronous forms of core steps for the load (load.go): each runs the
// core's step and executes its effects.

// errNoOutcome is what a request returns if the core never answered it: a
// bug, reported as a failure rather than a success.
var errNoOutcome = errors.New("the decision did not complete")

// resumeReassignments is core.resumeReassignments run to completion.
func (a *Active) resumeReassignments() {
	a.core.resumeReassignments(func() {})
	a.flush()
}

// enqueue hands r to broker id's sender; the returned channel gets the
// outcome (sender.ErrStopped for unknown brokers).
func (a *Active) enqueue(id int32, r sender.Request) <-chan error {
	ch := make(chan error, 1)
	r.Done = ch
	l := a.links[id]
	if l == nil {
		ch <- sender.ErrStopped
		return ch
	}
	l.out.Enqueue(r)
	return ch
}

// awaitAcks waits, off the loop, for an ack group's pushes to be answered,
// at most twice the request timeout, then posts the core's follow-up.
func (a *Active) awaitAcks(e effAwaitAcks) {
	acks := a.groups[e.group]
	delete(a.groups, e.group)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		wctx, cancel := context.WithTimeout(a.ctx, 2*a.d.Settings.RequestTimeout)
		defer cancel()
		waitAll(wctx, acks)
		a.post(func() { a.step(e.then) })
	}()
}

// yield queues a YieldLeadership and waits for it off the loop, at most the
// request timeout: a leader that does not answer by then keeps its
// partitions (the request stays queued; the core's resume follows it).
func (a *Active) yield(e effYield) {
	timeout := a.d.Settings.RequestTimeout
	// Half of it for the next leaders to copy the leader's last records:
	// the answer leaves time to come back.
	e.req.CatchUpTimeoutMs = int32(min(timeout/2, time.Duration(math.MaxInt32)*time.Millisecond).Milliseconds())
	done := a.enqueue(e.to, sender.Request{YieldLeadership: e.req})
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		t := time.NewTimer(timeout)
		defer t.Stop()
		var err error
		outcome := "yielded"
		select {
		case err = <-done:
			switch {
			case errors.Is(err, sender.ErrStopped):
				err = kerr.New(kerr.BrokerNotAvailable, "broker %d departed before it answered", e.to)
				outcome = "departed"
			case err != nil:
				outcome = "refused"
			}
		case <-t.C:
			err = kerr.New(kerr.RequestTimedOut, "no answer from broker %d within %s (cut off from the controller?)", e.to, timeout)
			outcome = "timed_out"
		case <-a.ctx.Done():
			return
		}
		a.d.Metrics.yields.WithLabelValues(outcome).Inc()
		a.post(func() { a.step(evYielded{id: e.id, err: err}) })
	}()
}

// startDeletion is core.startDeletion with its pushes sent.
func (a *Active) startDeletion(t *topic) {
	a.core.startDeletion(t)
	a.flush()
}

// armTimer (re)arms one of the core's timers.
func (a *Active) armTimer(e effArmTimer) {
	if old := a.timers[e.key]; old != nil {
		old.Stop()
	}
	a.timers[e.key] = time.AfterFunc(e.after, func() { a.post(func() { a.step(evTimer{key: e.key, gen: e.gen}) }) })
}

// armFirstRebalance is core.armFirstRebalance with the timer armed.
func (a *Active) armFirstRebalance() {
	a.core.armFirstRebalance()
	a.flush()
}

// answerTo returns a replyFunc that stores a typed answer.
func answerTo[T any](resp *T, err *error) replyFunc {
	return func(m any, e error) {
		if m != nil {
			*resp, _ = m.(T)
		}
		*err = e
	}
}
