package controller

import (
	"context"
	"log/slog"
	"time"

	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/retry"
)

// keepRegistered keeps this process's <prefix>/controllers/<id> key alive
// until ctx ends, re-registering whenever the lease is lost, so
// DescribeCluster lists standbys too. It deregisters on the way out.
func keepRegistered(ctx context.Context, store *metastore.Store, node metastore.ControllerNode, ttl time.Duration, log *slog.Logger) {
	for ctx.Err() == nil {
		reg, err := store.RegisterController(ctx, node, ttl)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("register controller node; retrying", "err", err)
				_ = retry.Sleep(ctx, time.Second)
			}
			continue
		}
		select {
		case <-reg.Done():
			// A lost registration no longer renews its lease: nothing to close.
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = reg.Close(cctx)
			cancel()
			return
		}
	}
}
