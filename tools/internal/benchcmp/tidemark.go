package benchcmp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"tidemark.io/services/platform/loopback"
	"tidemark.io/tools/internal/devcluster"
)

// toolTimeout bounds one tool run; the shapes are sized to take seconds.
const toolTimeout = 90 * time.Second

// tidemarkSide runs the shapes against a dev cluster of its own: etcd in
// the harness (as in `tidemark dev up`), 2 controllers, 3 brokers and the
// gateway as separate processes, mutual TLS on every link unless plaintext.
type tidemarkSide struct {
	binDir    string
	procs     int // GOMAXPROCS of each node
	plaintext bool
	// preallocate: the topics reserve their segments' blocks ahead.
	preallocate bool
	// topicConfigsExtra: Options.TopicConfigs.
	topicConfigsExtra []string
	// brokerConfigs: Options.BrokerConfigs, each a --config of every broker.
	brokerConfigs []string
	dir           string
	log           *os.File
	cl            *devcluster.Cluster
	flags         []string
	// traceDir, when set, receives per paced run the client's and the
	// brokers' execution traces (execTrace, Options.ExecTrace) and the
	// brokers' kernel waits (kernelWaits, Options.KernelWaits); traced
	// counts each shape's runs.
	traceDir    string
	execTrace   bool
	kernelWaits bool
	traced      map[string]int
}

// clusterOptions is the dev cluster of the side on ports from base.
func (t *tidemarkSide) clusterOptions(base int) devcluster.Options {
	opts := devcluster.Options{
		DataDir: filepath.Join(t.dir, "data"), BinDir: t.binDir, Brokers: 3, Controllers: 2, PortBase: base,
		Profiles: true, ProcsPerNode: t.procs, Plaintext: t.plaintext,
	}
	for _, kv := range t.brokerConfigs {
		opts.BrokerArgs = append(opts.BrokerArgs, "--config", kv)
	}
	return opts
}

func (t *tidemarkSide) start(ctx context.Context) error {
	base, err := loopback.FreeRange(rand.New(rand.NewPCG(rand.Uint64(), 1)), devcluster.PortSpan)
	if err != nil {
		return err
	}
	opts := t.clusterOptions(base)
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return err
	}
	cl, err := devcluster.Up(ctx, opts, t.log)
	if err != nil {
		return fmt.Errorf("starting tidemark's dev cluster: %w", err)
	}
	t.cl = cl
	ports := cl.Options().Ports()
	sec := cl.Options().Security()
	t.flags = []string{
		"--bootstrap-server", strings.Join(ports.Brokers, ","),
		"--controller", strings.Join(ports.Controllers, ","),
	}
	if t.plaintext {
		t.flags = append(t.flags, "--plaintext")
	} else {
		t.flags = append(t.flags, "--tls.ca", sec.CA, "--tls.cert", sec.Cert, "--tls.key", sec.Key)
	}
	return nil
}

