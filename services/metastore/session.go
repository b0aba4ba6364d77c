package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

	// base anchors the durations below on this process's monotonic clock.
	// heldUntil is the earliest moment etcd can expire the lease: when the
	// newest renewal etcd answered was sent (at first, when the lease was
	// asked for) plus the TTL it gave. answered is when the newest answer
	// arrived, ttl the TTL etcd last gave.
	base      time.Time
	heldUntil atomic.Int64
	answered  atomic.Int64
	ttl       atomic.Int64
}

// Held reports whether the lease is surely still alive at now: a renewal
// etcd answered was sent less than a TTL ago. A controller that was frozen
// (a stopped process, a stalled link) can wake up after its lease expired
// and another controller was elected, and meanwhile the term would still
// answer as the active controller. Writes are fenced in etcd whatever this
// says; Held keeps a zombie from serving reads and requests as active
// (Kafka's brokers fence themselves the same way on their registration
// lease). It counts from the renewal's send, not its answer's arrival: an
// answer read after a freeze says the lease was renewed, not how long ago.
func (s *Session) Held(now time.Time) bool {
	select {
	case <-s.done:
		return false
	default:
	}
	return now.Sub(s.base) < time.Duration(s.heldUntil.Load())
}

// PreviousGone is when the winning campaign saw the previous controller's
// key deleted; zero when it found no controller to wait for. Unlike a
// separate watch, it is always seen before the win.
func (s *Session) PreviousGone() time.Time { return s.previousGone }

func newSession(s *Store, info ControllerInfo, epochRev int64, lease clientv3.LeaseID, asked time.Time, ttl time.Duration) *Session {
	sess := &Session{s: s, info: info, epochRev: epochRev, lease: lease, done: make(chan struct{}), base: asked}
	sess.heldUntil.Store(int64(ttl))
	sess.answered.Store(int64(time.Since(asked)))
	sess.ttl.Store(int64(ttl))
	// The keepalive outlives the Campaign call, so it gets its own context.
	ctx, stop := context.WithCancel(context.Background())
	sess.stop = stop
	sess.hold(ctx, s.k.controller(), epochRev)
	return sess
}

// confirm records an answered renewal sent at sent.
func (s *Session) confirm(sent time.Time, ttlSeconds int64) {
	ttl := time.Duration(ttlSeconds) * time.Second
	s.ttl.Store(int64(ttl))
	raise(&s.heldUntil, int64(sent.Sub(s.base)+ttl))
	raise(&s.answered, int64(time.Since(s.base)))
}

func (s *Session) leaseTTL() time.Duration { return time.Duration(s.ttl.Load()) }

// hold renews the session's lease and closes done when the hold is lost:
// etcd says the lease is gone, no keepalive answer arrives for a whole TTL,
// the controller key (written at revision rev) is deleted or taken, the
// client closes, or ctx ends. The watch notices a revoke at once rather
// than at the next keepalive answer.
func (s *Session) hold(ctx context.Context, key string, rev int64) {
	cli := s.s.cli
	ctx, cancel := context.WithCancel(ctx)
	var once sync.Once
	end := func(string) {
		once.Do(func() { close(s.done) })
		cancel()
	}
	go renewer{cli: cli, lease: s.lease, ttl: s.leaseTTL, confirm: s.confirm, lost: end}.run(ctx)
	gone := s.s.keyGone(ctx, key, s.lease, rev)
	go func() {
		defer end("")
		silence := time.NewTimer(s.silenceLeft(time.Now()))
		defer silence.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-cli.Ctx().Done():
				return
			case <-silence.C:
				left := s.silenceLeft(time.Now())
				if left <= 0 {
					s.redial()
					return
				}
				silence.Reset(left)
			case <-gone:
				return
			}
		}
	}()
}

// silenceLeft is how long, from now, until a whole TTL has passed without
// a keepalive answer.
func (s *Session) silenceLeft(now time.Time) time.Duration {
	return time.Duration(s.answered.Load()+s.ttl.Load()) - now.Sub(s.base)
}

// redial has the store dial etcd anew once the term ended for a whole TTL
// without a keepalive answer: a connection that silent is presumed dead,
// and campaigning again (or revoking the lease once etcd answers) on it
// would wait for TCP to give it up.
func (s *Session) redial() {
	if s.s.redial == nil {
		return
	}
	n := s.s.redial()
	s.s.log.Warn("controller session lost to silence: dialling etcd anew",
		slog.Int("controller_id", int(s.info.ControllerID)), slog.Int("connections_closed", n))
}

