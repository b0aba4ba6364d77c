package gateway

import (
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"tidemark.io/services/client"
)

// connSet holds one connection per broker address for the calls the
// gateway makes itself (see router).
type connSet struct {
	opts []grpc.DialOption

	mu     sync.Mutex // guards conns and closed
	conns  map[string]*grpc.ClientConn
	closed bool
}

// newConnSet instruments connections only when tracing is on (tp != nil).
func newConnSet(tp trace.TracerProvider) *connSet {
	bo := backoff.DefaultConfig
	// A restarted broker comes back on the same address; reconnect soon
	// rather than after gRPC's default backoff of up to two minutes.
	bo.MaxDelay = 2 * time.Second
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(client.DefaultMaxMessageBytes),
			grpc.MaxCallSendMsgSize(client.DefaultMaxMessageBytes),
		),
	}
	if tp != nil {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp))))
	}
	return &connSet{opts: opts, conns: map[string]*grpc.ClientConn{}}
}

// get returns the connection to addr, creating it (lazily: nothing is
// dialed until the first call) on first use.
func (s *connSet) get(addr string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped
	}
	if cc, ok := s.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, s.opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	s.conns[addr] = cc
	return cc, nil
}

func (s *connSet) close() {
	s.mu.Lock()
	conns := s.conns
	s.conns, s.closed = nil, true
	s.mu.Unlock()
	for _, cc := range conns {
		_ = cc.Close()
	}
}
