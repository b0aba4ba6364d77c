package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/metastore/embedded"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/pki"
	"tidemark.io/tools/internal/devcluster/links"
)

// Options describe the cluster to launch. Ports are the documented defaults.
type Options struct {
	DataDir     string
	BinDir      string
	Brokers     int
	Controllers int
	// Racks are assigned to brokers round-robin; empty means no racks.
	Racks []string
	// EtcdClient is the embedded etcd's client address.
	EtcdClient string
	// ControlAddr serves the DevClusterService (`tidemark dev kill ...`).
	ControlAddr string
	// OTLPEndpoint, when set, sends every service's traces there.
	OTLPEndpoint string
	// Jaeger starts a Jaeger (OTLP on 4317, API on 16686, or PortBase+3 and
	// +4) and sends every
	// service's traces to it.
	Jaeger    bool
	JaegerBin string
	// FaultInjection turns on the brokers' fault-injection API.
	FaultInjection bool
	// Extra flags for every broker, e.g. --replica.lag.time.max.ms=10000.
	BrokerArgs []string
	// Extra flags for every controller, e.g. --auto.leader.rebalance.enable=false.
	ControllerArgs []string
	// PortBase, when set, moves every port of the cluster into
	// [PortBase, PortBase+PortSpan) (see Ports), so that several clusters,
	// or a test's cluster beside a developer's `make run`, never collide.
	// It overrides EtcdClient and ControlAddr. Zero keeps the documented
	// ports.
	PortBase int
	// Links puts a TCP proxy (tools/internal/devcluster/links) in front of
	// every broker and controller, which listen on ports of their own and
	// advertise the proxy's, and gives each of them its own proxy to etcd,
	// so a test can cut any node from the others or from etcd
	// (Cluster.Links). Needs a PortBase; the cluster then takes
	// 2*PortSpan ports (see Ports). Off by default.
	Links bool
	// Plaintext runs every link without TLS (`tidemark dev up
	// --plaintext`). Off, Up makes a CA and certificates in PKIDir and every
	// node, the launcher's control API and the launcher's own calls use
	// mutual TLS.
	Plaintext bool
	// PlaintextEtcd runs etcd without TLS and without authentication. By
	// default etcd serves TLS only, wants a client certificate (its Common
	// Name is the etcd user) and has auth on, with the roles of
	// metastore/etcdauth; the certificates are in <DataDir>/pki. A data
	// dir whose etcd has auth on cannot go back to plaintext.
	PlaintextEtcd bool
	// Profiles gives every broker and controller a --pprof.listen on a free
	// loopback port (Node.ProfileAddr), for profiling under load.
	Profiles bool
	// Authorizer guards the DevClusterService (Describe on Cluster to list,
	// Alter on Cluster to act). Nil with TLS on: the operator (admin) and
	// the gateway's console only; with Plaintext, nil serves it unguarded.
	Authorizer *authz.Authorizer
	// ProcsPerNode is the GOMAXPROCS of every process the cluster starts.
	// Zero: the GOMAXPROCS of the launcher's environment if set, else
	// SharedProcs(Brokers).
	ProcsPerNode int
	// Scenarios plays the learning note's scenarios for the control API's
	// ListScenarios and RunScenario (the console's Scenarios panel). Nil:
	// the launcher offers none (UNIMPLEMENTED).
	Scenarios Scenarios
}

// PortSpan is how many consecutive ports a cluster with a PortBase takes.
const PortSpan = 60

// Span is how many consecutive ports from PortBase the cluster takes.
func (o Options) Span() int {
	if o.Links {
		return 2 * PortSpan
	}
	return PortSpan
}

// Ports are the addresses a planned cluster listens on.
type Ports struct {
	EtcdClient, Control, Gateway, GatewayMetrics string
	// Jaeger's OTLP receiver, query API/UI and gRPC query service (used
	// with Options.Jaeger).
	JaegerOTLP, JaegerQuery, JaegerQueryGRPC string
	// Indexed from 0: controller-1 is Controllers[0]. Controllers and
	// Brokers are the addresses the nodes advertise and everyone dials.
	Controllers, ControllerMetrics []string
	Brokers, BrokerMetrics         []string
	// BrokerKafka are the brokers' Kafka wire protocol listeners: the
	// bootstrap addresses for kcat, franz-go, sarama or librdkafka.
	BrokerKafka []string
	// Where the processes listen and reach etcd: with Links, ports behind
	// the proxies (the proxies listen on Controllers and Brokers); without,
	// Controllers, Brokers and EtcdClient.
	ControllerListen, BrokerListen []string
	ControllerEtcd, BrokerEtcd     []string
}

