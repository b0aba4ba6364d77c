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
	if err := a.call(ctx, func() (err error) { s, err = a.openSession(first); return err }); err != nil {
		return err
	}
	if err := send(&controlv1.BrokerSessionResponse{ControllerId: a.self.Id, ControllerEpoch: a.epoch}); err != nil {
		a.post(func() { a.sessionClosed(s, err) })
		return err
	}
	if len(first.GetReplicas()) > 0 || len(first.GetEvents()) > 0 {
		a.post(func() { a.report(s, first) })
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
				a.post(func() { a.sessionClosed(s, r.err) })
				if errors.Is(r.err, io.EOF) {
					return nil
				}
				return r.err
			}
			if r.m.GetBrokerId() != s.brokerID || r.m.GetBrokerEpoch() != s.epoch {
				err := kerr.BadField(kerr.InvalidRequest, "broker_id", "session of broker %d epoch %d got a message for broker %d epoch %d",
					s.brokerID, s.epoch, r.m.GetBrokerId(), r.m.GetBrokerEpoch())
				a.post(func() { a.sessionClosed(s, err) })
				return err
			}
			a.post(func() { a.report(s, r.m) })
		case <-s.kick:
			return kerr.New(kerr.StaleBrokerEpoch, "a newer session of broker %d replaced this one", s.brokerID)
		case <-a.quit:
			return a.notController()
		case <-ctx.Done():
			a.post(func() { a.sessionClosed(s, ctx.Err()) })
			return ctx.Err()
		}
	}
}

// openSession admits a session for a broker incarnation. An epoch older than
// the live registration, or not newer than a departed one, is stale (F23). A
// newer epoch than the controller knows is admitted: its registration is on
// its way through the watch.
func (a *Active) openSession(first *controlv1.BrokerSessionRequest) (*session, error) {
	id, epoch := first.GetBrokerId(), first.GetBrokerEpoch()
	if id < 0 || epoch <= 0 {
		return nil, kerr.BadField(kerr.InvalidRequest, "broker_epoch", "broker %d epoch %d: the first message must name the broker and its epoch", id, epoch)
	}
	if b := a.brokers[id]; b != nil && epoch < b.info.Epoch {
		return nil, kerr.New(kerr.StaleBrokerEpoch, "broker %d epoch %d is older than its registration's %d", id, epoch, b.info.Epoch)
	}
	if b := a.brokers[id]; (b == nil || epoch > b.info.Epoch) && epoch <= a.departedEpoch[id] {
		return nil, kerr.New(kerr.StaleBrokerEpoch, "broker %d epoch %d has departed", id, epoch)
	}
	if old := a.sessions[id]; old != nil {
		close(old.kick)
	}
	s := &session{brokerID: id, epoch: epoch, kick: make(chan struct{})}
	a.sessions[id] = s
	if fc := a.failing[id]; fc != nil && fc.epoch == epoch {
		fc.stopTimer()
		delete(a.failing, id)
		a.log.Info("Broker reopened its session; not declaring it dead", "broker_id", id, "broker_epoch", epoch)
	}
	a.log.Debug("broker session opened", "broker_id", id, "broker_epoch", epoch)
	return s, nil
}

// report stores a session message's progress and events. A full report
// replaces everything the broker reported before; a delta updates the
// replicas it lists and drops the ones it says are no longer hosted.
func (a *Active) report(s *session, m *controlv1.BrokerSessionRequest) {
	if a.sessions[s.brokerID] != s {
		return
	}
	if m.GetFullReport() {
		a.dropProgressOf(s.brokerID, m.GetReplicas())
	}
	for _, tp := range m.GetRemoved() {
		delete(a.progress, progressKey{tp: election.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()}, broker: s.brokerID})
	}
	for _, rp := range m.GetReplicas() {
		bid := rp.GetBrokerId()
		if bid == 0 && s.brokerID != 0 {
			bid = s.brokerID
		}
		tp := election.TopicPartition{Topic: rp.GetTopic(), Partition: rp.GetPartition()}
		if a.lookup(tp.Topic, tp.Partition) == nil {
			continue
		}
		a.progress[progressKey{tp: tp, broker: bid}] = rp
	}
	a.noteOfflineDirs(s.brokerID, m.GetOfflineLogDirs())
	if len(m.GetReplicas()) == 0 && len(m.GetRemoved()) == 0 && len(m.GetEvents()) == 0 && !m.GetFullReport() {
		return // an idle broker's delta: watchers have nothing new
	}
	now := time.Now().UnixMilli()
	for _, ev := range m.GetEvents() {
		if ev.GetNodeId() == 0 {
			ev.NodeId = s.brokerID
		}
		if ev.GetTime() == 0 {
			ev.Time = now
		}
		a.ring.add(ev)
	}
	a.viewDirty = true
}

