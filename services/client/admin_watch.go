package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync/atomic"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
)

// WatchCluster streams the cluster's state from the active controller: a
// snapshot first, then one on every change. When the stream breaks with a
// retriable error or the controller steps down, it reconnects (to the
// controller named, if any) and goes on with a fresh snapshot. Iteration
// ends when the caller stops, ctx ends (yielding the error) or an error is
// not retriable.
func (a *Admin) WatchCluster(ctx context.Context, req *adminv1.WatchClusterRequest) iter.Seq2[*adminv1.WatchClusterResponse, error] {
	return func(yield func(*adminv1.WatchClusterResponse, error) bool) {
		var s search
		retries := 0
		for {
			addr := a.target(&s)
			silent, err := a.watchOnce(ctx, addr, req, func(resp *adminv1.WatchClusterResponse) bool {
				retries = 0
				a.setActive(addr)
				return yield(resp, nil)
			})
			if err == errStopped {
				return
			}
			ke := toKerr(err)
			if ctx.Err() != nil {
				yield(nil, ctxError(ctx, ke, "watch cluster"))
				return
			}
			retry, pause := a.redirect(&s, addr, ke, silent)
			if !retry {
				yield(nil, wrap(ke, "watch cluster"))
				return
			}
			if !pause {
				continue
			}
			retries++
			if !sleep(ctx, backoff(a.opts.RetryBackoff, a.opts.RetryBackoffMax, retries)) {
				yield(nil, ctxError(ctx, ke, "watch cluster"))
				return
			}
		}
	}
}

// errStopped says the consumer of the iterator stopped.
var errStopped = errors.New("watch stopped")

// watchOnce follows one stream until it ends; a nil error never returns.
// A controller sends at least every interval, so a stream silent for the
// interval plus the request timeout is ended and reported silent: the
// controller is stopped or cut off, and is passed over like one whose call
// timed out.
func (a *Admin) watchOnce(ctx context.Context, addr string, req *adminv1.WatchClusterRequest, each func(*adminv1.WatchClusterResponse) bool) (silent bool, err error) {
	cc, err := a.pool.get(addr)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	// The silence watch ends with sctx; the iteration goes on (or ends)
	// only once it has.
	watchDone := make(chan struct{})
	defer func() {
		cancel()
		<-watchDone
	}()
	interval := time.Duration(req.GetIntervalMs()) * time.Millisecond
	if interval <= 0 {
		interval = time.Second // the controller's default
	}
	idle := interval + a.opts.RequestTimeout
	// last is when the stream last delivered (0 while the caller holds a
	// message: a slow consumer is not a silent controller).
	var last atomic.Int64
	var quiet atomic.Bool
	last.Store(time.Now().UnixNano())
	go func() {
		defer close(watchDone)
		tick := time.NewTicker(idle / 4)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				if t := last.Load(); t != 0 && time.Since(time.Unix(0, t)) > idle {
					quiet.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	stream, err := adminv1.NewAdminServiceClient(cc).WatchCluster(sctx, req)
	if err != nil {
		return quiet.Load() && ctx.Err() == nil, err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if quiet.Load() && ctx.Err() == nil {
				return true, kerr.New(kerr.RequestTimedOut, "controller %s sent nothing on the watch for %v", addr, idle)
			}
			if errors.Is(err, io.EOF) {
				return false, kerr.New(kerr.NetworkException, "controller %s ended the watch", addr)
			}
			return false, err
		}
		last.Store(0)
		if !each(resp) {
			return false, errStopped
		}
		last.Store(time.Now().UnixNano())
	}
}