// holdLease keeps lease alive and closes done when the hold is lost: the
// lease expires or is revoked, etcd stops answering for a whole TTL, the
// client closes, or ctx ends. It also watches key (written at revision rev)
// so a revoke is noticed at once rather than at the next keepalive reply.
//
// However the hold ends, its keepalive stops: the client renews a lease
// while any KeepAlive context lives, and the owner registers again with a
// new lease, so a lost hold left renewing would keep one lease alive for
// the life of the process per loss. A key deleted or taken by another
// lease leaves the lease holding nothing, so it is revoked too, before done
// closes.
func (s *Store) holdLease(ctx context.Context, lease clientv3.LeaseID, key string, rev int64, done chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	ka, err := s.cli.KeepAlive(ctx, lease)
	if err != nil {
		cancel()
		close(done)
		return
	}
	gone := s.keyGone(ctx, key, lease, rev)
	go func() {
		defer close(done)
		defer cancel()
		for {
			select {
			case _, ok := <-ka:
				if !ok {
					return
				}
			case <-gone:
				cancel()
				s.revoke(lease)
				return
			}
		}
	}()
}

// keyReadRetry spaces out reads of a lease-held key whose watch failed,
// while etcd does not answer them.
const keyReadRetry = time.Second

// keyGone returns a channel closed once key, written at revision rev under
// lease, is deleted or put under another lease. A watch that fails (the
// history compacted while it was cut off, etcd restored from an older
// snapshot) does not end the look-out: the key is read again, and watched
// from that read. Left to the keepalive alone, a key deleted while its
// lease lived on (an operator's delete, a revoke of the lease that failed
// after the key's deletion) went unnoticed for good: the owner renewed a
// lease that held nothing and believed itself registered. Nothing closes
// it once ctx ends or the client closes.
func (s *Store) keyGone(ctx context.Context, key string, lease clientv3.LeaseID, rev int64) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		from := rev + 1
		for {
			left, err := s.watchUntilLeft(ctx, key, lease, from)
			if left {
				close(gone)
				return
			}
			if err == nil || ctx.Err() != nil {
				return // ctx ended or the client closed
			}
			s.log.Warn("the watch on a lease-held key failed: reading the key again",
				slog.String("key", key), slog.Any("err", err))
			held, at, ok := s.readHeld(ctx, key, lease)
			if !ok {
				return
			}
			if !held {
				close(gone)
				return
			}
			from = at + 1
		}
	}()
	return gone
}

// watchUntilLeft watches key from revision from until it leaves lease
// (true), the watch fails (its error), or ctx ends or the client closes
// (false, nil).
func (s *Store) watchUntilLeft(ctx context.Context, key string, lease clientv3.LeaseID, from int64) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for b := range s.liveWatch(ctx, watchRange{key: key}, from) {
		if b.err != nil {
			return false, b.err
		}
		if keyLeftLease(b.events, lease) {
			return true, nil
		}
	}
	return false, nil
}

// readHeld reads whether key is still held by lease, and the revision read
// at, trying until etcd answers; ok is false once ctx ends or the client
// closes.
func (s *Store) readHeld(ctx context.Context, key string, lease clientv3.LeaseID) (held bool, rev int64, ok bool) {
	for {
		rctx, cancel := context.WithTimeout(ctx, s.watchTimeout())
		resp, err := s.cli.Get(rctx, key)
		cancel()
		if err == nil {
			return len(resp.Kvs) == 1 && resp.Kvs[0].Lease == int64(lease), resp.Header.Revision, true
		}
		s.log.Debug("read a lease-held key", slog.String("key", key), slog.Any("err", err))
		select {
		case <-ctx.Done():
			return false, 0, false
		case <-s.cli.Ctx().Done():
			return false, 0, false
		case <-time.After(keyReadRetry):
		}
	}
}

// keyLeftLease reports whether events delete the watched key or put it
// under a lease other than lease.
func keyLeftLease(events []*mvccpb.Event, lease clientv3.LeaseID) bool {
	for _, ev := range events {
		if ev.Type == mvccpb.DELETE || ev.Kv.Lease != int64(lease) {
			return true
		}
	}
	return false
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
