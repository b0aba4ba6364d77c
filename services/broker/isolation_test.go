package broker

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/grpcserver"
)

// While isolated, a controller's request is neither applied nor answered:
// it waits until its caller gives up, then fails as lost. Other calls
// (clients, brokers) and every call once healed are served.
func TestIsolationLosesTheControllersRequests(t *testing.T) {
	f := replica.NewFaults(true)
	lost := controllerRequestsLost(f)
	applied := 0
	handler := func(context.Context, any) (any, error) { applied++; return "applied", nil }
	control := &grpc.UnaryServerInfo{FullMethod: controlv1.BrokerControlService_LeaderAndIsr_FullMethodName}
	produce := &grpc.UnaryServerInfo{FullMethod: "/tidemark.broker.v1.BrokerService/Produce"}

	if _, err := lost(context.Background(), nil, control, handler); err != nil || applied != 1 {
		t.Fatalf("a controller request to a broker not isolated: %v, applied %d times", err, applied)
	}
	if err := f.Isolate(true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := lost(context.Background(), nil, produce, handler); err != nil || applied != 2 {
		t.Fatalf("a client's request to an isolated broker: %v, applied %d times", err, applied-1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the controller gives up
	if _, err := lost(ctx, nil, control, handler); status.Code(err) != codes.Unavailable || applied != 2 {
		t.Fatalf("a controller request the controller gave up on while isolated: %v, applied %v", err, applied > 2)
	}

	if err := f.Isolate(false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := lost(context.Background(), nil, control, handler); err != nil || applied != 3 {
		t.Fatalf("a controller request once healed: %v", err)
	}
}

// Clear ends the isolation, as `tidemark fault clear` promises; a broker
// without fault injection refuses to be isolated.
func TestClearEndsTheIsolation(t *testing.T) {
	f := replica.NewFaults(true)
	if err := f.Isolate(true, false); err != nil {
		t.Fatal(err)
	}
	_, changed := f.Isolation()
	if err := f.Clear(); err != nil {
		t.Fatal(err)
	}
	if isolated, _ := f.Isolation(); isolated {
		t.Fatal("still isolated after Clear")
	}
	select {
	case <-changed:
	default:
		t.Fatal("Clear did not wake the traffic held on the isolation")
	}
	if err := replica.NewFaults(false).Isolate(true, false); err == nil {
		t.Fatal("a broker without fault injection was isolated")
	}
}

// The controller's fast-failover probe (a health check of the broker's
// incarnation service) goes unanswered while the broker is isolated, as
// across a real partition: it fails once the controller gives up, and one
// held when the isolation heals fails as lost, not as an answer. Every
// other health check (a container's, an operator's) is still answered.
func TestIsolationLosesTheControllersHealthProbe(t *testing.T) {
	f := replica.NewFaults(true)
	arrived := make(chan struct{}, 8) // a probe reached the isolation's interceptor
	arrival := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if fromController(req, info) {
			arrived <- struct{}{}
		}
		return h(ctx, req)
	}
	// A probe without a deadline is held on the isolation (the one with
	// a deadline below may reach the server after its caller gave up).
	waiting := make(chan struct{}, 8)
	onHeld := func(ctx context.Context) {
		if _, ok := ctx.Deadline(); !ok {
			waiting <- struct{}{}
		}
	}
	srv := grpcserver.New(grpcserver.Options{Unary: []grpc.UnaryServerInterceptor{arrival, controllerRequestsHeld(f, onHeld)}})
	const epoch = 7
	srv.SetServing(grpcserver.IncarnationService(epoch), true)
	srv.SetServing("", true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(context.Background()) })
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	check := func(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		return resp.GetStatus(), err
	}
	probe := grpcserver.IncarnationService(epoch)
	if st, err := check(context.Background(), probe); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the controller's probe of a broker not isolated: %v, %v", st, err)
	}
	<-arrived

	if err := f.Isolate(true, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	st, err := check(ctx, probe)
	cancel()
	if err == nil {
		t.Fatalf("the controller's probe of an isolated broker was answered %v", st)
	}
	<-arrived
	if st, err := check(context.Background(), ""); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the whole server's health check on an isolated broker: %v, %v; want SERVING", st, err)
	}

	held := make(chan error, 1)
	go func() {
		_, err := check(context.Background(), probe)
		held <- err
	}()
	<-arrived
	<-waiting // held on the isolation until it heals (healing before it looked would let it through)
	if err := f.Isolate(false, false); err != nil {
		t.Fatal(err)
	}
	if err := <-held; status.Code(err) != codes.Unavailable {
		t.Fatalf("a probe held until the isolation healed: %v, want UNAVAILABLE (lost)", err)
	}
	if st, err := check(context.Background(), probe); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the controller's probe once healed: %v, %v", st, err)
	}
}

// An isolation with peers cuts the replication links both ways: what this
// broker sends to any other broker is lost (its fetches, its answers), and
// what they send waits until the isolation heals. Without peers, and once
// healed (HealIsolation or Clear), only the links cut one by one are.
func TestIsolationWithPeersCutsEveryLinkBothWays(t *testing.T) {
	f := replica.NewFaults(true)
	if _, err := f.CutLink(3); err != nil {
		t.Fatal(err)
	}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	peersCut := func(want bool) {
		t.Helper()
		for _, to := range []int32{2, 4} {
			if got := f.LinkCut(to); got != want {
				t.Errorf("link to broker %d cut: %v, want %v", to, got, want)
			}
			if err := f.AwaitLink(expired, to); (err != nil) != want {
				t.Errorf("an answer to broker %d: %v, want held %v", to, err, want)
			}
		}
		if err := f.AwaitArrival(expired); (err != nil) != want {
			t.Errorf("a request from another broker: %v, want held %v", err, want)
		}
		if got := f.IsolatedFromPeers(); got != want {
			t.Errorf("IsolatedFromPeers %v, want %v", got, want)
		}
		if !f.LinkCut(3) {
			t.Error("the link cut by CutLink is up")
		}
	}
	peersCut(false)
	if err := f.Isolate(true, false); err != nil {
		t.Fatal(err)
	}
	peersCut(false)
	_, changed := f.Isolation()
	if err := f.Isolate(true, true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("cutting the peers too did not wake the traffic held on the links")
	}
	peersCut(true)
	if err := f.Isolate(false, false); err != nil {
		t.Fatal(err)
	}
	peersCut(false)
	if err := f.Isolate(false, true); err != nil || f.IsolatedFromPeers() {
		t.Fatalf("peers cut without an isolation: %v, %v", err, f.IsolatedFromPeers())
	}
	if err := f.Isolate(true, true); err != nil {
		t.Fatal(err)
	}
	if err := f.Clear(); err != nil {
		t.Fatal(err)
	}
	if f.IsolatedFromPeers() || f.LinkCut(2) || f.LinkCut(3) {
		t.Fatal("Clear left links cut")
	}
}
