package ctrl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/kerr"
)

// BrokerSession serves one broker's session stream. The first message names
// the broker and its epoch; the controller answers with its id and epoch;
// later messages carry progress and events. When the stream breaks the
// controller may declare the broker dead before its lease expires (see
// sessionClosed). The call returns when the stream ends, the term ends
// (NOT_CONTROLLER) or a newer session of the broker replaces it.
func (a *Active) BrokerSession(ctx context.Context,
	recv func() (*controlv1.BrokerSessionRequest, error),
	send func(*controlv1.BrokerSessionResponse) error) error {
	first, err := recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	var s *session
	// A stream that breaks while its opening waits on the loop must not
	// leave the session open: nothing would close it, and an open session
	// keeps a dead broker from fast failover.
	if err := a.callOrUndo(ctx, func() (err error) {
		a.step(evSessionOpened{first: first, reply: answerTo(&s, &err)})
		return err
	}, func() { a.step(evSessionClosed{s: s, cause: ctx.Err()}) }); err != nil {
		return err
	}
	closed := func(err error) { a.post(func() { a.step(evSessionClosed{s: s, cause: err}) }) }
	reported := func(m *controlv1.BrokerSessionRequest) {
		a.post(func() { a.step(evSessionReport{s: s, m: m, now: time.Now().UnixMilli()}) })
	}
	a.raiseProducerIDFloor(first.GetHeldProducerIdBlockEnd())
	if err := send(&controlv1.BrokerSessionResponse{ControllerId: a.self.Id, ControllerEpoch: a.epoch}); err != nil {
		closed(err)
		return err
	}
	if len(first.GetReplicas()) > 0 || len(first.GetEvents()) > 0 {
		reported(first)
	}
	type msg struct {
		m   *controlv1.BrokerSessionRequest
		err error
	}
	msgs := make(chan msg)
	go func() {
		for {
			m, err := recv()
			select {
			case msgs <- msg{m, err}:
			case <-ctx.Done():
				return
			case <-s.kick:
				return
			case <-a.quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case r := <-msgs:
			if r.err != nil {
				closed(r.err)
				if errors.Is(r.err, io.EOF) {
					return nil
				}
				return r.err
			}
			if r.m.GetBrokerId() != s.brokerID || r.m.GetBrokerEpoch() != s.epoch {
				err := kerr.BadField(kerr.InvalidRequest, "broker_id", "session of broker %d epoch %d got a message for broker %d epoch %d",
					s.brokerID, s.epoch, r.m.GetBrokerId(), r.m.GetBrokerEpoch())
				closed(err)
				return err
			}
			a.raiseProducerIDFloor(r.m.GetHeldProducerIdBlockEnd())
			reported(r.m)
		case <-s.kick:
			return kerr.New(kerr.StaleBrokerEpoch, "a newer session of broker %d replaced this one", s.brokerID)
		case <-a.quit:
			return a.notController()
		case <-ctx.Done():
			closed(ctx.Err())
			return ctx.Err()
		}
	}
}

// openSession admits a session for a broker incarnation. An epoch older than
// the live registration, or not newer than a departed one, is stale (F23). A
// newer epoch than the controller knows is admitted: its registration is on
// its way through the watch.
func (c *core) openSession(first *controlv1.BrokerSessionRequest, reply replyFunc) {
	id, epoch := first.GetBrokerId(), first.GetBrokerEpoch()
	if id < 0 || epoch <= 0 {
		c.answer(reply, nil, kerr.BadField(kerr.InvalidRequest, "broker_epoch", "broker %d epoch %d: the first message must name the broker and its epoch", id, epoch))
		return
	}
	if b := c.brokers[id]; b != nil && epoch < b.info.Epoch {
		c.answer(reply, nil, kerr.New(kerr.StaleBrokerEpoch, "broker %d epoch %d is older than its registration's %d", id, epoch, b.info.Epoch))
		return
	}
	if b := c.brokers[id]; (b == nil || epoch > b.info.Epoch) && epoch <= c.departedEpoch[id] {
		c.answer(reply, nil, kerr.New(kerr.StaleBrokerEpoch, "broker %d epoch %d has departed", id, epoch))
		return
	}
	if old := c.sessions[id]; old != nil {
		c.emit(effKick{s: old})
	}
	s := &session{brokerID: id, epoch: epoch, kick: make(chan struct{})}
	c.sessions[id] = s
	delete(c.closedAhead, id)
	if fc := c.failing[id]; fc != nil && fc.epoch == epoch {
		c.cancelFailCheck(id)
		c.log.Info("Broker reopened its session; not declaring it dead", "broker_id", id, "broker_epoch", epoch)
	}
	c.log.Debug("broker session opened", "broker_id", id, "broker_epoch", epoch)
	c.answer(reply, s, nil)
}

// report stores a session message's progress and events. A full report
// replaces everything the broker reported before; a delta updates the
// replicas it lists and drops the ones it says are no longer hosted. Events
// without a time get now.
func (c *core) report(s *session, m *controlv1.BrokerSessionRequest, now int64) {
	if c.sessions[s.brokerID] != s {
		return
	}
	if m.GetFullReport() {
		c.dropProgressOf(s.brokerID, m.GetReplicas())
	}
	for _, tp := range m.GetRemoved() {
		delete(c.progress, progressKey{tp: election.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()}, broker: s.brokerID})
	}
	for _, rp := range m.GetReplicas() {
		bid := rp.GetBrokerId()
		if bid == 0 && s.brokerID != 0 {
			bid = s.brokerID
		}
		tp := election.TopicPartition{Topic: rp.GetTopic(), Partition: rp.GetPartition()}
		if c.lookup(tp.Topic, tp.Partition) == nil {
			continue
		}
		c.progress[progressKey{tp: tp, broker: bid}] = rp
		if rp.GetLeader() {
			c.leaderEnd[tp] = reportedEnd{leo: rp.GetLogEndOffset(), hw: rp.GetHighWatermark(), broker: bid, epoch: rp.GetLeaderEpoch()}
		}
	}
	c.noteOfflineDirs(s.brokerID, m.GetOfflineLogDirs(), func() {
		if len(m.GetReplicas()) == 0 && len(m.GetRemoved()) == 0 && len(m.GetEvents()) == 0 && !m.GetFullReport() {
			return // an idle broker's delta: watchers have nothing new
		}
		for _, ev := range m.GetEvents() {
			if ev.GetNodeId() == 0 {
				ev.NodeId = s.brokerID
			}
			if ev.GetTime() == 0 {
				ev.Time = now
			}
			c.emit(effEvent{ev: ev})
		}
		c.viewDirty = true
	})
}

