package devcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/platform/testenv"
)

func fakeBinDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"broker", "controller", "gateway"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The plan must match the documented ports, or the README's commands and the
// playbooks point at nothing.
func TestPlanUsesDocumentedPorts(t *testing.T) {
	o := DefaultOptions()
	o.BinDir = fakeBinDir(t)
	o.Racks = []string{"rack-a", "rack-b"}
	nodes, err := o.plan()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"controller-1": "127.0.0.1:9190", "controller-2": "127.0.0.1:9191",
		"broker-1": "127.0.0.1:9092", "broker-2": "127.0.0.1:9093", "broker-3": "127.0.0.1:9094",
		"gateway": "127.0.0.1:8080",
	}
	if len(nodes) != len(want) {
		t.Fatalf("%d nodes, want %d", len(nodes), len(want))
	}
	for _, n := range nodes {
		if want[n.Name] != n.Addr {
			t.Errorf("%s on %s, want %s", n.Name, n.Addr, want[n.Name])
		}
		args := strings.Join(n.Args, " ")
		if n.Kind == "broker" {
			if !strings.Contains(args, "--etcd.endpoints 127.0.0.1:2379") || !strings.Contains(args, "--fault.injection.enable") {
				t.Errorf("%s args %q", n.Name, args)
			}
		}
		if n.Name == "broker-3" && !slices.Contains(n.Args, "rack-a") {
			t.Errorf("broker-3 should get rack-a round-robin: %q", args)
		}
	}
	o.Brokers = 0
	if _, err := o.plan(); err == nil || !strings.Contains(err.Error(), "--brokers") {
		t.Errorf("0 brokers: %v", err)
	}
	o = DefaultOptions()
	o.BinDir = t.TempDir()
	if _, err := o.plan(); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("missing binaries should say how to build them: %v", err)
	}
}

// A port base moves every port, so a test's cluster never meets a
// developer's `make run` on the documented ones.
func TestPlanWithPortBase(t *testing.T) {
	o := DefaultOptions()
	o.BinDir = fakeBinDir(t)
	o.PortBase = 31000
	nodes, err := o.plan()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"controller-1": {"127.0.0.1:31010", "127.0.0.1:31030"}, "controller-2": {"127.0.0.1:31011", "127.0.0.1:31031"},
		"broker-1": {"127.0.0.1:31020", "127.0.0.1:31040"}, "broker-3": {"127.0.0.1:31022", "127.0.0.1:31042"},
		"gateway": {"127.0.0.1:31002", "127.0.0.1:31006"},
	}
	for _, n := range nodes {
		args := strings.Join(n.Args, " ")
		if strings.Contains(args, ":2379") || strings.Contains(args, ":9299") || strings.Contains(args, ":909") || strings.Contains(args, ":919") {
			t.Errorf("%s still names a documented port: %q", n.Name, args)
		}
		if n.Kind != "gateway" && !strings.Contains(args, "--etcd.endpoints 127.0.0.1:31000") {
			t.Errorf("%s does not use the moved etcd: %q", n.Name, args)
		}
		if n.Kind == "gateway" && !strings.Contains(args, "--console.dev.control 127.0.0.1:31001") {
			t.Errorf("gateway does not use the moved control address: %q", args)
		}
		if n.MetricsAddr != "" && !strings.Contains(args, "--metrics.listen "+n.MetricsAddr) {
			t.Errorf("%s does not serve /metrics on %s: %q", n.Name, n.MetricsAddr, args)
		}
		w, ok := want[n.Name]
		if !ok {
			continue
		}
		if n.Addr != w[0] || n.MetricsAddr != w[1] {
			t.Errorf("%s on %s (metrics %s), want %s (metrics %s)", n.Name, n.Addr, n.MetricsAddr, w[0], w[1])
		}
		if n.Name == "broker-3" && (n.KafkaAddr != "127.0.0.1:31052" || !strings.Contains(args, "--kafka.listen 127.0.0.1:31052")) {
			t.Errorf("broker-3's Kafka listener on %s (%q), want 127.0.0.1:31052", n.KafkaAddr, args)
		}
	}
	o.PortBase = 65500
	if _, err := o.plan(); err == nil || !strings.Contains(err.Error(), "--port-base") {
		t.Errorf("a port base past 65535: %v", err)
	}
}

