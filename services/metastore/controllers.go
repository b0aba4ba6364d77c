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
)

// ControllerNode is the value of <p>/controllers/<id>: a running controller
// process, active or standby. It lets any controller list its peers
// (DescribeCluster), which the single <p>/controller key cannot.
type ControllerNode struct {
	ID        int32     `json:"id"`
	Address   string    `json:"address"`
	StartedAt time.Time `json:"started_at"`
}

// ControllerRegistration is a controller process's lease-bound presence key,
// renewed in the background.
type ControllerRegistration struct {
	s     *Store
	node  ControllerNode
	lease clientv3.LeaseID
	stop  context.CancelFunc
	done  chan struct{}
}

// RegisterController writes the lease-bound key <p>/controllers/<id> and
// keeps its lease alive. Unlike a broker registration it is not exclusive:
// a restarted controller replaces its previous incarnation's key at once
// (the key then follows the new lease). The TTL is rounded up to seconds.
func (s *Store) RegisterController(ctx context.Context, node ControllerNode, ttl time.Duration) (*ControllerRegistration, error) {
	if node.ID < 0 {
		return nil, fmt.Errorf("metastore: controller id %d is negative", node.ID)
	}
	if node.StartedAt.IsZero() {
		node.StartedAt = s.stamp()
	}
	lease, err := s.cli.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return nil, fmt.Errorf("metastore: grant controller node lease: %w", err)
	}
	s.noteTTL(lease.TTL)
	key := s.k.controllerNode(node.ID)
	resp, err := s.cli.Put(ctx, key, encode(node), clientv3.WithLease(lease.ID))
	if err != nil {
		s.revoke(lease.ID)
		return nil, fmt.Errorf("metastore: register controller %d: %w", node.ID, err)
	}
	r := &ControllerRegistration{s: s, node: node, lease: lease.ID, done: make(chan struct{})}
	kctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	s.holdLease(kctx, lease.ID, key, resp.Header.Revision, r.done)
	s.log.Debug("registered controller node", slog.Int("controller_id", int(node.ID)))
	return r, nil
}

// Node is the registration as written.
func (r *ControllerRegistration) Node() ControllerNode { return r.node }

// Done is closed when the registration is lost (lease expired or revoked,
// key deleted or replaced) or closed; register again to reappear. By then
// its lease is no longer renewed (and, if the key went, revoked), so a lost
// registration needs no Close.
func (r *ControllerRegistration) Done() <-chan struct{} { return r.done }

// Close removes the registration at once by revoking its lease.
func (r *ControllerRegistration) Close(ctx context.Context) error {
	r.stop()
	if _, err := r.s.cli.Revoke(ctx, r.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("metastore: deregister controller %d: %w", r.node.ID, err)
	}
	return nil
}

// Controllers lists the registered controller processes, by id.
func (s *Store) Controllers(ctx context.Context) ([]ControllerNode, error) {
	kvs, _, err := s.scan(ctx, s.k.controllersDir(), 0)
	if err != nil {
		return nil, err
	}
	out := make([]ControllerNode, 0, len(kvs))
	for _, kv := range kvs {
		ev := s.decodeKV(EventPut, string(kv.Key), kv.ModRevision, kv)
		if ev.Err != nil {
			return nil, ev.Err
		}
		if ev.ControllerNode != nil {
			out = append(out, *ev.ControllerNode)
		}
	}
	slices.SortFunc(out, func(a, b ControllerNode) int { return int(a.ID) - int(b.ID) })
	return out, nil
}

// WatchControllers reports controller processes coming and going from
// fromRev on.
func (s *Store) WatchControllers(ctx context.Context, fromRev int64) <-chan WatchResponse {
	return s.watch(ctx, s.k.controllersDir(), fromRev)
}