// dropProgressOf forgets a broker's replicas that a full report does not
// list: the broker no longer hosts them.
func (a *Active) dropProgressOf(brokerID int32, listed []*controlv1.ReplicaProgress) {
	keep := make(map[election.TopicPartition]struct{}, len(listed))
	for _, rp := range listed {
		keep[election.TopicPartition{Topic: rp.GetTopic(), Partition: rp.GetPartition()}] = struct{}{}
	}
	for k := range a.progress {
		if _, ok := keep[k.tp]; k.broker == brokerID && !ok {
			delete(a.progress, k)
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
func (a *Active) sessionClosed(s *session, cause error) {
	if a.sessions[s.brokerID] != s {
		return
	}
	delete(a.sessions, s.brokerID)
	b := a.brokers[s.brokerID]
	if b == nil || b.info.Epoch != s.epoch || a.d.Settings.SessionGrace <= 0 {
		return
	}
	grace := a.d.Settings.SessionGrace
	a.log.Info("Broker session broke; declaring the broker dead unless it reconnects or answers a health check",
		"broker_id", s.brokerID, "broker_epoch", s.epoch, "grace", grace, "cause", errText(cause))
	fc := &failCheck{epoch: s.epoch}
	a.failing[s.brokerID] = fc
	id := s.brokerID
	t := time.AfterFunc(grace, func() {
		a.post(func() { fc.expired = true; a.decideFailure(id, fc) })
	})
	fc.stopTimer = t.Stop
	addr := b.info.Address
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		healthy, replaced, why := false, false, "no connection"
		// A fresh connection: the sender's may be backing off after the
		// old process's, and would not reach a new process at the address.
		conn, err := a.d.Dial(addr)
		if err == nil {
			defer conn.Close()
			// The incarnation's own health service: a restarted process at
			// the same address does not serve it.
			ctx, cancel := context.WithTimeout(a.ctx, grace)
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: grpcserver.IncarnationService(fc.epoch)})
			cancel()
			healthy = err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
			replaced = status.Code(err) == codes.NotFound
			why = errText(err)
			switch {
			case replaced:
				why = fmt.Sprintf("the process at %s is not broker epoch %d (a restarted broker waiting for this registration to expire)", addr, fc.epoch)
			case err == nil && !healthy:
				why = resp.GetStatus().String()
			}
		}
		refused := false
		if !healthy && !replaced {
			refused, why = a.refused(addr, grace, why)
		}
		a.post(func() {
			fc.probed, fc.healthy, fc.refused, fc.replaced, fc.healthCheckError = true, healthy, refused, replaced, why
			a.decideFailure(id, fc)
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
	c, err := a.d.DialContext(ctx, addr)
	if err == nil {
		_ = c.Close()
		return false, why + "; but its address accepts connections"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true, why + "; connection refused: " + err.Error()
	}
	return false, why + "; probe: " + err.Error()
}

// decideFailure revokes a broker's registration once its grace period has
// passed and its health check failed.
func (a *Active) decideFailure(id int32, fc *failCheck) {
	if a.failing[id] != fc || !fc.expired || !fc.probed {
		return
	}
	delete(a.failing, id)
	b := a.brokers[id]
	if b == nil || b.info.Epoch != fc.epoch {
		return
	}
	if fc.healthy {
		a.log.Info("Broker answers health checks; its lease decides its liveness", "broker_id", id, "broker_epoch", fc.epoch)
		return
	}
	if !fc.refused && !fc.replaced {
		// A partitioned or paused broker looks like this. It may still
		// hold its lease and serve as leader until it fences itself just
		// before the lease can expire; electing others now would give the
		// partitions two leaders (DESIGN.md, "Broker liveness").
		a.log.Warn("Broker did not reopen its session or answer a health check, but it is not known to be dead; its lease decides its liveness",
			"broker_id", id, "broker_epoch", fc.epoch, "health_check", fc.healthCheckError)
		return
	}
	a.log.Warn("Broker did not reopen its session and its process is gone: declaring it dead now by revoking its registration lease",
		"broker_id", id, "broker_epoch", fc.epoch, "grace", a.d.Settings.SessionGrace, "health_check", fc.healthCheckError)
	ctx, cancel := a.writeCtx()
	err := a.sess.RevokeBroker(ctx, id, fc.epoch)
	cancel()
	switch {
	case err == nil:
		a.d.Metrics.fastFailovers.Inc()
		a.step(evBrokerDeparted{id: id, epoch: fc.epoch, why: "session broke and the broker did not come back (fast failover)"})
	case errors.Is(err, metastore.ErrControllerMoved):
		a.fail("revoke broker", err)
	case kerr.CodeOf(err) == kerr.StaleBrokerEpoch || kerr.CodeOf(err) == kerr.BrokerIDNotRegistered:
		// Already gone or re-registered: the watch brings the news.
	default:
		// Lease expiry still catches it: not worth ending the term for.
		a.log.Warn("could not revoke the broker's lease; waiting for it to expire", "broker_id", id, "err", err)
	}
}

func errText(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}
