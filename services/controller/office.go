package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"tidemark.io/services/controller/internal/ctrl"
	"tidemark.io/services/controller/internal/grpcapi"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/retry"
)

// office runs the controller's campaign loop: campaign, hold a term
// (ctrl.Active) until it steps down, resign, campaign again. It also tells
// the gRPC handlers which term, if any, is current.
//
// Concurrency: run is one goroutine; watchKey another. mu guards cur and
// lostAt, which the handlers read.
type office struct {
	cfg     Config
	store   *metastore.Store
	log     *slog.Logger
	metrics *ctrl.Metrics
	tracer  trace.Tracer
	addr    string
	creds   grpc.DialOption // to brokers

	mu     sync.Mutex
	cur    *ctrl.Active
	lostAt time.Time // when the controller key was last seen deleted
}

var _ grpcapi.Office = (*office)(nil)

// Active implements grpcapi.Office.
func (o *office) Active(ctx context.Context) (grpcapi.Backend, error) {
	if a := o.current(); a != nil {
		return a, nil
	}
	return nil, o.notController(ctx)
}

func (o *office) current() *ctrl.Active {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur == nil || o.cur.Err() != nil || !o.cur.Held(time.Now()) {
		return nil
	}
	return o.cur
}

// notController answers for a standby, naming the active controller as
// etcd has it.
func (o *office) notController(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, ok, err := o.store.ActiveController(ctx)
	if err != nil || !ok {
		return kerr.New(kerr.NotController, "controller %d is not the active controller; none is active right now", o.cfg.ID)
	}
	e := kerr.New(kerr.NotController, "controller %d is not the active controller; controller %d (epoch %d) is",
		o.cfg.ID, info.ControllerID, info.Epoch)
	e.Controller = &kerr.NodeHint{ID: info.ControllerID, Address: info.Address}
	return e
}

// run campaigns until ctx ends.
func (o *office) run(ctx context.Context) {
	go o.watchKey(ctx)
	for ctx.Err() == nil {
		o.metrics.SetStandby()
		sess, err := o.store.Campaign(ctx, o.cfg.ID, o.addr, o.cfg.SessionTTL)
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("campaign failed; retrying", "err", err)
				_ = retry.Sleep(ctx, time.Second)
			}
			continue
		}
		o.log.Info("Won the controller election", "controller_id", o.cfg.ID, "epoch", sess.Epoch())
		a := ctrl.Start(ctx, ctrl.Deps{
			Store: o.store, Session: sess, Log: o.log, Metrics: o.metrics, Tracer: o.tracer,
			LostAt: func() time.Time {
				// The campaign's own sighting, which precedes the win; the
				// watch's may arrive after it on a loaded machine.
				if t := sess.PreviousGone(); !t.IsZero() {
					return t
				}
				return o.lastLoss()
			},
			DialContext: o.cfg.Dialer, Creds: o.creds,
			Settings: ctrl.Settings{
				RequestTimeout: o.cfg.RequestTimeout,
				SessionGrace:   o.cfg.BrokerSessionGrace,
				StaticBroker:   o.cfg.staticBroker(),
			},
		})
		o.mu.Lock()
		o.cur = a
		o.mu.Unlock()
		<-a.Done()
		a.Wait()
		o.mu.Lock()
		o.cur = nil
		o.mu.Unlock()
		// Hand the role over at once rather than after the lease TTL.
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := sess.Resign(rctx); err != nil {
			o.log.Debug("resign", "err", err)
			go o.resignWhenHeard(ctx, sess)
		}
		cancel()
		o.log.Info("Controller term ended", "epoch", sess.Epoch(), "reason", a.Err())
		_ = retry.Sleep(ctx, 100*time.Millisecond) // do not spin if the term ended at once
	}
}

// resignWhenHeard revokes an ended term's lease once etcd answers again. A
// term that ended because etcd was unreachable could not revoke it, and an
// etcd restart keeps leases (each with a whole TTL again): without this,
// the key stays held, and no controller is elected, for a TTL after etcd
// is back.
func (o *office) resignWhenHeard(ctx context.Context, sess *metastore.Session) {
	for range 600 { // five minutes of tries, far past any lease's TTL
		if !retry.Sleep(ctx, 500*time.Millisecond) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := sess.Resign(rctx)
		cancel()
		if err == nil {
			o.log.Info("Revoked the ended term's lease", "epoch", sess.Epoch())
			return
		}
	}
}

func (o *office) lastLoss() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lostAt
}

// logGone says which controller's term ended (the deleted key's last
// value; nil when etcd no longer had it): with the new term's "Won the
// controller election" and "Controller failover complete", an operator
// sees who handed over to whom, in which epochs, and how long it took.
func (o *office) logGone(prev *metastore.ControllerInfo) {
	if prev == nil {
		o.log.Info("The active controller is gone; a new one is being elected")
		return
	}
	o.log.Info("The active controller is gone; a new one is being elected", "previous_controller", prev.ControllerID,
		"previous_epoch", prev.Epoch, "previous_address", prev.Address)
}

// watchKey records when the controller key disappears, so a new term can
// report its failover time from that moment.
func (o *office) watchKey(ctx context.Context) {
	for ctx.Err() == nil {
		for wr := range o.store.WatchController(ctx, 0) {
			for _, ev := range wr.Events {
				if ev.Type == metastore.EventDelete {
					o.mu.Lock()
					o.lostAt = time.Now()
					o.mu.Unlock()
					o.logGone(ev.Controller)
				}
			}
		}
		_ = retry.Sleep(ctx, 100*time.Millisecond)
	}
}