// With Profiles, every broker and controller serves its profiles on a
// loopback address of its own; without, none does.
func TestPlanWithProfiles(t *testing.T) {
	o := DefaultOptions()
	o.BinDir = fakeBinDir(t)
	o.PortBase = 31000
	nodes, err := o.plan()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.ProfileAddr != "" || slices.Contains(n.Args, "--pprof.listen") {
			t.Errorf("%s serves profiles without Profiles: %q", n.Name, n.Args)
		}
	}
	o.Profiles = true
	if nodes, err = o.plan(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, n := range nodes {
		i := slices.Index(n.Args, "--pprof.listen")
		if n.Kind == "gateway" {
			if i >= 0 || n.ProfileAddr != "" {
				t.Errorf("the gateway got --pprof.listen: %q", n.Args)
			}
			continue
		}
		if i < 0 || n.Args[i+1] != n.ProfileAddr || !strings.HasPrefix(n.ProfileAddr, "127.0.0.1:") {
			t.Errorf("%s: --pprof.listen in %q, ProfileAddr %q: want one loopback address, the same in both", n.Name, n.Args, n.ProfileAddr)
			continue
		}
		if other, dup := seen[n.ProfileAddr]; dup {
			t.Errorf("%s and %s share %s", other, n.Name, n.ProfileAddr)
		}
		seen[n.ProfileAddr] = n.Name
	}
	if len(seen) != 5 {
		t.Errorf("%d nodes serve profiles, want the 2 controllers and 3 brokers", len(seen))
	}
}

// With links, every broker and controller listens behind the proxy on its
// advertised address and reaches etcd through a proxy of its own.
func TestPlanWithLinks(t *testing.T) {
	o := DefaultOptions()
	o.BinDir = fakeBinDir(t)
	o.Links = true
	if _, err := o.plan(); err == nil || !strings.Contains(err.Error(), "port base") {
		t.Errorf("links without a port base: %v", err)
	}
	o.PortBase = 31000
	nodes, err := o.plan()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"controller-1": {"--etcd.endpoints 127.0.0.1:31080", "--listen 127.0.0.1:31060"},
		"controller-2": {"--etcd.endpoints 127.0.0.1:31081", "--listen 127.0.0.1:31061"},
		"broker-1":     {"--etcd.endpoints 127.0.0.1:31070", "--listen 127.0.0.1:31050"},
		"broker-3":     {"--etcd.endpoints 127.0.0.1:31072", "--listen 127.0.0.1:31052"},
	}
	for _, n := range nodes {
		args := strings.Join(n.Args, " ")
		if w, ok := want[n.Name]; ok {
			if !strings.Contains(args, w[0]) || !strings.Contains(args, w[1]) || !strings.Contains(args, "--advertised.address "+n.Addr) {
				t.Errorf("%s (address %s) args %q, want %q, %q and the address advertised", n.Name, n.Addr, args, w[0], w[1])
			}
		}
	}
	o.PortBase = 65500 - PortSpan
	if _, err := o.plan(); err == nil || !strings.Contains(err.Error(), "--port-base") {
		t.Errorf("a port base whose linked span passes 65535: %v", err)
	}
}

func TestNodeStopKillPauseResume(t *testing.T) {
	bin := testenv.RequireFile(t, "/bin/sleep", "sleep", "install coreutils")
	n := &Node{Name: "sleeper", Binary: bin, Args: []string{"30"}, LogPath: filepath.Join(t.TempDir(), "log")}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err == nil {
		t.Error("second Start of a running node should fail")
	}
	if err := n.Pause(); err != nil || n.State() != devclusterv1.NodeState_NODE_STATE_PAUSED {
		t.Fatalf("pause: %v %v", err, n.State())
	}
	if err := n.Resume(); err != nil || n.State() != devclusterv1.NodeState_NODE_STATE_RUNNING {
		t.Fatalf("resume: %v %v", err, n.State())
	}
	if err := n.Stop(5 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if n.State() != devclusterv1.NodeState_NODE_STATE_STOPPED || n.Proto().Pid != 0 {
		t.Fatalf("after stop: %v pid %d", n.State(), n.Proto().Pid)
	}
	if err := n.Kill(); err == nil {
		t.Error("kill of a stopped node should fail")
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
}

// A start with extra arguments launches the node with its original flags plus
// those, reports them, and the next start without any goes back to the
// original flags: a broker restarted in another mode for a scenario returns to
// its normal mode with a plain restart.
func TestNodeActionStartWithExtraArgs(t *testing.T) {
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	script := filepath.Join(dir, "node")
	// Records its arguments (one per line), then waits to be stopped.
	body := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + ".tmp && mv " + argsFile + ".tmp " + argsFile + "\nexec sleep 30\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: "broker-2", Binary: script, Args: []string{"--broker.id", "2"}, LogPath: filepath.Join(dir, "log")}
	svc := &controlService{c: &Cluster{nodes: []*Node{n}}}
	t.Cleanup(func() { _ = n.Kill() })
	ctx := t.Context()
	launchedWith := func() []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(argsFile); err == nil {
				_ = os.Remove(argsFile)
				return strings.Fields(string(b))
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the node never recorded its arguments")
		return nil
	}
	act := func(a devclusterv1.Action, extra ...string) (*devclusterv1.DevNode, error) {
		resp, err := svc.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: "broker-2", Action: a, ExtraArgs: extra})
		return resp.GetNode(), err
	}

	mode := "--config=replica.truncation.mode=high-watermark"
	got, err := act(devclusterv1.Action_ACTION_START, mode)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.GetExtraArgs(), []string{mode}) {
		t.Errorf("start reports extra args %q, want [%s]", got.GetExtraArgs(), mode)
	}
	if a := launchedWith(); !slices.Equal(a, []string{"--broker.id", "2", mode}) {
		t.Errorf("launched with %q, want the original flags then %s", a, mode)
	}
	l, _ := svc.ListNodes(ctx, &devclusterv1.ListNodesRequest{})
	if i := slices.IndexFunc(l.GetNodes(), func(n *devclusterv1.DevNode) bool { return n.GetName() == "broker-2" }); i < 0 ||
		!slices.Equal(l.GetNodes()[i].GetExtraArgs(), []string{mode}) {
		t.Errorf("status shows %v, want broker-2 with extra args [%s]", l.GetNodes(), mode)
	}
	// Extra arguments belong to a start: any other action refuses them.
	if _, err := act(devclusterv1.Action_ACTION_KILL, mode); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "extra_args") {
		t.Errorf("kill with extra args: %v, want InvalidArgument naming extra_args", err)
	}
	if _, err := act(devclusterv1.Action_ACTION_RESTART, " "); status.Code(err) != codes.InvalidArgument {
		t.Errorf("restart with an empty argument: %v, want InvalidArgument", err)
	}
	got, err = act(devclusterv1.Action_ACTION_RESTART)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetExtraArgs()) != 0 {
		t.Errorf("a restart without extra args still reports %q", got.GetExtraArgs())
	}
	if a := launchedWith(); !slices.Equal(a, []string{"--broker.id", "2"}) {
		t.Errorf("restart without extra args launched with %q, want the original flags only", a)
	}
}

