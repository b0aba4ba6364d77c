package grpcserver

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/authz/authztest"
	"tidemark.io/services/platform/kerr"
)

// healthImpl lets a test make the handler do anything.
type healthImpl struct {
	healthpb.UnimplementedHealthServer
	fn func() (*healthpb.HealthCheckResponse, error)
}

func (h healthImpl) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return h.fn()
}

func serve(t *testing.T, fn func() (*healthpb.HealthCheckResponse, error)) healthpb.HealthClient {
	t.Helper()
	// A bare server with the same interceptors, so a custom Health impl can
	// stand in for a tidemark handler.
	s := New(Options{})
	inner := grpc.NewServer(grpc.ChainUnaryInterceptor(recoverUnary(s.log), errorsUnary(s.log)))
	healthpb.RegisterHealthServer(inner, healthImpl{fn: fn})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = inner.Serve(lis) }()
	t.Cleanup(inner.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func TestPanicBecomesInternalNotACrash(t *testing.T) {
	c := serve(t, func() (*healthpb.HealthCheckResponse, error) { panic("boom") })
	_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Internal {
		t.Fatalf("panic answered %v, want Internal", err)
	}
	// The server survives.
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
		t.Fatalf("second call: %v", err)
	}
}

func TestKafkaErrorsMapThroughTheTable(t *testing.T) {
	c := serve(t, func() (*healthpb.HealthCheckResponse, error) {
		return nil, kerr.New(kerr.NotEnoughReplicas, "isr 1 below min.insync.replicas 2")
	})
	_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code %v", status.Code(err))
	}
	if e := kerr.FromStatus(err); e.Code != kerr.NotEnoughReplicas || !e.Code.Retriable() {
		t.Fatalf("detail %+v", e)
	}
}

func TestHealthAndGracefulStop(t *testing.T) {
	s := New(Options{})
	s.MarkAllServing()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Stop(ctx)
	if err := <-done; err != nil {
		t.Fatalf("Serve after Stop: %v", err)
	}
}

// A TLS listener always authorizes: given no authorizer, the server uses
// the defaults (no ACLs, super user admin), and an authorizer built for
// plaintext is a programming error caught at construction.
func TestTLSNeverRunsWithoutAuthorization(t *testing.T) {
	certs := authztest.New(t, "broker-1")
	creds, err := certs.Options("broker-1").ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Credentials: creds})
	controlv1.RegisterBrokerControlServiceServer(s, controlv1.UnimplementedBrokerControlServiceServer{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Server.Stop)
	_, err = controlv1.NewBrokerControlServiceClient(certs.Dial(t, lis.Addr().String(), "broker-2")).StopReplica(context.Background(), &controlv1.StopReplicaRequest{ControllerId: 1})
	authztest.WantRefused(t, err, kerr.ClusterAuthorizationFailed, "User:broker-2 may not send StopReplica as controller 1")

	plain, err := authz.New(authz.Options{Config: authz.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "authorizer built for plaintext") {
			t.Fatalf("TLS with a plaintext authorizer: recovered %v, want a panic naming the mismatch", r)
		}
	}()
	New(Options{Credentials: creds, Authorizer: plain})
}
