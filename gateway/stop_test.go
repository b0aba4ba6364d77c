package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

// A gRPC health Watch on the gateway (client-side health checking, a load
// balancer) does not hold its Stop: Stop returns within its deadline with
// no error. The watch never ends by itself, and Stop waited out its whole
// deadline for it and failed.
func TestStopEndsAnOpenHealthWatch(t *testing.T) {
	tc := startCluster(t)
	o := DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.TLS = tlsconf.Plain()
	o.Controllers = config.StringList(tc.controllers)
	o.Brokers = config.StringList(tc.brokers)
	g, err := Start(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(g.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	w, err := healthpb.NewHealthClient(cc).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := w.Recv(); err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: %v, %v", first, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("Stop with a health watch open: %v", err)
	}
}

// A request body that stalls after its headers is answered 408 once
// bodyReadTimeout passes, and does not hold Stop: it held its goroutine,
// and a graceful stop, for ever.
func TestAStalledRequestBodyIsTimedOut(t *testing.T) {
	old := bodyReadTimeout
	bodyReadTimeout = 300 * time.Millisecond
	t.Cleanup(func() { bodyReadTimeout = old })
	tc := startCluster(t)
	o := DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.TLS = tlsconf.Plain()
	o.Controllers = config.StringList(tc.controllers)
	o.Brokers = config.StringList(tc.brokers)
	g, err := Start(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/topics HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"topics\":", g.Addr())
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive") {
		t.Fatalf("a stalled body: %d %s, want 408 saying the body did not arrive", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}