// A profile address is probed free before any node binds, so the probe
// may hand out a port the cluster's own nodes are about to take (it once
// gave controller-1's metrics port, and controller-1 never started): those
// are refused.
func TestPlanProfilesAvoidTheClustersOwnPorts(t *testing.T) {
	o := DefaultOptions()
	o.BinDir = fakeBinDir(t)
	o.PortBase = 31000
	o.Profiles = true
	taken := o.withPorts().Ports().ControllerMetrics[0]
	next := 32000
	defer func(f func() (string, error)) { freeAddr = f }(freeAddr)
	freeAddr = func() (string, error) {
		if next%2 == 0 { // every other probe offers the taken port
			next++
			return taken, nil
		}
		next++
		return fmt.Sprintf("127.0.0.1:%d", next), nil
	}
	nodes, err := o.plan()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.ProfileAddr == taken {
			t.Errorf("%s serves profiles on %s, controller-1's metrics port", n.Name, taken)
		}
	}
}

// Every node gets the GOMAXPROCS the plan chose: explicit, else the
// launcher's own, else the cores shared among the brokers; and a started
// node sees it in its environment.
func TestNodesShareTheCores(t *testing.T) {
	o := DefaultOptions()
	o.BinDir = fakeBinDir(t)
	t.Setenv("GOMAXPROCS", "")
	if got, want := o.Procs(), max(1, runtime.NumCPU()/o.Brokers); got != want {
		t.Errorf("default: GOMAXPROCS %d, want cores/brokers = %d", got, want)
	}
	if SharedProcs(3) < 1 || SharedProcs(1<<20) != 1 || SharedProcs(0) != runtime.NumCPU() {
		t.Errorf("SharedProcs: %d %d %d", SharedProcs(3), SharedProcs(1<<20), SharedProcs(0))
	}
	t.Setenv("GOMAXPROCS", "7")
	if got := o.Procs(); got != 7 {
		t.Errorf("with GOMAXPROCS=7 in the environment: %d", got)
	}
	o.ProcsPerNode = 5
	nodes, err := o.plan()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if !slices.Equal(n.Env, []string{"GOMAXPROCS=5"}) {
			t.Errorf("%s env %q, want GOMAXPROCS=5", n.Name, n.Env)
		}
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	script := filepath.Join(dir, "node")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$GOMAXPROCS\" > "+out+".tmp && mv "+out+".tmp "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: "broker-1", Binary: script, Env: nodes[0].Env, LogPath: filepath.Join(dir, "log")}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(out)
		if err == nil {
			if got := strings.TrimSpace(string(b)); got != "5" {
				t.Fatalf("the node saw GOMAXPROCS=%q, want 5", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the node never wrote its environment")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
