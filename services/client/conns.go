package client

import (
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// connPool holds one *grpc.ClientConn per address. A ClientConn multiplexes
// concurrent calls and reconnects by itself, so one per node is enough.
type connPool struct {
	opts []grpc.DialOption

	mu     sync.Mutex // guards conns and closed
	conns  map[string]*grpc.ClientConn
	closed bool
}

func newConnPool(o Options) *connPool {
	var handlerOpts []otelgrpc.Option
	if o.TracerProvider != nil {
		handlerOpts = append(handlerOpts, otelgrpc.WithTracerProvider(o.TracerProvider))
	}
	bo := grpcbackoff.DefaultConfig
	// A restarted broker comes back on the same address; reconnect soon
	// rather than after gRPC's default backoff of up to two minutes.
	bo.MaxDelay = time.Second
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second}),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(handlerOpts...)),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(o.MaxMessageBytes),
			grpc.MaxCallSendMsgSize(o.MaxMessageBytes),
		),
	}
	if o.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(o.Dialer))
	}
	opts = append(opts, o.DialOptions...)
	return &connPool{opts: opts, conns: map[string]*grpc.ClientConn{}}
}

// get returns the connection to addr, creating it on first use. Creating is
// lazy: nothing is dialed until the first call.
func (p *connPool) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	// passthrough hands the address to the dialer exactly as given, which a
	// network simulator keyed by address relies on.
	cc, err := grpc.NewClient("passthrough:///"+addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	p.conns[addr] = cc
	return cc, nil
}

func (p *connPool) close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = nil, true
	p.mu.Unlock()
	var first error
	for _, cc := range conns {
		if err := cc.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