// Ports lays out the cluster's addresses: the documented ones (brokers
// 9092.., controllers 9190.., metrics 9292.., 9390.. and 9490 (gateway),
// Kafka listeners 29092.., gateway 8080), or, with a PortBase b: etcd b,
// control b+1, gateway b+2, Jaeger b+3..b+5, gateway metrics b+6,
// controllers b+10.., brokers b+20.., controller metrics
// b+30.., broker metrics b+40.., Kafka listeners b+50...
// With Links, the brokers listen on b+50.., the controllers on b+60.., the
// brokers' and controllers' etcd proxies are b+70.. and b+80.., and the
// Kafka listeners (not behind the proxies: clients dial them directly)
// move to b+90...
func (o Options) Ports() Ports {
	at := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	p := Ports{EtcdClient: o.EtcdClient, Control: o.ControlAddr, Gateway: at(8080), GatewayMetrics: at(9490),
		JaegerOTLP: JaegerOTLP, JaegerQuery: JaegerQuery, JaegerQueryGRPC: at(16685)}
	ctl, ctlMetrics, brk, brkMetrics, kafka := 9190, 9390, 9092, 9292, 29092
	linked := o.Links && o.PortBase > 0
	if o.PortBase > 0 {
		b := o.PortBase
		p.EtcdClient, p.Control, p.Gateway = at(b), at(b+1), at(b+2)
		p.JaegerOTLP, p.JaegerQuery, p.JaegerQueryGRPC = at(b+3), at(b+4), at(b+5)
		p.GatewayMetrics = at(b + 6)
		ctl, brk, ctlMetrics, brkMetrics, kafka = b+10, b+20, b+30, b+40, b+50
		if linked {
			kafka = b + 90
		}
	}
	for i := range o.Controllers {
		p.Controllers = append(p.Controllers, at(ctl+i))
		p.ControllerMetrics = append(p.ControllerMetrics, at(ctlMetrics+i))
		if linked {
			p.ControllerListen = append(p.ControllerListen, at(o.PortBase+60+i))
			p.ControllerEtcd = append(p.ControllerEtcd, at(o.PortBase+80+i))
		} else {
			p.ControllerListen = append(p.ControllerListen, at(ctl+i))
			p.ControllerEtcd = append(p.ControllerEtcd, p.EtcdClient)
		}
	}
	for i := range o.Brokers {
		p.Brokers = append(p.Brokers, at(brk+i))
		p.BrokerMetrics = append(p.BrokerMetrics, at(brkMetrics+i))
		p.BrokerKafka = append(p.BrokerKafka, at(kafka+i))
		if linked {
			p.BrokerListen = append(p.BrokerListen, at(o.PortBase+50+i))
			p.BrokerEtcd = append(p.BrokerEtcd, at(o.PortBase+70+i))
		} else {
			p.BrokerListen = append(p.BrokerListen, at(brk+i))
			p.BrokerEtcd = append(p.BrokerEtcd, p.EtcdClient)
		}
	}
	return p
}

// all lists every address of the layout.
func (p Ports) all() []string {
	out := []string{p.EtcdClient, p.Control, p.Gateway, p.GatewayMetrics, p.JaegerOTLP, p.JaegerQuery, p.JaegerQueryGRPC}
	for _, l := range [][]string{p.Controllers, p.ControllerMetrics, p.Brokers, p.BrokerMetrics, p.BrokerKafka,
		p.ControllerListen, p.BrokerListen, p.ControllerEtcd, p.BrokerEtcd} {
		out = append(out, l...)
	}
	return out
}

// freeAddr probes for a free loopback address (a seam for tests).
var freeAddr = loopback.FreeAddr

