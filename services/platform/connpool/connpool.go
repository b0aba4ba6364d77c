// Package connpool keeps one gRPC connection per address: the Go client's
// connections to brokers and controllers, a broker's to its peers, the
// console's to the services the client does not wrap. A ClientConn
// multiplexes concurrent calls and reconnects by itself, so one per node is
// enough. Connections are lazy (nothing is dialled until the first call) and
// reconnect soon after a node restarts on the same address.
package connpool

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"tidemark.io/services/platform/flowcontrol"
	"tidemark.io/services/platform/wirecodec"
)

// Keepalive pings a connection that heard nothing for KeepaliveTime and
// closes it when the ping is not answered within KeepaliveTimeout, so the
// next call dials anew. Without it a connection whose peer went silently
// (a NAT or firewall that forgot the flow, a host gone without a reset)
// stayed "ready": every call on it timed out, retries included, until the
// kernel gave the socket up about 15 minutes later. Servers accept pings
// every 5 s (grpcserver's enforcement policy); 10 s stays above that.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 5 * time.Second
)

// Keepalive is the dial option every tidemark client connection carries
// (Pool's included): KeepaliveTime and KeepaliveTimeout, idle connections
// pinged too.
func Keepalive() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true})
}

// ErrClosed is returned by Get after Close.
var ErrClosed = errors.New("connection pool is closed")

// Pool holds the connections.
type Pool struct {
	opts []grpc.DialOption

	mu     sync.Mutex // guards conns and closed
	conns  map[string]*grpc.ClientConn
	closed bool
}

// New makes a pool of connections; extra adds dial options (tracing,
// message size limits, a dialer, and transport credentials: a
// grpc.WithTransportCredentials in extra replaces the plaintext default,
// since later dial options win).
func New(extra ...grpc.DialOption) *Pool {
	bo := backoff.DefaultConfig
	// A restarted node comes back on the same address; reconnect soon
	// rather than after gRPC's default backoff of up to two minutes.
	bo.MaxDelay = time.Second
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(wirecodec.Codec{})),
		Keepalive(),
	}
	opts = append(opts, flowcontrol.DialOptions()...)
	return &Pool{opts: append(opts, extra...), conns: map[string]*grpc.ClientConn{}}
}

// Get returns the connection to addr, creating it on first use.
func (p *Pool) Get(addr string) (*grpc.ClientConn, error) {
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

// Close closes every connection, all at once; later Gets fail with
// ErrClosed. gRPC gives a connection up to 5 s to take its GOAWAY, so one
// after another a client cut off from three brokers (or a broker from its
// peers) waited 15 s.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = nil, true
	p.mu.Unlock()
	errs := make([]error, 0, len(conns))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, cc := range conns {
		wg.Go(func() {
			err := cc.Close()
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
