package client

import (
	"context"
	"fmt"

	"tidemark.io/services/platform/kerr"
)

// ErrClosed is returned (wrapped) by calls on a closed Client, Producer,
// Consumer or Admin.
var ErrClosed = kerr.New(kerr.InvalidRequest, "client is closed")

// noClient is a constructor's error for a nil *Client, which reading the
// options would otherwise dereference.
func noClient() error { return kerr.BadField(kerr.InvalidConfig, "client", "no client given") }

// toKerr turns any error from a call into the *kerr.Error the server meant:
// the ErrorDetail when there is one, else the nearest code for the
// transport failure. The caller's own context ending is REQUEST_TIMED_OUT.
func toKerr(err error) *kerr.Error { return kerr.FromCall(err) }

// wrap adds what was being done to a call's error, keeping the *kerr.Error
// reachable with errors.As and kerr.CodeOf.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), toKerr(err))
}

// ctxError reports a call abandoned because ctx ended. It carries the last
// error seen (or REQUEST_TIMED_OUT) and the context's own error, so both
// kerr.CodeOf and errors.Is(err, context.Canceled) work.
func ctxError(ctx context.Context, last error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	ke := toKerr(last)
	if ke == nil {
		ke = kerr.New(kerr.RequestTimedOut, "gave up")
	}
	return fmt.Errorf("%s: %w (%w)", what, ke, context.Cause(ctx))
}