// withPorts resolves the PortBase into EtcdClient and ControlAddr.
func (o Options) withPorts() Options {
	if o.PortBase > 0 {
		p := o.Ports()
		o.EtcdClient, o.ControlAddr = p.EtcdClient, p.Control
	}
	return o
}

// DefaultOptions is the README's dev cluster: 3 brokers on 9092-9094, 2
// controllers on 9190-9191, the gateway on 8080 and etcd on 2379.
func DefaultOptions() Options {
	return Options{
		DataDir:        ".data",
		Brokers:        3,
		Controllers:    2,
		EtcdClient:     "127.0.0.1:2379",
		ControlAddr:    DefaultControlAddr,
		FaultInjection: true,
	}
}

// DefaultControlAddr is where `tidemark dev` commands find the launcher.
const DefaultControlAddr = "127.0.0.1:9299"

// Cluster is a launched dev cluster.
type Cluster struct {
	opts   Options
	etcdMu sync.Mutex
	etcd   *embedded.Server // nil while stopped (StopEtcd)
	nodes  []*Node
	ctl    *grpc.Server
	links  *links.Net
	// actions runs one node action at a time and ends them at Down.
	actions actionLock
	// stopGrace bounds a node's graceful stop before SIGKILL (0: 30 s).
	stopGrace time.Duration
	// runs is the scenario running through the control API.
	runs scenarioRuns
	// hurry is closed by Hurry: stops in progress and to come kill at once.
	hurryOnce, hurryClose sync.Once
	hurry                 chan struct{}
	// dirLock holds the data dir (launcher.lock) until Down or the
	// process ends.
	dirLock *os.File
}

