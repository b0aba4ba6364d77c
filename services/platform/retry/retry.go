// Package retry is tidemark's one backoff: how long to pause before the
// next attempt of something that failed, and a pause that ends with its
// context. Clients, the gateway, the controller's senders and the
// metastore all space their retries with it.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with jitter: Base before the second
// attempt, doubling after each failure, at most Max, each pause scaled by
// a random factor in [0.8, 1.2) so that callers that failed together do not
// retry together (Kafka's retry.backoff.ms and retry.backoff.max.ms).
type Backoff struct {
	Base, Max time.Duration
}

// Delay is the pause before retry number attempt (1-based).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Base
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// Sleep waits for d or until ctx ends, reporting whether the full pause
// passed.
func Sleep(ctx context.Context, d time.Duration) bool {
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
