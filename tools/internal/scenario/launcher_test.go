package scenario

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/platform/testenv"
)

// TestRunScenarioThroughLauncher plays hw-walkthrough through the
// launcher's RunScenario, as the console does, and checks the streamed
// timeline: it starts with the scenario's topic and rule, its indexes run
// in order, waits are checks that held, and it ends with a passing
// verdict; a second run meanwhile is refused, naming the running one.
func TestRunScenarioThroughLauncher(t *testing.T) {
	testenv.SkipIfShort(t, "plays a scenario against a cluster of real processes")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, env, _ := startCluster(ctx, t, Launcher{Options: Options{Wait: 45 * time.Second}}, "")
	conn, err := env.dial(env.Control)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dc := devclusterv1.NewDevClusterServiceClient(conn)

	list, err := dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(list.GetScenarios()); got != len(All()) || list.GetScenarios()[0].GetName() != "hw-walkthrough" ||
		list.GetScenarios()[0].GetNote() != "§3.3" || list.GetRunning() != "" {
		t.Fatalf("ListScenarios = %d scenarios, first %v, running %q; want %d, hw-walkthrough (§3.3), none running",
			got, list.GetScenarios()[0], list.GetRunning(), len(All()))
	}

	// A stream's refusal arrives with its first Recv.
	bad, err := dc.RunScenario(ctx, &devclusterv1.RunScenarioRequest{Name: "no-such"})
	if err == nil {
		_, err = bad.Recv()
	}
	if status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), `no scenario "no-such"`) {
		t.Fatalf("RunScenario(no-such) = %v; want NOT_FOUND naming it", err)
	}

	stream, err := dc.RunScenario(ctx, &devclusterv1.RunScenarioRequest{Name: "hw-walkthrough"})
	if err != nil {
		t.Fatal(err)
	}
	var events []*devclusterv1.RunScenarioResponse
	first, err := stream.Recv()
	if err != nil {
		t.Fatalf("first event: %v", err)
	}
	events = append(events, first)

	// While it runs: listed as running, and a second run is refused.
	list, err = dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{})
	if err != nil || list.GetRunning() != "hw-walkthrough" {
		t.Fatalf("ListScenarios during the run: running %q, %v; want hw-walkthrough", list.GetRunning(), err)
	}
	second, err := dc.RunScenario(ctx, &devclusterv1.RunScenarioRequest{Name: "follower-lag"})
	if err == nil {
		_, err = second.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "scenario hw-walkthrough is running") {
		t.Fatalf("a second RunScenario during the run = %v; want FAILED_PRECONDITION naming hw-walkthrough", err)
	}

	for {
		e, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		events = append(events, e)
	}
	for i, e := range events {
		t.Logf("%d %v %q %q %v", e.GetIndex(), e.GetKind(), e.GetText(), e.GetCheck(), e.GetPassed())
		if e.GetIndex() != int32(i) || e.GetScenario() != "hw-walkthrough" {
			t.Fatalf("event %d has index %d, scenario %q; want %d, hw-walkthrough", i, e.GetIndex(), e.GetScenario(), i)
		}
		if i > 0 && e.GetTimeUnixMs() < events[i-1].GetTimeUnixMs() {
			t.Fatalf("event %d is older than event %d", i, i-1)
		}
	}
	if k := first.GetKind(); k != devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STARTED ||
		!strings.HasPrefix(first.GetTopic(), "scenario-hw-walkthrough-") || first.GetRule() == "" {
		t.Fatalf("first event %v; want STARTED with the topic and the rule", first)
	}
	steps, checks := 0, 0
	for _, e := range events[1 : len(events)-1] {
		switch e.GetKind() {
		case devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STEP:
			steps++
		case devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_CHECK:
			checks++
			if !e.GetPassed() {
				t.Fatalf("check %q failed: %s", e.GetCheck(), e.GetText())
			}
		default:
			t.Fatalf("event %d is %v in the middle of the run", e.GetIndex(), e.GetKind())
		}
	}
	if steps < 4 || checks < 2 {
		t.Fatalf("%d steps and %d checks; want the walk's steps and at least the topic's and the healing's checks", steps, checks)
	}
	last := events[len(events)-1]
	if last.GetKind() != devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED || !last.GetPassed() ||
		len(last.GetFailures()) != 0 || last.GetError() != "" {
		t.Fatalf("last event %v; want FINISHED, passed", last)
	}
	list, err = dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{})
	if err != nil || list.GetRunning() != "" {
		t.Fatalf("ListScenarios after the run: running %q, %v; want none", list.GetRunning(), err)
	}
}
