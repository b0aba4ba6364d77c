package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Campaign blocks until this node is the active controller, or ctx ends.
//
// It waits while a controller key exists (a live controller holds it through
// its lease), then in one transaction creates the lease-bound controller key
// if it is still absent and increments controller_epoch, conditioned on the
// epoch key's ModRevision (or its absence). Losing that race just means
// waiting again. leaseTTL is rounded up to whole seconds; etcd raises it to
// its own minimum (about 1.5 × its election timeout).
func (s *Store) Campaign(ctx context.Context, id int32, address string, leaseTTL time.Duration) (*Session, error) {
	var gone time.Time // when this campaign saw a previous controller go
	for {
		cur, err := s.readControllerHeard(ctx)
		if err != nil {
			return nil, err
		}
		if cur.info != nil {
			if err := s.waitDeleted(ctx, s.k.controller(), cur.rev); err != nil {
				return nil, err
			}
			gone = time.Now()
			continue
		}
		sess, err := s.tryElect(ctx, id, address, leaseTTL, cur)
		if sess != nil {
			sess.previousGone = gone
		}
		if err != nil || sess != nil {
			return sess, err
		}
		// Another candidate won the race; wait for it in turn.
	}
}

// readControllerHeard is readController bounded by the watch timeout per
// attempt: a standby whose main connection went silent for good (its
// address changed while it waited) hears the controller go on a watch
// connection of its own, and must not then wait on the dead one for TCP's
// 15 minutes. Unanswered, it dials etcd anew (Options.Redial) and reads
// again; without Redial it waits as long as ctx allows.
func (s *Store) readControllerHeard(ctx context.Context) (controllerView, error) {
	if s.redial == nil {
		return s.readController(ctx)
	}
	for {
		actx, cancel := context.WithTimeout(ctx, s.watchTimeout())
		cur, err := s.readController(actx)
		unanswered := actx.Err() == context.DeadlineExceeded
		cancel()
		if err == nil || ctx.Err() != nil || !unanswered {
			return cur, err
		}
		n := s.redial()
		s.log.Warn("etcd answered no read of the controller key: dialling etcd anew",
			slog.Duration("waited", s.watchTimeout()), slog.Int("connections_closed", n))
	}
}

// controllerView is the controller key and epoch key read at one revision.
type controllerView struct {
	rev      int64
	info     *ControllerInfo
	epoch    int32
	epochRev int64 // 0: the epoch key does not exist yet
}

func (s *Store) readController(ctx context.Context) (controllerView, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.k.controller()), clientv3.OpGet(s.k.controllerEpoch())).Commit()
	if err != nil {
		return controllerView{}, fmt.Errorf("metastore: read controller: %w", err)
	}
	return s.controllerFrom(resp.Header.Revision, resp.Responses[0], resp.Responses[1])
}

// controllerFrom decodes the answers of OpGet(controller) and OpGet(controller_epoch).
func (s *Store) controllerFrom(rev int64, ctrl, epoch *pbResponseOp) (controllerView, error) {
	v := controllerView{rev: rev}
	if kvs := ctrl.GetResponseRange().GetKvs(); len(kvs) > 0 {
		info, err := decode[ControllerInfo](s.k.controller(), kvs[0].Value)
		if err != nil {
			return v, err
		}
		v.info = &info
	}
	if kvs := epoch.GetResponseRange().GetKvs(); len(kvs) > 0 {
		e, err := decodeEpoch(s.k.controllerEpoch(), kvs[0].Value)
		if err != nil {
			return v, err
		}
		v.epoch, v.epochRev = e, kvs[0].ModRevision
	}
	return v, nil
}

// tryElect runs the election transaction once. It returns (nil, nil) if
// another candidate got there first.
func (s *Store) tryElect(ctx context.Context, id int32, address string, ttl time.Duration, cur controllerView) (*Session, error) {
	if cur.epoch == math.MaxInt32 {
		return nil, errors.New("metastore: controller epoch exhausted")
	}
	asked := time.Now() // the lease's TTL runs from no earlier than this
	lease, err := s.cli.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return nil, fmt.Errorf("metastore: grant controller lease: %w", err)
	}
	s.noteTTL(lease.TTL)
	info := ControllerInfo{ControllerID: id, Address: address, Epoch: cur.epoch + 1, ElectedAt: s.stamp()}
	epochCmp := clientv3.Compare(clientv3.CreateRevision(s.k.controllerEpoch()), "=", 0)
	if cur.epochRev != 0 {
		epochCmp = clientv3.Compare(clientv3.ModRevision(s.k.controllerEpoch()), "=", cur.epochRev)
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(s.k.controller()), "=", 0),
		epochCmp,
	).Then(
		clientv3.OpPut(s.k.controller(), encode(info), clientv3.WithLease(lease.ID)),
		clientv3.OpPut(s.k.controllerEpoch(), strconv.Itoa(int(info.Epoch))),
	).Commit()
	if err != nil || !resp.Succeeded {
		s.revoke(lease.ID)
		if err != nil {
			return nil, fmt.Errorf("metastore: election: %w", err)
		}
		return nil, nil
	}
	// Both puts share the transaction's revision: that is the epoch key's
	// ModRevision every fenced write will compare against.
	sess := newSession(s, info, resp.Header.Revision, lease.ID, asked, time.Duration(lease.TTL)*time.Second)
	s.log.Info("elected controller", slog.Int("controller_id", int(id)),
		slog.Int("epoch", int(info.Epoch)), slog.Int64("epoch_revision", sess.epochRev))
	return sess, nil
}

// waitDeleted returns once key has been deleted after revision rev, when the
// watch fails (the caller then reads again), or with ctx's error.
func (s *Store) waitDeleted(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for b := range s.liveWatch(wctx, watchRange{key: key}, rev+1) {
		if b.err != nil {
			break
		}
		for _, ev := range b.events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	// The watch failed (compacted, no raft leader) or ctx ended. Pause so a
	// failing etcd is not polled in a tight loop.
	select {
	case <-time.After(watchRetryPause):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchRetryPause spaces out re-reads after a failed watch.
const watchRetryPause = 100 * time.Millisecond

// ActiveController returns the active controller, or ok=false if there is none.
func (s *Store) ActiveController(ctx context.Context) (info ControllerInfo, ok bool, err error) {
	v, err := s.readController(ctx)
	if err != nil || v.info == nil {
		return ControllerInfo{}, false, err
	}
	return *v.info, true, nil
}

// ControllerEpoch returns the newest controller epoch (0 before the first
// election), whether or not a controller is active now.
func (s *Store) ControllerEpoch(ctx context.Context) (int32, error) {
	v, err := s.readController(ctx)
	return v.epoch, err
}

// revoke drops a lease we hold, best effort: if it fails the lease expires.
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Debug("revoke lease", slog.Int64("lease", int64(id)), slog.Any("err", err))
	}
}

// ttlSeconds rounds d up to whole seconds, at least 1.
func ttlSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}
