package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/kerr"
)

// RegisterOption adjusts RegisterBroker.
type RegisterOption func(*registerOptions)

type registerOptions struct {
	waitForExpiry bool
}

// WaitForExpiry makes RegisterBroker wait for a live registration of the same
// id to go away instead of failing. This is for a fast bounce: the previous
// incarnation's lease outlives its process by up to its TTL, and nobody
// renews it, so the wait ends within one session timeout (bound it with ctx).
func WaitForExpiry() RegisterOption {
	return func(o *registerOptions) { o.waitForExpiry = true }
}

// Registration is a live broker registration, renewed in the background.
type Registration struct {
	s      *Store
	broker Broker
	lease  clientv3.LeaseID
	stop   context.CancelFunc
	done   chan struct{}
	// controllerEpoch is the controller epoch etcd held when the key was
	// created, read in the same transaction.
	controllerEpoch int32

	// base anchors the two durations below on this process's monotonic
	// clock; confirmed is when (after base) the newest keepalive that etcd
	// answered was sent, ttl the lease's TTL as etcd granted it.
	base      time.Time
	confirmed atomic.Int64
	ttl       atomic.Int64
	lostOnce  sync.Once
	why       atomic.Pointer[string]
	lastBreak atomic.Pointer[renewalBreak]
}

// RegisterBroker creates the lease-bound key <p>/brokers/ids/<id> if no live
// registration holds it, and keeps its lease alive. The lease TTL is
// sessionTimeout rounded up to whole seconds.
//
// The broker epoch is the key's CreateRevision, so every registration gets a
// larger epoch than any before it (Kafka's czxid, KIP-380). If a live
// registration exists (another broker with this id, or this broker's previous
// incarnation whose lease has not yet expired) it fails with
// DUPLICATE_BROKER_REGISTRATION, unless WaitForExpiry is given.
//
// The same transaction reads the controller epoch (ControllerEpoch), so the
// broker can refuse every older controller before it acts on its new epoch.
func (s *Store) RegisterBroker(ctx context.Context, info BrokerInfo, sessionTimeout time.Duration, opts ...RegisterOption) (*Registration, error) {
	var o registerOptions
	for _, opt := range opts {
		opt(&o)
	}
	if info.ID < 0 {
		return nil, kerr.BadField(kerr.InvalidRequest, "id", "broker id %d is negative", info.ID)
	}
	if info.RegisteredAt.IsZero() {
		info.RegisteredAt = s.stamp()
	}
	key := s.k.broker(info.ID)
	for {
		sent := time.Now()
		lease, err := s.cli.Grant(ctx, ttlSeconds(sessionTimeout))
		if err != nil {
			return nil, fmt.Errorf("metastore: grant broker lease: %w", err)
		}
		s.noteTTL(lease.TTL)
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, encode(info), clientv3.WithLease(lease.ID)), clientv3.OpGet(s.k.controllerEpoch())).
			Else(clientv3.OpGet(key)).
			Commit()
		if err == nil && resp.Succeeded {
			ctlEpoch, err := s.controllerEpochFrom(resp.Responses[1])
			if err != nil {
				s.revoke(lease.ID)
				return nil, err
			}
			r := &Registration{s: s, broker: Broker{BrokerInfo: info, Epoch: resp.Header.Revision},
				controllerEpoch: ctlEpoch, lease: lease.ID, done: make(chan struct{}), base: sent}
			r.ttl.Store(int64(time.Duration(lease.TTL) * time.Second))
			kctx, stop := context.WithCancel(context.Background())
			r.stop = stop
			r.hold(kctx, key)
			s.log.Info("registered broker", slog.Int("broker_id", int(info.ID)),
				slog.Int64("broker_epoch", r.broker.Epoch))
			return r, nil
		}
		s.revoke(lease.ID)
		if err != nil {
			return nil, fmt.Errorf("metastore: register broker %d: %w", info.ID, err)
		}
		if !o.waitForExpiry {
			return nil, s.duplicateRegistration(ctx, info.ID, resp.Responses[0])
		}
		if err := s.waitDeleted(ctx, key, resp.Header.Revision); err != nil {
			return nil, err
		}
	}
}

