package cli_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/scenario"
	"tidemark.io/tools/internal/testbin"
)

// One scenario runs at a time: `tidemark scenario run` plays in the CLI
// process, so before playing it takes the launcher's scenario slot and is
// refused, naming the running one, while the launcher plays one (the
// console's Scenarios panel); while the CLI plays, the launcher's
// RunScenario (the console's Run) is refused naming it. Two runs would
// kill, pause and heal the same nodes.
func TestScenarioRunAndLauncherRefuseEachOther(t *testing.T) {
	testenv.SkipIfShort(t, "starts a dev cluster of real processes")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := testbin.Dir(t, filepath.Join("..", "..", ".."), "TIDEMARK_SCENARIO_BIN_DIR")
	data := t.TempDir()
	base, err := loopback.FreeRange(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)), devcluster.PortSpan)
	if err != nil {
		t.Fatal(err)
	}
	opts := devcluster.Options{DataDir: data, BinDir: bin, Brokers: 3, Controllers: 2, PortBase: base, FaultInjection: true,
		BrokerArgs:     []string{"--broker.session.timeout.ms=3000", "--config=replica.lag.time.max.ms=8000"},
		ControllerArgs: []string{"--auto.leader.rebalance.enable=false"},
		Scenarios:      scenario.Launcher{Options: scenario.Options{Wait: 45 * time.Second}}}
	lg, _ := os.Create(filepath.Join(data, "launcher.log"))
	defer lg.Close()
	cl, err := devcluster.Up(ctx, opts, lg)
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	defer cl.Down(lg)
	control := cl.Options().Ports().Control
	sec := cl.Options().Security()
	dial, err := sec.DialOption()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(control, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dc := devclusterv1.NewDevClusterServiceClient(conn)

	// The console's run: follower-lag lasts replica.lag.time.max.ms and more.
	runCtx2, stopRun := context.WithCancel(ctx)
	defer stopRun()
	stream, err := dc.RunScenario(runCtx2, &devclusterv1.RunScenarioRequest{Name: "follower-lag"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("the launcher's run did not start: %v", err)
	}
	finished := make(chan string, 1)
	go func() {
		for {
			e, err := stream.Recv()
			if err != nil {
				finished <- "stream ended: " + err.Error()
				return
			}
			if e.GetKind() == devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED {
				finished <- e.GetText()
				return
			}
		}
	}()
	list, err := dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{})
	if err != nil || list.GetRunning() != "follower-lag" {
		t.Fatalf("ListScenarios: running %q, %v", list.GetRunning(), err)
	}

	// The CLI's run meanwhile, bounded: a refusal comes at once.
	cctx, ccancel := context.WithTimeout(ctx, 8*time.Second)
	defer ccancel()
	r := runCtx(cctx, nil, "", "scenario", "run", "hw-walkthrough", "--control", control,
		"--tls.ca", sec.CA, "--tls.cert", sec.Cert, "--tls.key", sec.Key)
	select {
	case f := <-finished:
		t.Logf("the launcher's follower-lag run ended: %s", f)
	case <-time.After(90 * time.Second):
		t.Logf("the launcher's follower-lag run had not ended 90s later")
	}
	if r.code == 0 || !strings.Contains(r.err, "follower-lag") || strings.Contains(r.out, "scenario hw-walkthrough:") {
		t.Fatalf("scenario run while the launcher plays follower-lag: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
	}

	// The other way round: the CLI plays, the launcher refuses a run.
	waitRunning := func(want string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			l, err := dc.ListScenarios(ctx, &devclusterv1.ListScenariosRequest{})
			if err == nil && l.GetRunning() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the launcher's running scenario is %q (%v), want %q", l.GetRunning(), err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitRunning("")
	cliCtx, stopCLI := context.WithCancel(ctx)
	defer stopCLI()
	cliDone := make(chan result, 1)
	go func() {
		cliDone <- runCtx(cliCtx, nil, "", "scenario", "run", "follower-lag", "--control", control,
			"--tls.ca", sec.CA, "--tls.cert", sec.Cert, "--tls.key", sec.Key)
	}()
	waitRunning("follower-lag")
	err = runErr(ctx, dc, "hw-walkthrough")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "scenario follower-lag is running in `tidemark scenario run`") {
		t.Fatalf("the launcher's run while the CLI plays follower-lag: %v; want FAILED_PRECONDITION naming it", err)
	}
	stopCLI()
	select {
	case r := <-cliDone:
		t.Logf("the CLI's follower-lag run, cancelled: exit %d", r.code)
	case <-time.After(90 * time.Second):
		t.Fatal("the CLI's run did not end 90s after it was cancelled")
	}
	waitRunning("")
}

// runErr is the refusal of a RunScenario stream, which arrives with its
// first Recv (nil: the run began).
func runErr(ctx context.Context, dc devclusterv1.DevClusterServiceClient, name string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := dc.RunScenario(ctx, &devclusterv1.RunScenarioRequest{Name: name})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}
