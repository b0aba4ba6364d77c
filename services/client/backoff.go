package client

import (
	"context"
	"time"

	"tidemark.io/services/platform/retry"
)

// backoff is the pause before retry number attempt (1-based): the
// platform's one exponential backoff from base to limit with jitter
// (retry.backoff.ms and retry.backoff.max.ms).
func backoff(base, limit time.Duration, attempt int) time.Duration {
	return retry.Backoff{Base: base, Max: limit}.Delay(attempt)
}

// sleep waits for d or until ctx ends, reporting whether the full pause passed.
func sleep(ctx context.Context, d time.Duration) bool { return retry.Sleep(ctx, d) }
