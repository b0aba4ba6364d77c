package gateway

import (
	"context"
	"errors"
	"io"
)

// untilStop returns ctx, ended also when the gateway stops: a stream that
// never ends by itself must not keep the HTTP server's graceful shutdown
// waiting.
func untilStop(ctx, stopping context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	unregister := context.AfterFunc(stopping, cancel)
	context.AfterFunc(ctx, func() { unregister() })
	return ctx
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
