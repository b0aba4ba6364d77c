package scenario

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/testbin"
)

// hwTraceLink is the narration's link to the trace of the fetch that
// advanced the HW last.
var hwTraceLink = regexp.MustCompile(`the fetch that advanced the HW last: (http://\S+)/trace/([0-9a-f]{32})`)

// checkHWTraceLink follows the narration's trace link into the cluster's
// Jaeger: the trace must be there, with the fetch's span in it.
func checkHWTraceLink(ctx context.Context, t *testing.T, jaegerBin, narration string) {
	t.Helper()
	if jaegerBin == "" {
		testenv.Unavailable(t, "Jaeger (.bin/jaeger)", "`make thirdparty` builds it (`make test` does), or set TIDEMARK_JAEGER_BIN")
		return
	}
	m := hwTraceLink.FindStringSubmatch(narration)
	if m == nil {
		t.Fatalf("the narration links no trace of an HW-advancing fetch:\n%s", narration)
	}
	api := m[1] + "/api/traces/" + m[2]
	deadline := time.Now().Add(20 * time.Second)
	for {
		body, status, err := httpGet(ctx, api)
		if err == nil && status == http.StatusOK && strings.Contains(body, m[2]) && strings.Contains(body, "ReplicaFetch") {
			t.Logf("trace %s is in Jaeger (%s)", m[2], api)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the linked trace is not in Jaeger: GET %s: status %d, err %v, body %.300s", api, status, err, body)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func httpGet(ctx context.Context, url string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

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
	jaeger := testenv.FindJaeger()
	cl, env, data := startCluster(ctx, t, nil, jaeger)
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
			var out bytes.Buffer
			res, err := Run(ctx, name, env, Options{Out: io.MultiWriter(logWriter{t}, &out), Explain: true, Wait: 45 * time.Second})
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
			if name == "hw-walkthrough" {
				checkHWTraceLink(ctx, t, jaeger, out.String())
			}
		})
	}
}

// startCluster starts a dev cluster of separate processes on its own ports,
// with a short replica.lag.time.max.ms and broker session, and scenarios
// (may be nil) behind its control API; it is stopped when the test ends.
func startCluster(ctx context.Context, t *testing.T, scenarios devcluster.Scenarios, jaegerBin string) (*devcluster.Cluster, Env, string) {
	t.Helper()
	bin := testbin.Dir(t, filepath.Join("..", "..", ".."), "TIDEMARK_SCENARIO_BIN_DIR")
	data := t.TempDir()
	opts := devcluster.Options{DataDir: data, BinDir: bin, Brokers: 3, Controllers: 2, PortBase: freePortBase(t),
		FaultInjection: true,
		BrokerArgs: []string{"--broker.session.timeout.ms=3000", "--config=replica.lag.time.max.ms=8000",
			"--config=replica.fetch.wait.max.ms=250"},
		// No automatic rebalance: preferred-election shows the manual one.
		ControllerArgs: []string{"--auto.leader.rebalance.enable=false"},
		Scenarios:      scenarios,
		Jaeger:         jaegerBin != "", JaegerBin: jaegerBin}
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
