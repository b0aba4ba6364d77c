package console

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
)

type slowFaults struct {
	faultv1.UnimplementedFaultInjectionServiceServer
	slow atomic.Bool
}

func (s *slowFaults) ListFaults(ctx context.Context, _ *faultv1.ListFaultsRequest) (*faultv1.ListFaultsResponse, error) {
	if s.slow.Load() { // a paused broker, or one slow to answer on a busy machine
		select {
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &faultv1.ListFaultsResponse{Faults: []*faultv1.FetchFault{{Topic: "t", Partition: -1, Stall: true}}}, nil
}

// The page shows the fetch faults injected on each broker. One ListFaults
// that does not answer within auxTimeout (1 s: a paused broker the
// controller still counts alive, a busy machine) wipes the broker's faults
// from every page although they are still injected: the view says "no
// fault" where it only does not know.
func TestAnUnansweredFaultPollDoesNotClearTheFaults(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sf := &slowFaults{}
	srv := grpc.NewServer()
	faultv1.RegisterFaultInjectionServiceServer(srv, sf)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	old := fakeBrokerAddr
	fakeBrokerAddr = lis.Addr().String()
	t.Cleanup(func() { fakeBrokerAddr = old })

	f, c, hs := startFakeCtl(t, Options{WatchInterval: time.Second, StaleAfter: 3 * time.Second, EnableActions: true})
	_ = openEvents(t, hs.URL)
	faults := func() int {
		s := c.hub.current()
		if s == nil || len(s.Brokers) == 0 {
			return -1
		}
		return len(s.Brokers[0].Faults)
	}
	// The feeder reads fakeBrokerAddr, which a cleanup puts back: it must
	// be gone before the cleanups run.
	stop, fed := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-fed }()
	go func() { // the controller's snapshot every interval
		defer close(fed)
		for i := int64(0); ; i++ {
			select {
			case f.msgs <- watchMsg("t", 5):
			case <-stop:
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); faults() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the injected fault never showed (faults %d)", faults())
		}
		time.Sleep(50 * time.Millisecond)
	}
	sf.slow.Store(true) // still injected; the broker is only slow to say so
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n := faults(); n != 1 {
			t.Fatalf("one unanswered ListFaults poll: the view now shows broker 1 with %d faults, while its stall is still injected", n)
		}
	}
}
