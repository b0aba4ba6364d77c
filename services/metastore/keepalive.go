package metastore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keepAliveReopen is the pause before a broken keepalive stream is opened
// again (the client's own reconnection backoff paces the connection).
const keepAliveReopen = 200 * time.Millisecond

// renewer renews one lease every third of its TTL (etcd's own cadence) on
// one long-lived LeaseKeepAlive stream, opened again whenever it breaks,
// until ctx ends. etcd answers a stream's renewals in order, so each answer
// is matched with its request's send time: etcd renewed the lease no
// earlier than that, and an answer read late (a process frozen after the
// request went out) cannot stretch what it proves.
//
// A stream rather than a call per renewal: an etcd stopping gracefully
// (SIGTERM) refuses new calls at once but serves open streams for up to its
// request timeout (7 s by default), and expires the leases of clients that
// can no longer reach it meanwhile; renewals on an open stream reach it
// until it closes, so the leases are there when it starts again.
type renewer struct {
	cli   *clientv3.Client
	lease clientv3.LeaseID
	// ttl is the lease's TTL as etcd last gave it.
	ttl func() time.Duration
	// confirm hears each answered renewal: when it was sent, and the TTL
	// etcd gave.
	confirm func(sent time.Time, ttlSeconds int64)
	// lost hears that etcd says the lease is gone.
	lost func(why string)
	// broke, if set, hears why a keepalive stream ended before ctx did.
	broke func(why string)
}

func (r renewer) run(ctx context.Context) {
	for ctx.Err() == nil {
		r.renewOn(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(keepAliveReopen):
		}
	}
}

// renewOn runs one keepalive stream until it breaks, goes unanswered for a
// whole TTL (a stalled connection: a new stream is tried), or ctx ends.
func (r renewer) renewOn(ctx context.Context) {
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	stream, err := pb.NewLeaseClient(r.cli.ActiveConnection()).LeaseKeepAlive(sctx)
	if err != nil {
		r.report(ctx, "open: "+err.Error())
		return
	}
	var (
		mu   sync.Mutex
		sent []time.Time // unanswered renewals, oldest first
	)
	broken := make(chan struct{})
	go func() {
		defer close(broken)
		for {
			resp, err := stream.Recv()
			if err != nil {
				r.report(ctx, "receive: "+err.Error())
				return
			}
			mu.Lock()
			var at time.Time
			if len(sent) > 0 {
				at, sent = sent[0], sent[1:]
			}
			mu.Unlock()
			if resp.TTL <= 0 {
				r.lost("etcd says the lease is gone")
				return
			}
			if !at.IsZero() {
				r.confirm(at, resp.TTL)
			}
		}
	}()
	t := time.NewTicker(r.ttl() / 3)
	defer t.Stop()
	for {
		now := time.Now()
		mu.Lock()
		stalled := len(sent) > 0 && now.Sub(sent[0]) > r.ttl()
		if !stalled {
			sent = append(sent, now)
		}
		mu.Unlock()
		if stalled {
			r.report(ctx, "no answer for a whole TTL")
			return
		}
		if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(r.lease)}); err != nil {
			r.report(ctx, "send: "+err.Error())
			return
		}
		select {
		case <-t.C:
		case <-broken:
			return
		case <-ctx.Done():
			return
		}
	}
}

// report hands why a stream ended to broke, unless ctx ended it.
func (r renewer) report(ctx context.Context, why string) {
	if r.broke != nil && ctx.Err() == nil {
		r.broke(why)
	}
}

// raise sets a to v if v is larger.
func raise(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}
