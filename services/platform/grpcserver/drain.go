package grpcserver

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// What a graceful stop waits for. grpc's GracefulStop waits until every
// connection is closed, and a connection closes only once its peer has
// acknowledged the GOAWAY and ended its streams. A frozen peer (a process
// under SIGSTOP, a host gone quiet) never does, so a stop waited for its
// deadline whenever one was frozen, and what came after the drain (a
// broker's deregistration) found no time left. The server therefore counts
// the calls it is serving: a unary call until it returns, a stream while
// its handler runs and is not waiting in RecvMsg for the peer's next
// message. Once nothing has been served for drainLinger (answers already
// written have reached any live peer by then), the connections left are
// closed.

// drainLinger is how long nothing must be served before the connections
// still open are closed.
const drainLinger = 300 * time.Millisecond

// drainPoll is how often a stopping server looks at the count.
const drainPoll = 25 * time.Millisecond

// serving counts the calls a server is serving (see above).
type serving struct{ n atomic.Int64 }

func (c *serving) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		c.n.Add(1)
		defer c.n.Add(-1)
		return h(ctx, req)
	}
}

func (c *serving) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		c.n.Add(1)
		defer c.n.Add(-1)
		return h(srv, &countedStream{ServerStream: ss, c: c})
	}
}

// countedStream takes its call out of the count while it waits for the
// peer. A handler whose own goroutine reads the stream while it works on
// earlier messages counts as waiting: the drain's linger covers the work
// it has in hand once the server tells it to stop.
type countedStream struct {
	grpc.ServerStream
	c *serving
}

func (s *countedStream) RecvMsg(m any) error {
	s.c.n.Add(-1)
	defer s.c.n.Add(1)
	return s.ServerStream.RecvMsg(m)
}

// drain waits for done (grpc's GracefulStop returned) and closes the
// connections left once nothing has been served for drainLinger, or when
// ctx ends. It returns why it closed them, "" when GracefulStop finished.
func (s *Server) drain(ctx context.Context, done <-chan struct{}) string {
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	var idleSince time.Time
	for {
		select {
		case <-done:
			return ""
		case <-ctx.Done():
			return "deadline"
		case now := <-tick.C:
			if s.serving.n.Load() > 0 {
				idleSince = time.Time{}
				continue
			}
			if idleSince.IsZero() {
				idleSince = now
			}
			if now.Sub(idleSince) >= drainLinger {
				return "idle"
			}
		}
	}
}
