package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/kerr"
)

// RegisterOption adjusts RegisterBroker.
type RegisterOption func(*registerOptions)

type registerOptions struct{ waitForExpiry bool }

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
		lease, err := s.cli.Grant(ctx, ttlSeconds(sessionTimeout))
		if err != nil {
			return nil, fmt.Errorf("metastore: grant broker lease: %w", err)
		}
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, encode(info), clientv3.WithLease(lease.ID))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err == nil && resp.Succeeded {
			r := &Registration{s: s, broker: Broker{BrokerInfo: info, Epoch: resp.Header.Revision},
				lease: lease.ID, done: make(chan struct{})}
			kctx, stop := context.WithCancel(context.Background())
			r.stop = stop
			holdLease(kctx, s.cli, lease.ID, key, r.broker.Epoch, r.done)
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

// Broker is the registration as written, with its epoch.
func (r *Registration) Broker() Broker { return r.broker }

// Epoch is the broker epoch of this registration.
func (r *Registration) Epoch() int64 { return r.broker.Epoch }

// Lease is the lease that holds the registration key.
func (r *Registration) Lease() clientv3.LeaseID { return r.lease }

// Done is closed when the registration is lost: its lease expired or was
// revoked (the controller declared the broker dead), or it was closed. The
// broker must register again, and gets a new epoch.
func (r *Registration) Done() <-chan struct{} { return r.done }

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

// RevokeBroker declares a broker dead at once by revoking its registration's
// lease, instead of waiting for the lease to expire. If epoch is not 0 only
// that incarnation is revoked: a newer one gets STALE_BROKER_EPOCH back.
// A broker that is not registered gets BROKER_ID_NOT_REGISTERED.
// The fence is checked before the revoke.
func (s *Session) RevokeBroker(ctx context.Context, id int32, epoch int64) error {
	resp, err := s.commit(ctx, nil, []clientv3.Op{clientv3.OpGet(s.s.k.broker(id))}, nil)
	if err != nil {
		return err
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return kerr.New(kerr.BrokerIDNotRegistered, "broker %d is not registered", id)
	}
	if epoch != 0 && kvs[0].CreateRevision != epoch {
		return kerr.New(kerr.StaleBrokerEpoch, "broker %d: epoch %d is not the live epoch %d",
			id, epoch, kvs[0].CreateRevision)
	}
	if _, err := s.s.cli.Revoke(ctx, clientv3.LeaseID(kvs[0].Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("metastore: revoke broker %d: %w", id, err)
	}
	s.s.log.Info("revoked broker", slog.Int("broker_id", int(id)), slog.Int64("broker_epoch", kvs[0].CreateRevision))
	return nil
}
