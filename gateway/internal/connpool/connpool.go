// Package connpool keeps one gRPC connection per address for the services
// the Go client does not wrap, which the console calls itself: the brokers'
// FaultInjectionService and the dev launcher's DevClusterService.
// Connections are lazy, reconnect soon after a node restarts on the same
// address, and are traced only when tracing is on.
package connpool

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// ErrClosed is returned by Get after Close.
var ErrClosed = errors.New("connection pool is closed")

// Pool holds the connections.
type Pool struct {
	opts []grpc.DialOption

	mu     sync.Mutex // guards conns and closed
	conns  map[string]*grpc.ClientConn
	closed bool
}

// New makes a pool; tp non-nil instruments its connections, extra adds
// dial options (message size limits, say).
func New(tp trace.TracerProvider, extra ...grpc.DialOption) *Pool {
	bo := backoff.DefaultConfig
	// A restarted node comes back on the same address; reconnect soon
	// rather than after gRPC's default backoff of up to two minutes.
	bo.MaxDelay = time.Second
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second}),
	}
	if tp != nil {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp))))
	}
	return &Pool{opts: append(opts, extra...), conns: map[string]*grpc.ClientConn{}}
}

// Get returns the connection to addr, creating it on first use (nothing is
// dialed until the first call).
func (p *Pool) Get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	p.conns[addr] = cc
	return cc, nil
}

// Close closes every connection; later Gets fail with ErrClosed.
func (p *Pool) Close() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = nil, true
	p.mu.Unlock()
	for _, cc := range conns {
		_ = cc.Close()
	}
}
