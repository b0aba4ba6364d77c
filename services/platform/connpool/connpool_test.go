package connpool_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/testenv"
)

// silentProxy forwards TCP connections to a target until silence: from
// then on the connections it holds carry nothing either way and stay open,
// as a flow a NAT or firewall forgot (no reset is ever sent); connections
// made later are forwarded again.
type silentProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	links  []*atomic.Bool // each link's "silenced" flag
	conns  []net.Conn
}

func newSilentProxy(t *testing.T, target string) *silentProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{ln: ln, target: target}
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			silenced := &atomic.Bool{}
			p.mu.Lock()
			p.links = append(p.links, silenced)
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go pipe(up, c, silenced)
			go pipe(c, up, silenced)
		}
	}()
	return p
}

func pipe(dst, src net.Conn, silenced *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !silenced.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *silentProxy) silence() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.links {
		s.Store(true)
	}
	return len(p.links)
}

// A connection whose peer fell silent is found dead by its keepalive and
// replaced: calls succeed again through a new connection, where without
// keepalive every call on the old one timed out for as long as the kernel
// kept retransmitting (about 15 minutes).
func TestASilentConnectionIsReplaced(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: waits for a keepalive timeout")
	}
	srv := grpcserver.New(grpcserver.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(context.Background()) })
	proxy := newSilentProxy(t, ln.Addr().String())

	pool := connpool.New() // its own keepalive
	t.Cleanup(func() { _ = pool.Close() })
	cc, err := pool.Get(proxy.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	health := healthpb.NewHealthClient(cc)
	check := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := proxy.silence(); n != 1 {
		t.Fatalf("%d connections through the proxy, want 1", n)
	}
	start := time.Now()
	var errs []error
	bound := 2*connpool.KeepaliveTime + connpool.KeepaliveTimeout + 10*time.Second
	for time.Since(start) < bound {
		err := check(3 * time.Second)
		if err == nil {
			t.Logf("answered again %s after the connection fell silent (%d calls failed first: %v)",
				time.Since(start).Round(time.Millisecond), len(errs), errs)
			proxy.mu.Lock()
			defer proxy.mu.Unlock()
			if len(proxy.links) < 2 {
				t.Fatal("answered without a new connection")
			}
			return
		}
		errs = append(errs, err)
	}
	t.Fatalf("no answer for %s after the connection fell silent: %v", bound, errs)
}
