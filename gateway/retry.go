package gateway

import (
	"context"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/retry"
)

// reroutable reports whether another look at the partition's leader (or
// the controller) may fix an answer: the kerr table's Reroute column.
func reroutable(c kerr.Code) bool { return c.Reroute() }

// pacer spaces the retries of one call and ends them when the retry
// budget is spent: exponential backoff from 100 ms to 1 s with ±20%
// jitter, like the client package's retry.backoff.ms.
type pacer struct {
	budget  time.Duration
	began   time.Time
	attempt int
}

func newPacer(budget time.Duration) *pacer { return &pacer{budget: budget, began: time.Now()} }

// wait sleeps before the next attempt; false means give up (budget spent
// or ctx done).
func (p *pacer) wait(ctx context.Context) bool {
	p.attempt++
	d := retry.Backoff{Base: client.DefaultRetryBackoff, Max: client.DefaultRetryBackoffMax}.Delay(p.attempt)
	if time.Since(p.began)+d > p.budget {
		return false
	}
	return retry.Sleep(ctx, d)
}

// asKerr turns an upstream error into the *kerr.Error it stands for: the
// ErrorDetail a service sent, or the nearest code for a transport failure
// or an ended context.
func asKerr(err error) *kerr.Error { return kerr.FromCall(err) }
