package replica

import (
	"context"
	"net"
	"sync"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"

	"tidemark.io/services/platform/telemetry"
)

// Peers pools gRPC connections from this broker to other brokers and to
// controllers, one per address. Connections are lazy: gRPC dials on first
// use and redials after failures on its own.
type Peers struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	opts  []grpc.DialOption
}

// NewPeers builds a pool. dial, when set, replaces the TCP dialer (tests
// route through a network simulator with it); tp traces outgoing calls,
// except follower fetches, which the fetcher traces itself.
func NewPeers(dial func(ctx context.Context, addr string) (net.Conn, error), tp trace.TracerProvider) *Peers {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}
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
	return &Peers{conns: map[string]*grpc.ClientConn{}, opts: opts}
}

// Conn returns the pooled connection to addr.
func (p *Peers) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient("passthrough:///"+addr, p.opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Close closes every pooled connection.
func (p *Peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.conns {
		_ = c.Close()
		delete(p.conns, a)
	}
}
