package telemetry

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// forwarder relays TCP connections to a backend. blackhole silences the
// connections open at the time for good: bytes are read and dropped both
// ways, nothing is closed, as when a NAT forgets a flow. Connections
// accepted later flow normally.
type forwarder struct {
	lis     net.Listener
	backend string

	mu       sync.Mutex
	pairs    []*forwardedPair
	accepted int
}

type forwardedPair struct {
	client, server net.Conn
	mu             sync.Mutex
	silent         bool
}

func startForwarder(t *testing.T, backend string) *forwarder {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{lis: lis, backend: backend}
	go f.serve()
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) serve() {
	for {
		c, err := f.lis.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", f.backend)
		if err != nil {
			_ = c.Close()
			continue
		}
		p := &forwardedPair{client: c, server: s}
		f.mu.Lock()
		f.pairs = append(f.pairs, p)
		f.accepted++
		f.mu.Unlock()
		go p.pump(c, s)
		go p.pump(s, c)
	}
}

// pump copies from to to until either closes, dropping what it reads once
// the pair is silent.
func (p *forwardedPair) pump(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && !p.isSilent() {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !p.isSilent() { // a silent flow carries no FIN either
				_ = to.Close()
			}
			return
		}
	}
}

func (p *forwardedPair) isSilent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.silent
}

func (f *forwarder) blackhole() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pairs {
		p.mu.Lock()
		p.silent = true
		p.mu.Unlock()
	}
}

func (f *forwarder) connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted
}

func (f *forwarder) close() {
	_ = f.lis.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pairs {
		_ = p.client.Close()
		_ = p.server.Close()
	}
}

func (r *receiver) got(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestExportsDialAnewWhenTheCollectorGoesSilent: the exporter's connection
// to the collector goes silent without a reset (the collector moved, a NAT
// forgot the flow) while new connections reach it. An export that gets no
// answer before its deadline cuts the connection, so spans ended afterwards
// arrive over a new one instead of timing out until TCP gives up.
func TestExportsDialAnewWhenTheCollectorGoesSilent(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rec := &receiver{}
	coltrace.RegisterTraceServiceServer(srv, rec)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	fwd := startForwarder(t, lis.Addr().String())

	ctx := context.Background()
	var logs lockedBuffer
	tel, err := Setup(ctx, Options{OTLPEndpoint: fwd.lis.Addr().String(), exportTimeout: 300 * time.Millisecond},
		Identity{Service: "tidemark-broker-1", Kind: "broker", NodeID: 1}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Close(ctx) }()
	tracer := tel.Tracer("test")

	// exportUntil ends and flushes spans named name until one arrives.
	exportUntil := func(name string) bool {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			_, span := tracer.Start(ctx, name)
			span.End()
			_ = tel.sdk.ForceFlush(ctx) // bounded by the export timeout
			if rec.got(name) {
				return true
			}
		}
		return false
	}

	if !exportUntil("before") {
		t.Fatal("no span arrived before the silence")
	}
	fwd.blackhole()
	if !exportUntil("after") {
		t.Fatalf("no span ended after the silence arrived within 20 s (%d connections to the collector)", fwd.connections())
	}
	if n := fwd.connections(); n < 2 {
		t.Fatalf("%d connections to the collector, want a new one after the silence", n)
	}
	if n := strings.Count(logs.String(), "did not answer an export in time"); n != 1 {
		t.Fatalf("the cut connection logged %d times, want once:\n%s", n, logs.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
