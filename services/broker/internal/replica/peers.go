package replica

import (
	"context"
	"net"
	"sync"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/telemetry"
)

// Peers pools gRPC connections from this broker to other brokers and to
// controllers, one per address (see connpool).
type Peers struct {
	pool *connpool.Pool
	// controllers are the addresses dialled as a controller's, so that an
	// isolation fault knows which connections to cut.
	controllers sync.Map
}

// NewPeers builds a pool. dial, when set, replaces the TCP dialer (tests
// route through a network simulator with it); tp traces outgoing calls,
// except follower fetches, which the fetcher traces itself; creds are the
// transport credentials (tlsconf: mutual TLS as this broker's certificate).
func NewPeers(dial func(ctx context.Context, addr string) (net.Conn, error), tp trace.TracerProvider, creds grpc.DialOption) *Peers {
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)), creds}
	if tp != nil {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(tp),
			otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
				return info.FullMethodName != "/"+telemetry.ReplicaFetchSpan
			}))))
	}
	if dial != nil {
		opts = append(opts, grpc.WithContextDialer(dial))
	}
	return &Peers{pool: connpool.New(opts...)}
}

// Conn returns the pooled connection to the broker at addr.
func (p *Peers) Conn(addr string) (*grpc.ClientConn, error) { return p.pool.Get(addr) }

// Controller returns the pooled connection to the controller at addr.
func (p *Peers) Controller(addr string) (*grpc.ClientConn, error) {
	p.controllers.Store(addr, true)
	return p.pool.Get(addr)
}

// IsController reports whether addr was dialled as a controller's.
func (p *Peers) IsController(addr string) bool {
	_, ok := p.controllers.Load(addr)
	return ok
}

// Close closes every pooled connection.
func (p *Peers) Close() { _ = p.pool.Close() }
