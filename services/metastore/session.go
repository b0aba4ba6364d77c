package metastore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Session is one term of office of an elected controller. Its fenced write
// methods commit only while it is still the active controller.
// A Session is safe for concurrent use.
type Session struct {
	s        *Store
	info     ControllerInfo
	epochRev int64
	lease    clientv3.LeaseID
	stop     context.CancelFunc
	done     chan struct{}
	// previousGone is when the campaign that won saw the previous
	// controller's key go (zero: there was none while it waited).
	previousGone time.Time
	// heldUntil (unix nanoseconds) is when the lease may have expired in
	// etcd for all this process knows: the grant's or the last keepalive
	// answer's time plus the TTL it gave.
	heldUntil atomic.Int64
}

// Held reports whether the lease is surely still alive at now: etcd
// confirmed it less than a TTL ago. A controller that was frozen (a
// stopped process, a stalled link) can wake up after its lease expired
// and another controller was elected; the etcd client notices only at
// its next keepalive answer or deadline check (up to a second later), and
// meanwhile the term would still answer as the active controller. Writes
// are fenced in etcd whatever this says; Held keeps a zombie from serving
// reads and requests as active (Kafka's brokers fence themselves the same
// way on their registration lease).
func (s *Session) Held(now time.Time) bool {
	select {
	case <-s.done:
		return false
	default:
	}
	return now.UnixNano() < s.heldUntil.Load()
}

// PreviousGone is when the winning campaign saw the previous controller's
// key deleted; zero when it found no controller to wait for. Unlike a
// separate watch, it is always seen before the win.
func (s *Session) PreviousGone() time.Time { return s.previousGone }

func newSession(s *Store, info ControllerInfo, epochRev int64, lease clientv3.LeaseID, asked time.Time, ttl time.Duration) *Session {
	sess := &Session{s: s, info: info, epochRev: epochRev, lease: lease, done: make(chan struct{})}
	sess.heldUntil.Store(asked.Add(ttl).UnixNano())
	// The keepalive outlives the Campaign call, so it gets its own context.
	ctx, stop := context.WithCancel(context.Background())
	sess.stop = stop
	holdLease(ctx, s.cli, lease, s.k.controller(), epochRev, sess.done, func(ttl time.Duration) {
		// Counted from the answer's arrival: etcd renewed the lease when
		// the request reached it, a little earlier, so this errs by at
		// most the answer's trip.
		sess.heldUntil.Store(time.Now().Add(ttl).UnixNano())
	})
	return sess
}

// holdLease keeps lease alive and closes done when the hold is lost: the
// lease expires or is revoked, etcd stops answering for a whole TTL, the
// client closes, or ctx ends. It also watches key (written at revision rev)
// so a revoke is noticed at once rather than at the next keepalive reply.
//
// renewed, if not nil, hears the TTL of each keepalive answer as it comes.
func holdLease(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID, key string, rev int64, done chan struct{}, renewed func(ttl time.Duration)) {
	ka, err := cli.KeepAlive(ctx, lease)
	if err != nil {
		close(done)
		return
	}
	wctx, cancelWatch := context.WithCancel(ctx)
	wch := cli.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	go func() {
		defer close(done)
		defer cancelWatch()
		for {
			select {
			case resp, ok := <-ka:
				if !ok {
					return
				}
				if renewed != nil && resp != nil {
					renewed(time.Duration(resp.TTL) * time.Second)
				}
			case wr, ok := <-wch:
				if !ok || wr.Err() != nil {
					wch = nil // keep relying on the keepalive alone
					continue
				}
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE || ev.Kv.Lease != int64(lease) {
						return
					}
				}
			}
		}
	}()
}

// Info is the controller record this session wrote.
func (s *Session) Info() ControllerInfo { return s.info }

// Epoch is the controller epoch won by this session.
func (s *Session) Epoch() int32 { return s.info.Epoch }

// EpochRevision is the ModRevision of controller_epoch this session fences on.
func (s *Session) EpochRevision() int64 { return s.epochRev }

// Lease is the lease that holds the controller key.
func (s *Session) Lease() clientv3.LeaseID { return s.lease }

// Done is closed when the session's lease is lost (expired, revoked, or not
// renewed for a whole TTL) or after Resign. The controller must then stop.
func (s *Session) Done() <-chan struct{} { return s.done }

// Resign gives up the controller role: the lease is revoked, which deletes
// the controller key so a standby can win at once. Later fenced writes fail.
func (s *Session) Resign(ctx context.Context) error {
	s.stop()
	if _, err := s.s.cli.Revoke(ctx, s.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("metastore: resign controller epoch %d: %w", s.info.Epoch, err)
	}
	return nil
}
