package tlsconf_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/flowcontrol"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// sizeCheck accepts a Check whose service name is want, byte for byte.
type sizeCheck struct {
	healthpb.UnimplementedHealthServer
	want string
}

func (s sizeCheck) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.GetService() != s.want {
		return nil, status.Errorf(codes.DataLoss, "got %d bytes, not the %d sent", len(req.GetService()), len(s.want))
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// countingConn counts the writes to the socket.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// sendLarge makes calls with a 256 KiB request over TLS with the given
// client credentials and tidemark's write buffer, and returns the socket
// writes the client made.
func sendLarge(t *testing.T, addr string, creds credentials.TransportCredentials, payload string, calls int) int64 {
	t.Helper()
	var writes atomic.Int64
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds),
		grpc.WithWriteBufferSize(flowcontrol.WriteBuffer),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &writes}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.DataLoss {
		t.Fatalf("warm-up call: %v", err) // connects and handshakes before counting
	}
	start := writes.Load()
	for range calls {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: payload}); err != nil {
			t.Fatal(err)
		}
	}
	return writes.Load() - start
}

// Large messages arrive intact, in far fewer socket writes than crypto/tls
// makes alone (one per record of at most 16 KiB).
func TestCoalescedTLSWritesFewerTimes(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-1"}, pki.Leaf{Name: "broker-2"}); err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB
	creds, err := pki.Options(dir, "broker-1").ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(srv, sizeCheck{want: payload})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	client, err := pki.Options(dir, "broker-2").Client()
	if err != nil {
		t.Fatal(err)
	}
	const calls = 20
	plain := sendLarge(t, lis.Addr().String(), credentials.NewTLS(client.Clone()), payload, calls)
	coalesced := sendLarge(t, lis.Addr().String(), tlsconf.Credentials(client.Clone()), payload, calls)
	records := int64(calls * len(payload) / (16 << 10))
	if plain < records {
		t.Fatalf("control: crypto/tls alone made %d socket writes for %d records; the test no longer sees what it checks", plain, records)
	}
	if coalesced*4 > plain {
		t.Fatalf("coalesced: %d socket writes, plain crypto/tls %d: want at most a quarter", coalesced, plain)
	}
	t.Logf("%d requests of %d KiB: %d socket writes with plain crypto/tls, %d coalesced", calls, len(payload)>>10, plain, coalesced)
}