func (o Options) plan() ([]*Node, error) {
	o = o.withPorts()
	var nodes []*Node
	if o.Jaeger {
		j, err := o.jaegerNode()
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, j)
		if o.OTLPEndpoint == "" {
			o.OTLPEndpoint = o.Ports().JaegerOTLP
			if !o.Plaintext {
				o.OTLPEndpoint = "https://" + o.OTLPEndpoint // mutual TLS, each service's own certificate
			}
		}
	}
	if o.Brokers < 1 || o.Brokers > 9 {
		return nil, fmt.Errorf("--brokers must be 1..9, got %d", o.Brokers)
	}
	if o.Controllers < 1 || o.Controllers > 9 {
		return nil, fmt.Errorf("--controllers must be 1..9, got %d", o.Controllers)
	}
	if o.PortBase < 0 || o.PortBase+o.Span() > 65536 || (o.PortBase > 0 && o.PortBase < 1024) {
		return nil, fmt.Errorf("--port-base must be 1024..%d (or 0 for the documented ports), got %d", 65536-o.Span(), o.PortBase)
	}
	if o.Links && o.PortBase == 0 {
		return nil, errors.New("links need a port base (the proxies take the documented ports' places and the nodes listen behind them)")
	}
	ports := o.Ports()
	logs := filepath.Join(o.DataDir, "logs")
	common := func(name, etcd string, args ...string) []string {
		args = append(args, "--etcd.endpoints", etcd)
		args = append(args, o.tlsArgs(name)...)
		if !o.PlaintextEtcd {
			dir := o.PKIDir()
			args = append(args, "--etcd.tls.ca", pki.CAPath(dir),
				"--etcd.tls.cert", pki.CertPath(dir, name), "--etcd.tls.key", pki.KeyPath(dir, name))
		}
		if o.OTLPEndpoint != "" {
			args = append(args, "--otel.endpoint", o.OTLPEndpoint)
		}
		return args
	}
	// A probed port is free now, but may be one the cluster's own nodes
	// bind a moment later (a controller's metrics port, say): those are
	// taken from the start, and no two nodes may get the same one.
	profileAddrs := map[string]bool{}
	for _, a := range ports.all() {
		profileAddrs[a] = true
	}
	profile := func(args []string) ([]string, string, error) {
		if !o.Profiles {
			return args, "", nil
		}
		for {
			addr, err := freeAddr()
			if err != nil {
				return nil, "", err
			}
			if !profileAddrs[addr] {
				profileAddrs[addr] = true
				return append(args, "--pprof.listen", addr), addr, nil
			}
		}
	}
	var controllers []string
	for i := 1; i <= o.Controllers; i++ {
		addr := ports.Controllers[i-1]
		controllers = append(controllers, addr)
		args := common(fmt.Sprintf("controller-%d", i), ports.ControllerEtcd[i-1], "--controller.id", strconv.Itoa(i), "--listen", ports.ControllerListen[i-1],
			"--metrics.listen", ports.ControllerMetrics[i-1])
		if o.Links {
			args = append(args, "--advertised.address", addr)
		}
		args = append(args, o.ControllerArgs...)
		args, prof, err := profile(args)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, &Node{
			Name: fmt.Sprintf("controller-%d", i), Kind: "controller", ID: int32(i), Addr: addr,
			Binary: filepath.Join(o.BinDir, "controller"), Args: args,
			MetricsAddr: ports.ControllerMetrics[i-1], ProfileAddr: prof,
			LogPath: filepath.Join(logs, fmt.Sprintf("controller-%d.log", i)),
		})
	}
	var brokers []string
	for i := 1; i <= o.Brokers; i++ {
		addr := ports.Brokers[i-1]
		brokers = append(brokers, addr)
		args := common(fmt.Sprintf("broker-%d", i), ports.BrokerEtcd[i-1], "--broker.id", strconv.Itoa(i), "--listen", ports.BrokerListen[i-1],
			"--data.dir", filepath.Join(o.DataDir, fmt.Sprintf("broker-%d", i)),
			"--metrics.listen", ports.BrokerMetrics[i-1], "--kafka.listen", ports.BrokerKafka[i-1])
		if o.Links {
			args = append(args, "--advertised.address", addr)
		}
		if len(o.Racks) > 0 {
			args = append(args, "--broker.rack", o.Racks[(i-1)%len(o.Racks)])
		}
		if o.FaultInjection {
			args = append(args, "--fault.injection.enable")
		}
		args = append(args, o.BrokerArgs...)
		args, prof, err := profile(args)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, &Node{
			Name: fmt.Sprintf("broker-%d", i), Kind: "broker", ID: int32(i), Addr: addr,
			Binary: filepath.Join(o.BinDir, "broker"), Args: args,
			MetricsAddr: ports.BrokerMetrics[i-1], ProfileAddr: prof, KafkaAddr: ports.BrokerKafka[i-1],
			LogPath: filepath.Join(logs, fmt.Sprintf("broker-%d.log", i)),
		})
	}
	// The dev console may act on the cluster: it is a playground.
	gwArgs := []string{"--listen", ports.Gateway, "--metrics.listen", ports.GatewayMetrics,
		"--controllers", strings.Join(controllers, ","), "--brokers", strings.Join(brokers, ","),
		"--console.actions", "--console.dev.control", o.ControlAddr}
	gwArgs = append(gwArgs, o.gatewayTLSArgs()...)
	if o.Jaeger {
		gwArgs = append(gwArgs, "--console.jaeger.ui", "http://"+ports.JaegerQuery)
	}
	if o.OTLPEndpoint != "" {
		gwArgs = append(gwArgs, "--otel.endpoint", o.OTLPEndpoint)
	}
	nodes = append(nodes, &Node{
		Name: "gateway", Kind: "gateway", ID: 0, Addr: ports.Gateway, MetricsAddr: ports.GatewayMetrics,
		Binary: filepath.Join(o.BinDir, "gateway"), Args: gwArgs,
		LogPath: filepath.Join(logs, "gateway.log"),
	})
	env := []string{"GOMAXPROCS=" + strconv.Itoa(o.Procs())}
	for _, n := range nodes {
		n.Env = env
	}
	for _, n := range nodes {
		if _, err := os.Stat(n.Binary); err != nil {
			return nil, fmt.Errorf("%s: binary %s not found (run `make build`): %w", n.Name, n.Binary, err)
		}
	}
	return nodes, nil
}

