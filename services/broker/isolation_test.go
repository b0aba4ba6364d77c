package broker

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
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
	if err := f.Isolate(true); err != nil {
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

	if err := f.Isolate(false); err != nil {
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
	if err := f.Isolate(true); err != nil {
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
	if err := replica.NewFaults(false).Isolate(true); err == nil {
		t.Fatal("a broker without fault injection was isolated")
	}
}
