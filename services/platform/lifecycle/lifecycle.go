// Package lifecycle runs a service until a signal and then shuts it down in
// order, within a deadline.
package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"tidemark.io/services/platform/logging"
)

// DefaultShutdownTimeout bounds a graceful shutdown; past it the process
// stops anyway.
const DefaultShutdownTimeout = 15 * time.Second

// Stopper is something that stops within the context's deadline.
type Stopper interface {
	Stop(ctx context.Context) error
}

// StopFunc adapts a function to Stopper.
type StopFunc func(ctx context.Context) error

// Stop calls f.
func (f StopFunc) Stop(ctx context.Context) error { return f(ctx) }

// SignalContext returns a context cancelled on SIGINT or SIGTERM.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// WaitAndStop blocks until ctx is done (a signal) or failed reports a
// fatal error, then stops s within timeout. It returns the fatal error, or
// the stop error.
func WaitAndStop(ctx context.Context, log *slog.Logger, s Stopper, failed <-chan error, timeout time.Duration) error {
	log = logging.OrDiscard(log)
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	var cause error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", "signal")
	case cause = <-failed:
		log.Error("shutting down", "reason", cause)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	err := s.Stop(stopCtx)
	if errors.Is(stopCtx.Err(), context.DeadlineExceeded) {
		log.Warn("shutdown deadline passed", "timeout", timeout)
	}
	log.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
	return errors.Join(cause, err)
}

// Sequence stops each stopper in order, all within the one context, and joins
// their errors. Order matters: stop accepting work first, then the parts
// that work depends on.
func Sequence(steps ...Stopper) Stopper {
	return StopFunc(func(ctx context.Context) error {
		var errs []error
		for _, s := range steps {
			if s == nil {
				continue
			}
			errs = append(errs, s.Stop(ctx))
		}
		return errors.Join(errs...)
	})
}