func (t *tidemarkSide) serverPIDs() []int {
	var pids []int
	for _, n := range t.cl.Nodes() {
		if n.Kind == "broker" {
			if pid := n.PID(); pid > 0 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func (t *tidemarkSide) stop() {
	if t.cl != nil {
		t.cl.Down(t.log)
		t.cl = nil
	}
}

func (t *tidemarkSide) cli(ctx context.Context, args ...string) (string, error) {
	out, _, err := t.cliCPU(ctx, args...)
	return out, err
}

// cliCPU is cli that also returns what the tidemark process used.
func (t *tidemarkSide) cliCPU(ctx context.Context, args ...string) (string, usage, error) {
	return runToolCPU(ctx, toolTimeout, t.log, nil, filepath.Join(t.binDir, "tidemark"), append(slices.Clone(t.flags), args...)...)
}

func topicOf(s Shape) string { return "bench-" + s.Name }

// topicConfigs are the configs of every topic the harness creates.
func (t *tidemarkSide) topicConfigs() map[string]string {
	c := map[string]string{"min.insync.replicas": "2"}
	if t.preallocate {
		c["preallocate"] = "true"
	}
	for _, kv := range t.topicConfigsExtra {
		if k, v, ok := strings.Cut(kv, "="); ok {
			c[k] = v
		}
	}
	return c
}

// createTopic creates a shape's topic (1 partition, RF 3) unless it exists.
func (t *tidemarkSide) createTopic(ctx context.Context, name string) error {
	args := []string{"topics", "create", "--topic", name, "--partitions", "1", "--replication-factor", "3", "--if-not-exists"}
	for _, k := range slices.Sorted(maps.Keys(t.topicConfigs())) {
		args = append(args, "--config", k+"="+t.topicConfigs()[k])
	}
	_, err := t.cli(ctx, args...)
	return err
}

// run measures one shape; a consume shape reads the topic of ReadsFrom.
func (t *tidemarkSide) run(ctx context.Context, s Shape) Figure { return t.runWith(ctx, s) }

// runWith is run with extra flags for the tidemark perf process.
func (t *tidemarkSide) runWith(ctx context.Context, s Shape, extra ...string) Figure {
	if s.Mode == Consume {
		out, cpu, err := t.cliCPU(ctx, append([]string{"perf", "consume", "--topic", "bench-" + s.ReadsFrom, "--messages", strconv.FormatInt(s.Records, 10),
			"--timeout", "60s", "--reporting-interval", "1h"}, extra...)...)
		return withClientCPU(parsed(ParseTidemark, out, err), cpu)
	}
	if err := t.createTopic(ctx, topicOf(s)); err != nil {
		return Figure{Err: fmt.Sprintf("creating topic %s: %v", topicOf(s), err)}
	}
	if s.paced() {
		return withTail(ctx, t.cl.Options().Ports().BrokerMetrics, t.log, func() Figure { return t.runPaced(ctx, s, extra...) })
	}
	acks := "all"
	if s.LeaderAcks {
		acks = "1"
	}
	args := []string{"perf", "produce", "--topic", topicOf(s), "--num-records", strconv.FormatInt(s.Records, 10),
		"--producers", strconv.Itoa(s.Producers), "--record-size", strconv.Itoa(s.Size), "--acks", acks,
		"--timeout", "60s", "--reporting-interval", "1h"}
	if s.Mode == Sync {
		args = append(args, "--sync")
	}
	if s.InFlight > 0 {
		args = append(args, "--buffer-memory", strconv.Itoa(s.InFlight))
	}
	out, cpu, err := t.cliCPU(ctx, append(args, extra...)...)
	return withClientCPU(parsed(ParseTidemark, out, err), cpu)
}

// nextTrace is the path, without ".trace", of the execution traces of the
// shape's next run, "" unless traceDir is set: tidemark-<shape>-run<N>, the
// client's; the brokers' add their names. The tool's log has each run's
// command beside its figures, so a run that missed names its traces.
func (t *tidemarkSide) nextTrace(s Shape) string {
	if t.traceDir == "" {
		return ""
	}
	if t.traced == nil {
		t.traced = map[string]int{}
	}
	t.traced[s.Name]++
	return filepath.Join(t.traceDir, fmt.Sprintf("tidemark-%s-run%d", s.Name, t.traced[s.Name]))
}

// pacedArgs is the perf e2e command of one run of a paced shape, writing
// the client's execution trace to trace+".trace" when trace is set.
func (t *tidemarkSide) pacedArgs(s Shape, trace string, extra ...string) []string {
	args := []string{"perf", "e2e", "--topic", topicOf(s), "--partition", "0", "--num-records", strconv.FormatInt(s.Records, 10),
		"--record-size", strconv.Itoa(s.Size), "--throughput", strconv.FormatFloat(s.Rate, 'f', 0, 64), "--acks", "all",
		"--timeout", "60s", "--reporting-interval", "1h", "--warmup", strconv.FormatFloat(s.Warmup, 'f', -1, 64) + "s"}
	if trace != "" && t.execTrace {
		args = append(args, "--exec-trace", trace+".trace")
	}
	return append(args, extra...)
}

// traceBrokers fetches an execution trace of every broker over the paced
// run about to start (its warm-up, its records at its rate, and a second
// for the client to start) into trace-<broker>.trace, and returns a wait
// for them.
func (t *tidemarkSide) traceBrokers(ctx context.Context, trace string, s Shape) (wait func()) {
	var brokers []tracedProcess
	for _, n := range t.cl.Nodes() {
		if n.Kind == "broker" && n.ProfileAddr != "" {
			brokers = append(brokers, tracedProcess{n.Name, n.ProfileAddr})
		}
	}
	seconds := int(math.Ceil(s.Warmup+float64(s.Records)/s.Rate)) + 1
	return traceProcesses(ctx, t.log, trace, seconds, brokers)
}

// recordKernelWaits samples the brokers' threads' uninterruptible sleeps
// from now until the returned func is called, which writes them to
// trace-kernel-waits.txt and a summary line to the tool's log.
func (t *tidemarkSide) recordKernelWaits(ctx context.Context, trace string) (stop func()) {
	procs := map[int]string{}
	for _, n := range t.cl.Nodes() {
		if pid := n.PID(); n.Kind == "broker" && pid > 0 {
			procs[pid] = n.Name
		}
	}
	sampling := sampleKernelWaits(ctx, procs)
	return func() {
		if err := writeKernelWaits(t.log, trace+"-kernel-waits.txt", sampling()); err != nil {
			fmt.Fprintf(t.log, "kernel waits: %v\n", err)
		}
	}
}

// tracedProcess is a process serving /debug/pprof/ at addr.
type tracedProcess struct{ name, addr string }

// traceProcesses fetches seconds of each process's execution trace into
// trace-<name>.trace, all at once, and returns a wait for them. A trace
// that fails is said in log; the run counts anyway.
func traceProcesses(ctx context.Context, log io.Writer, trace string, seconds int, procs []tracedProcess) (wait func()) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			url := "http://" + p.addr + "/debug/pprof/trace?seconds=" + strconv.Itoa(seconds)
			if err := fetch(ctx, url, trace+"-"+p.name+".trace"); err != nil {
				fmt.Fprintf(log, "tracing %s: %v\n", p.name, err)
			}
		})
	}
	return wg.Wait
}

