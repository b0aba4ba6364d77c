package client

import (
	"context"
	"errors"
	"io"
	"iter"

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
			err := a.watchOnce(ctx, addr, req, func(resp *adminv1.WatchClusterResponse) bool {
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
			retry, pause := a.redirect(&s, addr, ke, false)
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
func (a *Admin) watchOnce(ctx context.Context, addr string, req *adminv1.WatchClusterRequest, each func(*adminv1.WatchClusterResponse) bool) error {
	cc, err := a.pool.get(addr)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := adminv1.NewAdminServiceClient(cc).WatchCluster(sctx, req)
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return kerr.New(kerr.NetworkException, "controller %s ended the watch", addr)
			}
			return err
		}
		if !each(resp) {
			return errStopped
		}
	}
}
