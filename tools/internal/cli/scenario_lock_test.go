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

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/scenario"
	"tidemark.io/tools/internal/testbin"
)

// One scenario runs at a time: `tidemark scenario run` plays in the CLI
// process, so before playing it asks the launcher whether it plays one (the
// console's Scenarios panel) and refuses, naming it, as RunScenario does;
// two runs would kill, pause and heal the same nodes.
func TestScenarioRunRefusedWhileLauncherRunsOne(t *testing.T) {
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
}
