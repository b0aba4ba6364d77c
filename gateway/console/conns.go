package console

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
)

var errClosed = errors.New("console is closed")

// connSet holds one connection per address for the two services the Go
// client does not cover: the brokers' FaultInjectionService and the dev
// launcher's DevClusterService.
type connSet struct {
	opts []grpc.DialOption

	mu     sync.Mutex // guards conns and closed
	conns  map[string]*grpc.ClientConn
	closed bool
}

func newConnSet() *connSet {
	bo := backoff.DefaultConfig
	// A restarted broker comes back on the same address: reconnect soon.
	bo.MaxDelay = time.Second
	return &connSet{conns: map[string]*grpc.ClientConn{}, opts: []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second}),
	}}
}

// get returns the connection to addr (dialed lazily on first use).
func (s *connSet) get(addr string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
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

func (c *Console) devClient() (devclusterv1.DevClusterServiceClient, error) {
	cc, err := c.conns.get(c.opts.DevControl)
	if err != nil {
		return nil, err
	}
	return devclusterv1.NewDevClusterServiceClient(cc), nil
}

func (c *Console) faultClient(addr string) (faultv1.FaultInjectionServiceClient, error) {
	cc, err := c.conns.get(addr)
	if err != nil {
		return nil, err
	}
	return faultv1.NewFaultInjectionServiceClient(cc), nil
}
