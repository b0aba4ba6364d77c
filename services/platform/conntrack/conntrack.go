// Package conntrack records the connections a client dials, so that they
// can be cut and the client dials anew.
package conntrack

import (
	"context"
	"net"
	"strings"
	"sync"
)

// Conns records the connections a client dials (Dialer), so that Close can
// cut them and the client dials anew. gRPC calls a connection ready until
// its socket fails, and a connection whose packets vanish (this end's
// address changed, a NAT or firewall forgot the flow) fails only after
// TCP's 15 minutes of retransmissions. The etcd clients and the trace
// exporter have no gRPC keepalive; their users decide when a connection is
// dead (metastore's Options.Redial, telemetry's connCutter).
type Conns struct {
	mu   sync.Mutex
	open map[*trackedConn]struct{}
}

// NewConns returns an empty set.
func NewConns() *Conns { return &Conns{open: map[*trackedConn]struct{}{}} }

// Dialer wraps next (nil: a plain TCP dial, or a Unix socket's for
// unix:path) so that every connection it opens is recorded until it closes.
func (c *Conns) Dialer(next func(ctx context.Context, addr string) (net.Conn, error)) func(ctx context.Context, addr string) (net.Conn, error) {
	if next == nil {
		next = dialEndpoint
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := next(ctx, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: nc, set: c}
		c.mu.Lock()
		c.open[tc] = struct{}{}
		c.mu.Unlock()
		return tc, nil
	}
}

// Close closes every recorded connection that is still open and returns
// how many it closed. The client's next call dials again.
func (c *Conns) Close() int {
	c.mu.Lock()
	open := make([]*trackedConn, 0, len(c.open))
	for tc := range c.open {
		open = append(open, tc)
	}
	c.mu.Unlock()
	for _, tc := range open {
		_ = tc.Close()
	}
	return len(open)
}

// dialEndpoint dials host:port, or unix:path (as etcd's client resolves a
// Unix socket endpoint).
func dialEndpoint(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return d.DialContext(ctx, "unix", path)
	}
	return d.DialContext(ctx, "tcp", addr)
}

type trackedConn struct {
	net.Conn
	set  *Conns
	once sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.set.mu.Lock()
		delete(t.set.open, t)
		t.set.mu.Unlock()
	})
	return t.Conn.Close()
}
