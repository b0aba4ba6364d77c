package gateway

import (
	"errors"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"tidemark.io/gateway/internal/connpool"
	"tidemark.io/services/client"
)

// connSet holds one connection per broker address for the calls the
// gateway makes itself (see router).
type connSet struct{ pool *connpool.Pool }

// newConnSet instruments connections only when tracing is on (tp != nil).
func newConnSet(tp trace.TracerProvider) *connSet {
	return &connSet{pool: connpool.New(tp, grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(client.DefaultMaxMessageBytes),
		grpc.MaxCallSendMsgSize(client.DefaultMaxMessageBytes),
	))}
}

// get returns the connection to addr; a stopping gateway answers errStopped.
func (s *connSet) get(addr string) (*grpc.ClientConn, error) {
	cc, err := s.pool.Get(addr)
	if errors.Is(err, connpool.ErrClosed) {
		return nil, errStopped
	}
	return cc, err
}

func (s *connSet) close() { s.pool.Close() }