func (s *Store) duplicateRegistration(ctx context.Context, id int32, get *pbResponseOp) error {
	kvs := get.GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return kerr.New(kerr.DuplicateBrokerRegistration, "broker %d is registered", id)
	}
	held, _ := decode[BrokerInfo](string(kvs[0].Key), kvs[0].Value)
	remaining := "unknown"
	if ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(kvs[0].Lease)); err == nil {
		remaining = fmt.Sprintf("%ds", ttl.TTL)
	}
	return kerr.New(kerr.DuplicateBrokerRegistration,
		"broker %d is registered by %s (broker epoch %d, lease expires in %s)",
		id, held.Address, kvs[0].CreateRevision, remaining)
}

// controllerEpochFrom decodes the answer of OpGet(controller_epoch): 0
// before the first election.
func (s *Store) controllerEpochFrom(get *pbResponseOp) (int32, error) {
	kvs := get.GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return 0, nil
	}
	return decodeEpoch(s.k.controllerEpoch(), kvs[0].Value)
}

// Broker is the registration as written, with its epoch.
func (r *Registration) Broker() Broker { return r.broker }

// Epoch is the broker epoch of this registration.
func (r *Registration) Epoch() int64 { return r.broker.Epoch }

// ControllerEpoch is the controller epoch etcd held at the revision this
// registration was created (0 before the first election): a controller of
// an older epoch had been deposed by then.
func (r *Registration) ControllerEpoch() int32 { return r.controllerEpoch }

// Lease is the lease that holds the registration key.
func (r *Registration) Lease() clientv3.LeaseID { return r.lease }

// Done is closed when the registration is known lost: etcd says its lease
// is gone (expired or revoked: the controller declared the broker dead),
// its key was deleted or taken, or it was closed. The broker must register
// again, and gets a new epoch. Silence does not close it: while etcd
// answers nothing the lease is unconfirmed (LeaseHeldUntil passes, and the
// broker's leader fence goes up), and the first answer says whether it
// lived (an etcd restart keeps leases and gives each a whole TTL again) or
// not.
func (r *Registration) Done() <-chan struct{} { return r.done }

// LeaseConfirmedAt is when the newest keepalive that etcd answered was sent
// (at first, when the lease was requested), on this process's monotonic
// clock. etcd renewed the lease no earlier than that.
func (r *Registration) LeaseConfirmedAt() time.Time {
	return r.base.Add(time.Duration(r.confirmed.Load()))
}

// TTL is the lease's time to live as etcd granted it.
func (r *Registration) TTL() time.Duration { return time.Duration(r.ttl.Load()) }

// LeaseHeldUntil is the earliest moment etcd can expire the registration's
// lease, on this process's monotonic clock: LeaseConfirmedAt plus the TTL.
// etcd sets a lease's expiry to the time it handles a renewal plus the TTL,
// and that renewal was handled after it was sent, so until this moment
// (give or take the two clocks' rate difference) the registration can be
// gone only if it was revoked. The broker fences its leaderships on it.
func (r *Registration) LeaseHeldUntil() time.Time {
	return r.LeaseConfirmedAt().Add(r.TTL())
}

// LostReason says why Done closed, or "" while the registration lives.
func (r *Registration) LostReason() string {
	if p := r.why.Load(); p != nil {
		return *p
	}
	return ""
}

// confirm records an answered keepalive sent at sent, if it is the newest.
func (r *Registration) confirm(sent time.Time, ttlSeconds int64) {
	raise(&r.confirmed, int64(sent.Sub(r.base)))
	if ttlSeconds > 0 {
		r.ttl.Store(int64(time.Duration(ttlSeconds) * time.Second))
	}
}

// LastRenewalBreak says when and why a keepalive stream last ended early
// (etcd refused a renewal, the connection broke, or renewals went
// unanswered for a TTL); zero time if none has.
func (r *Registration) LastRenewalBreak() (time.Time, string) {
	if p := r.lastBreak.Load(); p != nil {
		return p.at, p.why
	}
	return time.Time{}, ""
}

func (r *Registration) noteBreak(why string) {
	r.lastBreak.Store(&renewalBreak{at: time.Now(), why: why})
}

// renewalBreak is one early end of a keepalive stream.
type renewalBreak struct {
	at  time.Time
	why string
}

func (r *Registration) lose(why string) {
	r.lostOnce.Do(func() {
		r.why.Store(&why)
		close(r.done)
	})
}

