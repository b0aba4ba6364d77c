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
//
// A registration lost soon after it was made was taken from it: most
// likely by another process started with the same id (a replacement, or a
// frozen process resuming next to it), which registers again in turn. Each
// such loss pauses the next attempt, doubling up to the TTL, with a warning:
// the two used to take the key from each other as fast as etcd answered,
// some 20 writes a second for as long as both ran.
func keepRegistered(ctx context.Context, store *metastore.Store, node metastore.ControllerNode, ttl time.Duration, log *slog.Logger) {
	contested := retry.Backoff{Base: 100 * time.Millisecond, Max: ttl}
	losses := 0
	for ctx.Err() == nil {
		reg, err := store.RegisterController(ctx, node, ttl)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("register controller node; retrying", "err", err)
				_ = retry.Sleep(ctx, time.Second)
			}
			continue
		}
		began := time.Now()
		select {
		case <-reg.Done():
			// A lost registration no longer renews its lease: nothing to close.
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = reg.Close(cctx)
			cancel()
			return
		}
		if time.Since(began) > 2*ttl {
			// Held for a while, then lost: an expiry (etcd out of reach)
			// or a first taking. Register at once. (Two pauses of the
			// contest reach the TTL and more, with jitter.)
			losses = 0
			continue
		}
		losses++
		pause := contested.Delay(losses)
		log.Warn("controller registration taken away before its lease ran out; is another process running with this controller id?",
			"controller_id", node.ID, "retry_in", pause.Round(time.Millisecond))
		_ = retry.Sleep(ctx, pause)
	}
}