// dropProgressOf forgets a broker's replicas that a full report does not
// list: the broker no longer hosts them.
func (c *core) dropProgressOf(brokerID int32, listed []*controlv1.ReplicaProgress) {
	keep := make(map[election.TopicPartition]struct{}, len(listed))
	for _, rp := range listed {
		keep[election.TopicPartition{Topic: rp.GetTopic(), Partition: rp.GetPartition()}] = struct{}{}
	}
	for k := range c.progress {
		if _, ok := keep[k.tp]; k.broker == brokerID && !ok {
			delete(c.progress, k)
		}
	}
}

// sessionClosed starts fast failover (F23 leases stay the safety net): if
// the broker's live incarnation does not reopen a session within the grace
// period, does not answer a gRPC health check of its incarnation's service,
// and its process is gone (its address refuses connections, or another
// process there, a restarted broker, does not know that incarnation), its
// lease is revoked at once. Any other broker, one whose stream is open but
// silent included, is left to lease expiry, on which it fences itself.
func (c *core) sessionClosed(s *session, cause error) {
	if c.sessions[s.brokerID] != s {
		return
	}
	delete(c.sessions, s.brokerID)
	b := c.brokers[s.brokerID]
	if b == nil || b.info.Epoch < s.epoch {
		// A restarted broker's session may open, and break (it restarted
		// again), before its registration comes through the watch: the
		// check waits for the registration, or that incarnation would be
		// left to its lease, its partitions offline all that time.
		c.closedAhead[s.brokerID] = s.epoch
		return
	}
	if b.info.Epoch != s.epoch {
		return
	}
	c.armFailCheck(b, "Broker session broke; declaring the broker dead unless it reconnects or answers a health check", cause)
}

// armFailCheck starts broker b's fast-failover check: a grace timer and a
// health probe of its incarnation.
func (c *core) armFailCheck(b *broker, why string, cause error) {
	grace := c.pol.grace
	if grace <= 0 {
		return
	}
	id, epoch := b.info.ID, b.info.Epoch
	c.log.Info(why, "broker_id", id, "broker_epoch", epoch, "grace", grace, "cause", errText(cause))
	c.failGen++
	fc := &failCheck{epoch: epoch, gen: c.failGen}
	c.failing[id] = fc
	c.emit(effArmTimer{key: timerKey{kind: timerGrace, broker: id}, after: grace, gen: fc.gen})
	c.emit(effProbe{id: id, epoch: epoch, addr: b.info.Address, timeout: grace, gen: fc.gen})
}

// cancelFailCheck drops broker id's pending fast-failover check.
func (c *core) cancelFailCheck(id int32) {
	if c.failing[id] != nil {
		delete(c.failing, id)
		c.emit(effStopTimer{key: timerKey{kind: timerGrace, broker: id}})
	}
}