// hold renews the lease (renewer) and watches the key so a revoke is
// noticed at once. The registration is lost when etcd says the lease is
// gone, the key is deleted or taken, the client closes, or ctx ends. It
// goes on renewing through any silence: giving the lease up then would make
// every broker register anew after an etcd outage the leases outlived, and
// the controller treat each as a bounce.
func (r *Registration) hold(ctx context.Context, key string) {
	cli := r.s.cli
	ctx, cancel := context.WithCancel(ctx)
	lost := func(why string) {
		r.lose(why)
		cancel()
	}
	gone := r.s.keyGone(ctx, key, r.lease, r.broker.Epoch)
	go func() {
		select {
		case <-gone:
			r.redialIfSilent()
			lost("registration key deleted (lease expired or revoked)")
		case <-ctx.Done():
		}
	}()
	go func() {
		defer cancel()
		select {
		case <-ctx.Done():
			lost("registration closed")
		case <-cli.Ctx().Done():
			lost("etcd client closed")
		}
	}()
	go renewer{cli: cli, lease: r.lease, ttl: r.TTL, confirm: r.confirm, lost: lost, broke: r.noteBreak}.run(ctx)
}

// redialIfSilent has the store dial etcd anew when the lease's renewals
// went unanswered for a whole TTL before the watch, on a connection of its
// own, saw the registration go: the main connection is presumed dead, and
// registering again on it would wait for TCP to give it up.
func (r *Registration) redialIfSilent() {
	silent := time.Since(r.LeaseConfirmedAt())
	if r.s.redial == nil || silent < r.TTL() {
		return
	}
	n := r.s.redial()
	r.s.log.Warn("registration lost while etcd answered no renewal: dialling etcd anew",
		slog.Int("broker_id", int(r.broker.ID)), slog.Duration("unanswered_for", silent), slog.Int("connections_closed", n))
}

// Close deregisters the broker at once by revoking its lease.
func (r *Registration) Close(ctx context.Context) error {
	r.stop()
	if _, err := r.s.cli.Revoke(ctx, r.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("metastore: deregister broker %d: %w", r.broker.ID, err)
	}
	return nil
}

// Brokers lists the live brokers, by id, and the revision they were read at.
func (s *Store) Brokers(ctx context.Context) ([]Broker, int64, error) {
	kvs, rev, err := s.scan(ctx, s.k.brokersDir(), 0)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Broker, 0, len(kvs))
	for _, kv := range kvs {
		ev := s.decodeKV(EventPut, string(kv.Key), kv.ModRevision, kv)
		if ev.Err != nil {
			return nil, 0, ev.Err
		}
		if ev.Broker != nil {
			out = append(out, *ev.Broker)
		}
	}
	slices.SortFunc(out, func(a, b Broker) int { return int(a.ID) - int(b.ID) })
	return out, rev, nil
}

// RevokeBroker declares a broker dead at once instead of waiting for its
// lease to expire. If epoch is not 0 only that incarnation is revoked: a
// newer one gets STALE_BROKER_EPOCH back. A broker that is not registered
// gets BROKER_ID_NOT_REGISTERED.
//
// The registration key is deleted in one fenced transaction conditioned on
// the incarnation: a check and a later revoke would let a controller deposed
// in between, or a registration replaced in between, be acted on. The
// deletion is what the broker and the controllers' watches see; the lease,
// which held nothing else, is revoked after it, best effort (it expires
// anyway).
func (s *Session) RevokeBroker(ctx context.Context, id int32, epoch int64) error {
	key := s.s.k.broker(id)
	registered := clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	if epoch != 0 {
		registered = clientv3.Compare(clientv3.CreateRevision(key), "=", epoch)
	}
	resp, err := s.commit(ctx, []clientv3.Cmp{registered},
		[]clientv3.Op{clientv3.OpGet(key), clientv3.OpDelete(key)}, []clientv3.Op{clientv3.OpGet(key)})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		kvs := resp.Responses[fenceCmps].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return kerr.New(kerr.BrokerIDNotRegistered, "broker %d is not registered", id)
		}
		return kerr.New(kerr.StaleBrokerEpoch, "broker %d: epoch %d is not the live epoch %d",
			id, epoch, kvs[0].CreateRevision)
	}
	kv := resp.Responses[0].GetResponseRange().GetKvs()[0]
	s.s.log.Info("revoked broker", slog.Int("broker_id", int(id)), slog.Int64("broker_epoch", kv.CreateRevision))
	if _, err := s.s.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.s.log.Debug("revoke a revoked broker's lease", slog.Int("broker_id", int(id)), slog.Any("err", err))
	}
	return nil
}
