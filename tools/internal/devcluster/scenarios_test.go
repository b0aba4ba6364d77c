package devcluster

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

// fakeScenarios offers "block", which runs until cancelled and then says
// so, and "broken", which fails before its timeline starts.
type fakeScenarios struct {
	cancelled chan struct{}
}

func (fakeScenarios) List() []*devclusterv1.ScenarioInfo {
	return []*devclusterv1.ScenarioInfo{{Name: "block", Title: "runs until cancelled", Note: "§1"}, {Name: "broken"}}
}

func (f fakeScenarios) Run(ctx context.Context, name, _ string, _ Options, emit func(*devclusterv1.RunScenarioResponse)) error {
	if name == "broken" {
		return errors.New("the cluster's launcher does not answer")
	}
	emit(&devclusterv1.RunScenarioResponse{Index: 0, Scenario: name, Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STARTED})
	<-ctx.Done()
	close(f.cancelled)
	emit(&devclusterv1.RunScenarioResponse{Index: 1, Scenario: name, Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED, Error: ctx.Err().Error()})
	return ctx.Err()
}

func serveControl(t *testing.T, sc Scenarios) devclusterv1.DevClusterServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	devclusterv1.RegisterDevClusterServiceServer(srv, &controlService{c: &Cluster{opts: Options{Scenarios: sc}}})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return devclusterv1.NewDevClusterServiceClient(cc)
}

// runErr is the refusal of a RunScenario stream, which arrives with its
// first Recv.
func runErr(ctx context.Context, dc devclusterv1.DevClusterServiceClient, name string) error {
	s, err := dc.RunScenario(ctx, &devclusterv1.RunScenarioRequest{Name: name})
	if err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
}

// One scenario runs at a time, a second is refused naming the first, and
// cancelling the call cancels the run and frees the launcher.
func TestRunScenarioOneAtATimeAndCancel(t *testing.T) {
	f := fakeScenarios{cancelled: make(chan struct{})}
	dc := serveControl(t, f)
	ctx := t.Context()

	err := runErr(ctx, dc, "no-such")
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `no scenario "no-such" (scenarios: block, broken)`) {
		t.Fatalf("unknown scenario: %v; want NOT_FOUND naming it and the scenarios", err)
	}

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	s, err := dc.RunScenario(runCtx, &devclusterv1.RunScenarioRequest{Name: "block"})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Recv(); err != nil || e.GetKind() != devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STARTED {
		t.Fatalf("first event %v, %v; want STARTED", e, err)
	}
	if l, err := dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{}); err != nil || l.GetRunning() != "block" || len(l.GetScenarios()) != 2 {
		t.Fatalf("ListScenarios during the run: %v, %v; want both, block running", l, err)
	}
	err = runErr(ctx, dc, "broken")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "scenario block is running: one scenario at a time") {
		t.Fatalf("second run: %v; want FAILED_PRECONDITION naming block", err)
	}

	cancelRun()
	<-f.cancelled // the run saw the cancellation
	// The launcher takes another run once the cancelled one has returned.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if l.GetRunning() == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running %q after its call was cancelled", l.GetRunning())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A run that fails before its timeline starts still ends with FINISHED.
	s, err = dc.RunScenario(ctx, &devclusterv1.RunScenarioRequest{Name: "broken"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Recv()
	if err != nil || e.GetKind() != devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED || e.GetPassed() ||
		e.GetError() != "the cluster's launcher does not answer" || e.GetScenario() != "broken" {
		t.Fatalf("broken run's event %v, %v; want FINISHED with its error", e, err)
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("after FINISHED: %v, want the end of the stream", err)
	}
}

// A launcher without scenarios says so.
func TestRunScenarioWithoutScenarios(t *testing.T) {
	dc := serveControl(t, nil)
	if _, err := dc.ListScenarios(t.Context(), &devclusterv1.ListScenariosRequest{}); status.Code(err) != codes.Unimplemented ||
		!strings.Contains(err.Error(), "this launcher plays no scenarios") {
		t.Fatalf("ListScenarios: %v; want UNIMPLEMENTED", err)
	}
	if err := runErr(t.Context(), dc, "block"); status.Code(err) != codes.Unimplemented {
		t.Fatalf("RunScenario: %v; want UNIMPLEMENTED", err)
	}
}

// A run played by the CLI holds the launcher's slot: while it holds it,
// RunScenario (the console's Run) is refused naming it, as a hold is while
// the launcher runs one; the slot is free again once the holder's call
// ends.
func TestHoldScenarioRefusesRunsWhileHeld(t *testing.T) {
	f := fakeScenarios{cancelled: make(chan struct{})}
	dc := serveControl(t, f)
	ctx := t.Context()

	holdCtx, release := context.WithCancel(ctx)
	defer release()
	h, err := dc.HoldScenario(holdCtx, &devclusterv1.HoldScenarioRequest{Name: "network-partition"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Recv(); err != nil {
		t.Fatalf("the hold was not taken: %v", err)
	}
	if l, err := dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{}); err != nil || l.GetRunning() != "network-partition" {
		t.Fatalf("ListScenarios while held: %v, %v; want network-partition running", l, err)
	}
	err = runErr(ctx, dc, "block")
	if status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "scenario network-partition is running in `tidemark scenario run`: one scenario at a time") {
		t.Fatalf("run while held: %v; want FAILED_PRECONDITION naming the CLI's run", err)
	}
	h2, err := dc.HoldScenario(ctx, &devclusterv1.HoldScenarioRequest{Name: "follower-lag"})
	if err == nil {
		_, err = h2.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "scenario network-partition is running") {
		t.Fatalf("second hold: %v; want FAILED_PRECONDITION", err)
	}

	release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if l.GetRunning() == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held by %q after its call ended", l.GetRunning())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The other way round: no hold while the launcher runs one.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	s, err := dc.RunScenario(runCtx, &devclusterv1.RunScenarioRequest{Name: "block"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	h3, err := dc.HoldScenario(ctx, &devclusterv1.HoldScenarioRequest{Name: "follower-lag"})
	if err == nil {
		_, err = h3.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "scenario block is running: one scenario at a time") {
		t.Fatalf("hold during the launcher's run: %v; want FAILED_PRECONDITION naming block", err)
	}
	cancelRun()
	<-f.cancelled
}