// runPaced runs a paced shape: `tidemark perf e2e`, its acknowledgements
// or its consumer's receipts as the figure.
func (t *tidemarkSide) runPaced(ctx context.Context, s Shape, extra ...string) Figure {
	trace := t.nextTrace(s)
	if trace != "" && t.execTrace {
		defer t.traceBrokers(ctx, trace, s)()
	}
	if trace != "" && t.kernelWaits {
		defer t.recordKernelWaits(ctx, trace)()
	}
	out, cpu, err := t.cliCPU(ctx, t.pacedArgs(s, trace, extra...)...)
	parse := ParseTidemarkSent
	if s.Mode == EndToEnd {
		parse = ParseTidemarkConsumed
	}
	f := withClientCPU(parsed(parse, out, err), cpu)
	if h, err := parseTidemark(out, "handed to the producer"); err == nil && f.Err == "" {
		f.HandoverP99 = h.P99
		f.Batches = parseBatches(out)
	}
	return f
}

// withTail runs run between two scrapes of the brokers' histograms (at
// their metrics addresses) and adds the run's Tail to its figure. A scrape
// that fails leaves the Tail out and says so in log; the figure stands.
func withTail(ctx context.Context, addrs []string, log io.Writer, run func() Figure) Figure {
	before, err := scrapeBrokers(ctx, addrs)
	f := run()
	if err == nil {
		var after brokerHistograms
		if after, err = scrapeBrokers(ctx, addrs); err == nil && f.Err == "" {
			f.Tail = tailOf(before, after)
		}
	}
	if err != nil {
		fmt.Fprintf(log, "benchcmp: the brokers' histograms around a paced run: %v\n", err)
	}
	return f
}

// splitAround: syncSplitter, from the brokers' /metrics.
func (t *tidemarkSide) splitAround(ctx context.Context) func() *SyncSplit {
	var addrs, ids []string
	for _, n := range t.cl.Nodes() {
		if n.Kind == "broker" && n.MetricsAddr != "" {
			addrs, ids = append(addrs, n.MetricsAddr), append(ids, strconv.Itoa(int(n.ID)))
		}
	}
	return splitAround(ctx, addrs, ids, t.log)
}