// Up starts etcd, then controllers, brokers and the gateway, and waits until
// each answers its health check (or timeout).
func Up(ctx context.Context, o Options, out io.Writer) (*Cluster, error) {
	o = o.withPorts()
	nodes, err := o.plan()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, err
	}
	// The data dir first: a second launcher on it must refuse before it
	// touches the certificates or blocks in etcd's database lock.
	dirLock, err := lockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	etcd, err := o.prepareAndStartEtcd(ctx, out)
	if err != nil {
		dirLock.Close()
		return nil, err
	}
	c := &Cluster{opts: o, etcd: etcd, nodes: nodes, dirLock: dirLock}
	if o.Links {
		if err := c.startLinks(); err != nil {
			c.Down(out)
			return nil, err
		}
	}
	if err := c.serveControl(); err != nil {
		c.Down(out)
		return nil, err
	}
	// The first controller starts alone and takes office before the others
	// start, so the documented address (9190) is the active controller of a
	// fresh cluster and the README's recipes can name it.
	first := -1
	for i, n := range nodes {
		if n.Kind == "controller" {
			first = i
			break
		}
	}
	if first >= 0 {
		if err := nodes[first].Start(); err != nil {
			c.Down(out)
			return nil, err
		}
		if err := c.waitActiveController(ctx, nodes[first], 20*time.Second); err != nil {
			warnStart(out, nodes[first], err)
		}
	}
	for i, n := range nodes {
		if i == first {
			continue
		}
		if err := n.Start(); err != nil {
			c.Down(out)
			return nil, err
		}
	}
	for _, n := range nodes {
		if err := c.waitHealthy(ctx, n, 20*time.Second); err != nil {
			warnStart(out, n, err)
		}
	}
	return c, nil
}

// prepareAndStartEtcd makes the logs dir and the certificates, then starts
// the embedded etcd.
func (o Options) prepareAndStartEtcd(ctx context.Context, out io.Writer) (*embedded.Server, error) {
	if err := os.MkdirAll(filepath.Join(o.DataDir, "logs"), 0o755); err != nil {
		return nil, err
	}
	if !o.Plaintext {
		issued, err := o.ensurePKI()
		if err != nil {
			return nil, fmt.Errorf("certificates in %s: %w", o.PKIDir(), err)
		}
		if len(issued) > 0 {
			fmt.Fprintf(out, "issued certificates in %s: %s\n", o.PKIDir(), strings.Join(issued, ", "))
		}
	}
	return o.startEtcd(ctx)
}

// errExitedDuringStart is a node whose process ended before it was healthy.
var errExitedDuringStart = errors.New("exited during start")

// startLogLines is how much of a node's log a failed start prints.
const startLogLines = 10

// warnStart reports a node that did not come up. One that exited shows
// the end of its log too: its reason (a bad flag, a port in use) is
// there, and the warning alone only says that it exited.
func warnStart(out io.Writer, n *Node, err error) {
	fmt.Fprintf(out, "warning: %s: %v (see %s)\n", n.Name, err, n.LogPath)
	if !errors.Is(err, errExitedDuringStart) {
		return
	}
	for _, line := range logTail(n.LogPath, startLogLines) {
		fmt.Fprintf(out, "  %s| %s\n", n.Name, line)
	}
}

// logTail returns the last (at most) lines non-empty lines the current
// process wrote to the log at path (after the launcher's last "started"
// line, as the log keeps earlier runs), read from its last 16 KiB.
func logTail(path string, lines int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const window = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		_, _ = f.Seek(st.Size()-window, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(l, startedMark):
			out = out[:0]
		case strings.TrimSpace(l) != "":
			out = append(out, l)
		}
	}
	if len(out) > lines {
		out = out[len(out)-lines:]
	}
	return out
}

