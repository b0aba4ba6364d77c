package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is the pause before retry number attempt (1-based): exponential
// from base, capped at limit, with ±20% jitter so that clients that failed
// together do not retry together (Kafka's retry.backoff.ms and
// retry.backoff.max.ms).
func backoff(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * jitter)
}

// sleep waits for d or until ctx ends, reporting whether the full pause passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
