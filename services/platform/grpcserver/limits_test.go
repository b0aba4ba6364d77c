package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/connlimit"
	"tidemark.io/services/platform/kerr"
)

func start(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	s := New(o)
	s.MarkAllServing()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s, lis.Addr().String()
}

func client(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func TestAdmitRefusesBeforeDecodingWithItsOwnError(t *testing.T) {
	var seen []int
	_, addr := start(t, Options{Admit: func(wire []byte, msg any) error {
		if _, ok := msg.(*healthpb.HealthCheckRequest); !ok {
			return nil
		}
		seen = append(seen, len(wire))
		if len(wire) > 8 {
			return kerr.BadField(kerr.MessageTooLarge, "service", "%d encoded bytes, at most 8", len(wire))
		}
		return nil
	}})
	c := client(t, addr)
	_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "a-long-service-name"})
	if status.Code(err) == codes.Internal {
		t.Fatalf("refusal surfaced as INTERNAL: %v", err)
	}
	e := kerr.FromStatus(err)
	if e == nil || e.Code != kerr.MessageTooLarge || e.Field != "service" || !strings.Contains(e.Message, "21 encoded bytes, at most 8") {
		t.Fatalf("refusal = %v (%+v), want MESSAGE_TOO_LARGE on service naming 21 bytes", err, e)
	}
	// An admitted request decodes and is served as before.
	resp, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("admitted Check = %v, %v", resp, err)
	}
	if len(seen) != 2 || seen[0] != 21 || seen[1] != 0 {
		t.Fatalf("admit saw sizes %v, want [21 0]", seen)
	}
}

func TestStreamsPerConnectionAreBounded(t *testing.T) {
	_, addr := start(t, Options{Limits: Limits{MaxConcurrentStreams: 1}})
	c := client(t, addr)
	wctx, stopWatch := context.WithCancel(context.Background())
	w, err := c.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil { // the stream is open: it holds the only slot
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a second call on a connection with one stream allowed got %v, want it held back (DeadlineExceeded)", err)
	}
	stopWatch()
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("after the stream ended: %v", err)
	}
}

func TestConnectionsPerIPAreBoundedAndCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, addr := start(t, Options{Registerer: reg, Limits: Limits{MaxConcurrentStreams: 10, MaxConnectionsPerIP: 1}})
	c := client(t, addr)
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = extra.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("second connection from 127.0.0.1 read %v, want it closed", err)
	}
	if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("second connection: %v", err)
	}
	if n := testutil.ToFloat64(s.refused.WithLabelValues("max.connections.per.ip")); n != 1 {
		t.Fatalf("tidemark_connections_refused_total = %v, want 1", n)
	}
	// The first connection is unaffected.
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestLimitsValidate(t *testing.T) {
	for l, want := range map[Limits]string{
		{MaxConcurrentStreams: 0}:                                              "--max.concurrent.streams.per.connection",
		{MaxConcurrentStreams: 1, MaxConnectionsPerIP: -1}:                     "--max.connections.per.ip",
		{MaxConcurrentStreams: 1, MaxConnectionsPerIPOverrides: "localhost:1"}: "not an IP address",
	} {
		err := l.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%+v) = %v, want it to name %q", l, err, want)
		}
	}
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
}

// A client reconnecting in a loop past max.connections.per.ip is counted
// each time but warned about once per connlimit.RefusedWarnEvery: it cannot flood
// the log.
func TestRefusedConnectionsAreWarnedOncePerAddress(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	s, addr := start(t, Options{Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Limits: Limits{MaxConcurrentStreams: 10, MaxConnectionsPerIP: 1}})
	c := client(t, addr)
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	const attempts = 5
	for range attempts {
		extra, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = extra.Read(make([]byte, 1))
		extra.Close()
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("connection over the limit read %v, want it closed", err)
		}
	}
	if n := testutil.ToFloat64(s.refused.WithLabelValues("max.connections.per.ip")); n != attempts {
		t.Fatalf("tidemark_connections_refused_total = %v, want %d", n, attempts)
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 1 {
		t.Fatalf("%d warnings for %d refusals within %v, want 1:\n%s", n, attempts, connlimit.RefusedWarnEvery, logs)
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