// graceEnded is a broker's grace period passing.
func (c *core) graceEnded(id int32, gen uint64) {
	if fc := c.failing[id]; fc != nil && fc.gen == gen {
		fc.expired = true
		c.decideFailure(id, fc)
	}
}

// probed takes a fast-failover probe's outcome.
func (c *core) probed(r evProbeResult) {
	if fc := c.failing[r.id]; fc != nil && fc.gen == r.gen {
		fc.probed, fc.healthy, fc.refused, fc.replaced, fc.healthCheckError = true, r.healthy, r.refused, r.replaced, r.why
		c.decideFailure(r.id, fc)
	}
}

// decideFailure revokes a broker's registration once its grace period has
// passed and its health check failed.
func (c *core) decideFailure(id int32, fc *failCheck) {
	if c.failing[id] != fc || !fc.expired || !fc.probed {
		return
	}
	delete(c.failing, id)
	b := c.brokers[id]
	if b == nil || b.info.Epoch != fc.epoch {
		return
	}
	if fc.healthy {
		c.log.Info("Broker answers health checks; its lease decides its liveness", "broker_id", id, "broker_epoch", fc.epoch)
		return
	}
	if !fc.refused && !fc.replaced {
		// A partitioned or paused broker looks like this. It may still
		// hold its lease and serve as leader until it fences itself just
		// before the lease can expire; electing others now would give the
		// partitions two leaders (DESIGN.md, "Broker liveness").
		c.log.Warn("Broker did not reopen its session or answer a health check, but it is not known to be dead; its lease decides its liveness",
			"broker_id", id, "broker_epoch", fc.epoch, "health_check", fc.healthCheckError)
		return
	}
	c.log.Warn("Broker did not reopen its session and its process is gone: declaring it dead now by revoking its registration lease",
		"broker_id", id, "broker_epoch", fc.epoch, "grace", c.pol.grace, "health_check", fc.healthCheckError)
	c.await(effRevokeBroker{id: id, epoch: fc.epoch}, "revoke broker", func(ev event) {
		r := ev.(evRevokeResult)
		switch {
		case r.err == nil:
			c.brokerDeparted(id, fc.epoch, "session broke and the broker did not come back (fast failover)", nil)
		case errors.Is(r.err, metastore.ErrControllerMoved):
			c.fail("revoke broker", r.err, r.resigning)
		case kerr.CodeOf(r.err) == kerr.StaleBrokerEpoch || kerr.CodeOf(r.err) == kerr.BrokerIDNotRegistered:
			// Already gone or re-registered: the watch brings the news.
		default:
			// Lease expiry still catches it: not worth ending the term for.
			c.log.Warn("could not revoke the broker's lease; waiting for it to expire", "broker_id", id, "err", r.err)
		}
	})
}

// probe runs a fast-failover probe off the loop and posts its outcome.
func (a *Active) probe(e effProbe) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		healthy, replaced, why := false, false, "no connection"
		// A fresh connection: the sender's may be backing off after the
		// old process's, and would not reach a new process at the address.
		conn, err := a.d.Dial(e.addr)
		if err == nil {
			defer conn.Close()
			// The incarnation's own health service: a restarted process at
			// the same address does not serve it.
			ctx, cancel := context.WithTimeout(a.ctx, e.timeout)
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: grpcserver.IncarnationService(e.epoch)})
			cancel()
			healthy = err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
			replaced = status.Code(err) == codes.NotFound
			why = errText(err)
			switch {
			case replaced:
				why = fmt.Sprintf("the process at %s is not broker epoch %d (a restarted broker waiting for this registration to expire)", e.addr, e.epoch)
			case err == nil && !healthy:
				why = resp.GetStatus().String()
			}
		}
		refused := false
		if !healthy && !replaced {
			refused, why = a.refused(e.addr, e.timeout, why)
		}
		a.post(func() {
			a.step(evProbeResult{id: e.id, gen: e.gen, healthy: healthy, refused: refused, replaced: replaced, why: why})
		})
	}()
}

// refused dials the broker's address afresh and reports whether the
// connection was refused: nothing listens there, so the broker process is
// gone (or its host rebooted) and cannot be serving as leader. Any other
// outcome (a timeout, an unreachable network, a cut link, or a connection
// that opens: a paused process's kernel still accepts) may hide a live
// broker that holds its lease and serves; only its lease can end that.
func (a *Active) refused(addr string, timeout time.Duration, why string) (bool, string) {
	ctx, cancel := context.WithTimeout(a.ctx, timeout)
	defer cancel()
	conn, err := a.d.DialContext(ctx, addr)
	if err == nil {
		_ = conn.Close()
		return false, why + "; but its address accepts connections"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true, why + "; connection refused: " + err.Error()
	}
	return false, why + "; probe: " + err.Error()
}

func errText(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}
