package scenario

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/testbin"
)

// logWriter sends the narration to the test log line by line.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// freePortBase finds devcluster.PortSpan consecutive free loopback ports
// below the ephemeral range (platform/loopback).
func freePortBase(t *testing.T) int {
	t.Helper()
	base, err := loopback.FreeRange(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)), devcluster.PortSpan)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// TestScenarios plays every scenario against a dev cluster of separate
// processes started on its own ports, with a short replica.lag.time.max.ms
// and broker session, and fails when one does not go as the note says or
// leaves the cluster unhealthy. TIDEMARK_SCENARIOS names a subset
// (comma-separated).
func TestScenarios(t *testing.T) {
	testenv.SkipIfShort(t, "the scenarios take about two minutes against a cluster of real processes")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cl, env, data := startCluster(ctx, t, nil)
	want := map[string]bool{}
	if s := os.Getenv("TIDEMARK_SCENARIOS"); s != "" {
		for _, n := range strings.Split(s, ",") {
			if _, err := Find(n); err != nil {
				t.Fatalf("TIDEMARK_SCENARIOS: %v", err)
			}
			want[n] = true
		}
	}
	failed := false
	for _, name := range Names() {
		if len(want) > 0 && !want[name] {
			continue
		}
		if failed {
			t.Logf("skipping %s: an earlier scenario failed (node logs in %s)", name, filepath.Join(data, "logs"))
			continue
		}
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			// No LagTime: the scenarios read the brokers' own
			// replica.lag.time.max.ms (5s, a startup flag) from DescribeConfigs.
			res, err := Run(ctx, name, env, Options{Out: logWriter{t}, Explain: true, Wait: 45 * time.Second})
			t.Logf("%s took %s", name, time.Since(start).Round(100*time.Millisecond))
			if err == nil {
				// Every scenario leaves each broker in its own mode.
				for _, n := range cl.Nodes() {
					if extra := n.Proto().GetExtraArgs(); len(extra) > 0 {
						failed = true
						t.Fatalf("%s left %s running with %v", name, n.Name, extra)
					}
				}
			}
			if err != nil {
				failed = true
				t.Fatalf("the run could not be carried out: %v (node logs in %s)", err, filepath.Join(data, "logs"))
			}
			if !res.OK() {
				failed = true
				t.Fatalf("not as the note says: %v (node logs in %s)", res.Failures, filepath.Join(data, "logs"))
			}
		})
	}
}

// startCluster starts a dev cluster of separate processes on its own ports,
// with a short replica.lag.time.max.ms and broker session, and scenarios
// (may be nil) behind its control API; it is stopped when the test ends.
func startCluster(ctx context.Context, t *testing.T, scenarios devcluster.Scenarios) (*devcluster.Cluster, Env, string) {
	t.Helper()
	bin := testbin.Dir(t, filepath.Join("..", "..", ".."), "TIDEMARK_SCENARIO_BIN_DIR")
	data := t.TempDir()
	opts := devcluster.Options{DataDir: data, BinDir: bin, Brokers: 3, Controllers: 2, PortBase: freePortBase(t),
		FaultInjection: true,
		BrokerArgs: []string{"--broker.session.timeout=3s", "--config=replica.lag.time.max.ms=8000",
			"--config=replica.fetch.wait.max.ms=250"},
		// No automatic rebalance: preferred-election shows the manual one.
		ControllerArgs: []string{"--auto.leader.rebalance.enable=false"},
		Scenarios:      scenarios}
	launcherLog, err := os.Create(filepath.Join(data, "launcher.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { launcherLog.Close() })
	cl, err := devcluster.Up(ctx, opts, launcherLog)
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	t.Cleanup(func() { cl.Down(launcherLog) })
	env, err := Discover(ctx, cl.Options().Ports().Control, cl.Options().Security())
	if err != nil {
		t.Fatal(err)
	}
	return cl, env, data
}