// withClientCPU is f with what the tool process used.
func withClientCPU(f Figure, u usage) Figure {
	f.clientUsage = u
	return f
}

// parsed is the figure a tool printed, kept even when the tool exited
// non-zero (failed records are counted in it), or why there is none.
func parsed(parse func(string) (Figure, error), out string, runErr error) Figure {
	f, err := parse(out)
	if err == nil {
		return f
	}
	if runErr != nil {
		return Figure{Err: fmt.Sprintf("%v; %s", runErr, lastLine(out))}
	}
	return Figure{Err: err.Error()}
}

func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

var leaderLine = regexp.MustCompile(`Partition: 0\s+Leader: (\d+)`)

// profile runs shape s once more, unrecorded, on a topic of its own and
// saves every process's profiles into dir: each broker's CPU profile over
// profileSeconds of the run and its allocation profile after it (the
// partition leader's and the followers', named by role), and the client's
// (the tidemark perf process) over its whole run. It returns the files and
// where each process's CPU went by its CPU profile.
func (t *tidemarkSide) profile(ctx context.Context, s Shape, dir string) ([]string, []ProcessCPU, error) {
	label := s.Label()
	s.Name += "-profiled"
	if err := t.createTopic(ctx, topicOf(s)); err != nil {
		return nil, nil, err
	}
	desc, err := t.cli(ctx, "topics", "describe", "--topic", topicOf(s))
	if err != nil {
		return nil, nil, err
	}
	m := leaderLine.FindStringSubmatch(desc)
	if m == nil {
		return nil, nil, fmt.Errorf("no leader in %q", desc)
	}
	type target struct {
		node *devcluster.Node
		base string
		role string
	}
	var brokers []target
	for _, n := range t.cl.Nodes() {
		if n.Kind != "broker" {
			continue
		}
		if n.ProfileAddr == "" {
			return nil, nil, fmt.Errorf("%s serves no profiles", n.Name)
		}
		role := "follower"
		if n.Name == "broker-"+m[1] {
			role = "leader"
		}
		brokers = append(brokers, target{n, filepath.Join(dir, fmt.Sprintf("tidemark-%s-%s-%s", s.Name, role, n.Name)), role})
	}
	client := filepath.Join(dir, fmt.Sprintf("tidemark-%s-client", s.Name))
	done := make(chan Figure, 1)
	go func() {
		done <- t.runWith(ctx, s, "--cpu-profile", client+".cpu.pprof", "--alloc-profile", client+".allocs.pprof")
	}()
	// The producer needs a moment to start and connect before the profile
	// window opens.
	time.Sleep(500 * time.Millisecond)
	errs := make([]error, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		wg.Go(func() {
			errs[i] = fetch(ctx, "http://"+b.node.ProfileAddr+"/debug/pprof/profile?seconds="+strconv.Itoa(profileSeconds), b.base+".cpu.pprof")
		})
	}
	wg.Wait()
	f := <-done
	files := []string{client + ".cpu.pprof", client + ".allocs.pprof"}
	for i, b := range brokers {
		errs = append(errs, fetch(ctx, "http://"+b.node.ProfileAddr+"/debug/pprof/allocs", b.base+".allocs.pprof"))
		files = append(files, brokers[i].base+".cpu.pprof", brokers[i].base+".allocs.pprof")
	}
	if f.Err != "" {
		return nil, nil, errors.New(f.Err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	procs := []target{{base: client, role: "client"}}
	var cpus []ProcessCPU
	for _, p := range append(procs, brokers...) {
		c, err := cpuOfProfile(p.base + ".cpu.pprof")
		if err != nil {
			return files, nil, err
		}
		c.Shape, c.System, c.Role, c.Process = label, "tidemark", p.role, p.role
		if p.node != nil {
			c.Process = p.node.Name
		}
		cpus = append(cpus, c)
	}
	return files, cpus, nil
}

// profileSeconds is how long a CPU profile samples: within the shortest
// profiled shape's run.
const profileSeconds = 4

func fetch(ctx context.Context, url, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