func (c *Cluster) waitHealthy(ctx context.Context, n *Node, timeout time.Duration) error {
	if n.Kind == "jaeger" {
		return waitHTTP(ctx, n, "http://"+n.Addr+"/api/services", timeout)
	}
	dial, err := c.opts.dialOption(n)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(n.Addr, dial)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if n.State() == devclusterv1.NodeState_NODE_STATE_EXITED {
			return errExitedDuringStart
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not healthy after %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitActiveController waits until the controller answers DescribeCluster
// itself, that is, until it has won the election. An earlier run's lease
// left in etcd (a kill -9, say) delays this by up to the lease TTL.
func (c *Cluster) waitActiveController(ctx context.Context, n *Node, timeout time.Duration) error {
	dial, err := c.opts.dialOption(n)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(n.Addr, dial)
	if err != nil {
		return err
	}
	defer conn.Close()
	admin := adminv1.NewAdminServiceClient(conn)
	deadline := time.Now().Add(timeout)
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := admin.DescribeCluster(cctx, &adminv1.DescribeClusterRequest{})
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if n.State() == devclusterv1.NodeState_NODE_STATE_EXITED {
			return errExitedDuringStart
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not the active controller after %s: %v", timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Node finds a node by name.
func (c *Cluster) Node(name string) (*Node, error) {
	for _, n := range c.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	var names []string
	for _, n := range c.nodes {
		names = append(names, n.Name)
	}
	return nil, fmt.Errorf("no node %q (nodes: %s)", name, strings.Join(names, ", "))
}

// Nodes lists the launched nodes.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// KafkaBootstrap is the brokers' Kafka listeners, comma-separated (Kafka's
// bootstrap.servers).
func (c *Cluster) KafkaBootstrap() string {
	var addrs []string
	for _, n := range c.nodes {
		if n.KafkaAddr != "" {
			addrs = append(addrs, n.KafkaAddr)
		}
	}
	return strings.Join(addrs, ",")
}

// Options are the options the cluster was launched with, ports resolved.
func (c *Cluster) Options() Options { return c.opts }

// PrintTable writes what runs where.
func (c *Cluster) PrintTable(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tSTATE\tPID\tLOG")
	e := c.etcdProto()
	fmt.Fprintf(tw, "etcd\t%s\t%s\t(in launcher)\t-\n", e.Address, strings.TrimPrefix(e.State.String(), "NODE_STATE_"))
	for _, n := range c.nodes {
		p := n.Proto()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", p.Name, p.Address, strings.TrimPrefix(p.State.String(), "NODE_STATE_"), p.Pid, p.LogFile)
	}
	fmt.Fprintf(tw, "dev control\t%s\t\t\t\n", c.opts.ControlAddr)
	tw.Flush()
	if boot := c.KafkaBootstrap(); boot != "" {
		fmt.Fprintf(out, "Kafka bootstrap: %s\n", boot)
	}
}

// Down waits for a node action in flight and refuses every later one, then
// stops the gateway, brokers and controllers with SIGTERM (in that order,
// so brokers can still reach a controller for a controlled shutdown), then
// etcd.
func (c *Cluster) Down(out io.Writer) {
	// Wait for an action in flight and refuse every later one, so that a
	// restart's new process is stopped below with the rest and a scenario
	// healing meanwhile (or a console page) cannot start a node this loop
	// has already passed: it would outlive the launcher's own shutdown and
	// die by the parent-death SIGKILL instead.
	c.actions.close()
	for i := len(c.nodes) - 1; i >= 0; i-- {
		n := c.nodes[i]
		if _, _, err := n.running(); err != nil {
			continue
		}
		if err := c.stopNode(n); err != nil {
			fmt.Fprintf(out, "%s: %v\n", n.Name, err)
		} else {
			fmt.Fprintf(out, "stopped %s\n", n.Name)
		}
	}
	// Down may run twice (a failed run's cleanup after an explicit Down).
	if c.ctl != nil {
		c.ctl.Stop()
		c.ctl = nil
	}
	if c.links != nil {
		c.links.Close()
		c.links = nil
	}
	if c.StopEtcd() == nil {
		fmt.Fprintln(out, "stopped etcd")
	}
	// Last, once etcd has closed its database: the data dir is free for
	// the next launcher.
	if c.dirLock != nil {
		c.dirLock.Close()
		c.dirLock = nil
	}
}

// Hurry makes the stops in progress and every later one (Down's, an
// action's) kill their node at once rather than wait for its graceful stop:
// the launcher's answer to a second Ctrl-C during a slow shutdown.
func (c *Cluster) Hurry() {
	h := c.hurried()
	c.hurryClose.Do(func() { close(h) })
}

func (c *Cluster) hurried() chan struct{} {
	c.hurryOnce.Do(func() { c.hurry = make(chan struct{}) })
	return c.hurry
}

// stopNode stops n gracefully, or kills it once Hurry is called.
func (c *Cluster) stopNode(n *Node) error {
	h := c.hurried()
	select {
	case <-h:
		if err := n.Kill(); err != nil {
			return err
		}
		return fmt.Errorf("%s killed without waiting for its graceful stop", n.Name)
	default:
	}
	return n.StopOr(c.stopTimeout(), h)
}

// stopTimeout is how long a node has to stop on SIGTERM before SIGKILL.
func (c *Cluster) stopTimeout() time.Duration {
	if c.stopGrace > 0 {
		return c.stopGrace
	}
	return 30 * time.Second
}

// startLinks starts the proxies of Options.Links: one in front of each
// broker and controller, on its advertised address, and one from each to
// etcd. Connections are named by the node process they come from.
func (c *Cluster) startLinks() error {
	ports := c.opts.Ports()
	identify := links.ProcIdentifier(func() map[int]string {
		pids := map[int]string{}
		for _, n := range c.nodes {
			if pid := n.Proto().GetPid(); pid > 0 {
				pids[int(pid)] = n.Name
			}
		}
		return pids
	})
	c.links = links.NewNet()
	add := func(name, advertised, listen, etcd string) error {
		in, err := links.Listen(name, advertised, listen, identify)
		if err != nil {
			return err
		}
		c.links.AddInbound(name, in)
		e, err := links.Listen(name+"→etcd", etcd, c.opts.EtcdClient, nil)
		if err != nil {
			return err
		}
		c.links.AddEtcd(name, e)
		return nil
	}
	for i := range ports.Controllers {
		if err := add(fmt.Sprintf("controller-%d", i+1), ports.Controllers[i], ports.ControllerListen[i], ports.ControllerEtcd[i]); err != nil {
			return err
		}
	}
	for i := range ports.Brokers {
		if err := add(fmt.Sprintf("broker-%d", i+1), ports.Brokers[i], ports.BrokerListen[i], ports.BrokerEtcd[i]); err != nil {
			return err
		}
	}
	return nil
}

// Links are the cluster's cuttable links (nil unless Options.Links).
func (c *Cluster) Links() *links.Net { return c.links }

func (c *Cluster) serveControl() error {
	lis, err := net.Listen("tcp", c.opts.ControlAddr)
	if err != nil {
		return fmt.Errorf("dev control %s: %w (is another `tidemark dev up` running?)", c.opts.ControlAddr, err)
	}
	return c.serveControlOn(lis)
}

// serveControlOn serves the control API on lis, already bound (a test's
// own, with no window in which another process could take the port); it
// closes lis when it cannot.
func (c *Cluster) serveControlOn(lis net.Listener) error {
	opts, err := c.opts.controlServerOptions()
	if err != nil {
		lis.Close()
		return fmt.Errorf("dev control %s: %w", c.opts.ControlAddr, err)
	}
	c.ctl = grpc.NewServer(opts...)
	devclusterv1.RegisterDevClusterServiceServer(c.ctl, &controlService{c: c})
	go func() { _ = c.ctl.Serve(lis) }()
	return nil
}

func waitHTTP(ctx context.Context, n *Node, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if n.State() == devclusterv1.NodeState_NODE_STATE_EXITED {
			return errExitedDuringStart
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not answering %s after %s", url, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SharedProcs is the GOMAXPROCS that shares the machine's cores among the
// brokers of a cluster on one host, at least 1. Each Go process otherwise
// takes every core: on a small machine the brokers' idle threads spin and
// wake one another, and each hand-off between goroutines on different
// threads costs a futex wake-up. Measured on 2 cores, 3 brokers (bench
// compare, sync acks=all): 1 per process instead of 2 took one producer
// from about 1,500 to 2,100 writes/s and cut the leader's CPU per write
// from about 210 to 80 µs; JetStream's nodes gain alike.
func SharedProcs(brokers int) int {
	return max(1, runtime.NumCPU()/max(1, brokers))
}

// Procs is the GOMAXPROCS the nodes run with.
func (o Options) Procs() int {
	if o.ProcsPerNode > 0 {
		return o.ProcsPerNode
	}
	if v, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && v > 0 {
		return v
	}
	return SharedProcs(o.Brokers)
}
