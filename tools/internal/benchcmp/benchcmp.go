package benchcmp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"tidemark.io/tools/internal/devcluster"
)

// Options say where the binaries are and where the results go.
type Options struct {
	// BinDir holds tidemark, broker, controller and gateway.
	BinDir string
	// NatsBinDir holds nats-server and nats (make's .bin/).
	NatsBinDir string
	// OutDir receives compare-<time>.md and .json and the run's logs.
	OutDir string
	Shapes []Shape
	// Only runs just one system ("tidemark" or "jetstream"); empty runs both.
	Only string
	// Kills is how many times the failover run kills the leader on each
	// system (0 skips it).
	Kills int
	// Procs is the GOMAXPROCS of every server process of both systems
	// (brokers, controllers, gateway; nats-server nodes), so each side
	// shares the machine's cores the same way. 0: devcluster.SharedProcs.
	Procs int
	// Plaintext runs both systems without TLS. By default both run mutual
	// TLS on every link (clients and replication/routes), as tidemark's dev
	// cluster does: comparing a secured system with an unsecured one
	// measures the encryption, not the systems.
	Plaintext bool
	// OneCPU runs the synchronous shapes again with every process of both
	// systems on one CPU, when the machine has more (measureOneCPU).
	OneCPU bool
	// Scale is the record counts' multiplier the shapes were made with,
	// passed on to the one-CPU pass.
	Scale float64
	// ExecTrace writes Go execution traces of every tidemark paced run into
	// the logs folder, the client's (perf e2e --exec-trace) and each
	// broker's (its /debug/pprof/trace): where a run that missed waited.
	ExecTrace bool
	// KernelWaits samples, over every tidemark paced run, the brokers'
	// threads blocked in the kernel for 10 ms or more, with the kernel
	// stack each was in (kernelwaits.go), into the logs folder.
	KernelWaits bool
	// Preallocate creates tidemark's topics with preallocate=true: each
	// segment's disk blocks reserved before it is written.
	Preallocate bool
	// TopicConfigs are more configs of tidemark's topics (key=value), for
	// experiments; the report lists them.
	TopicConfigs []string
	// BrokerConfigs are static configs of tidemark's brokers (key=value,
	// each broker's --config), for experiments; the report lists them.
	BrokerConfigs []string
}

// Row is one shape's figures on both systems.
type Row struct {
	Shape     Shape  `json:"shape"`
	Tidemark  Figure `json:"tidemark"`
	JetStream Figure `json:"jetstream"`
}

// Result is one run of the comparison.
type Result struct {
	Started time.Time `json:"started"`
	Machine string    `json:"machine"`
	Rows    []Row     `json:"rows"`
	// Failover is nil when the run killed no leader.
	Failover *Failover `json:"failover,omitempty"`
	// Procs is the GOMAXPROCS every server process ran with.
	Procs int `json:"gomaxprocs"`
	// Plaintext: both systems ran without TLS (else mutual TLS on both).
	Plaintext bool `json:"plaintext,omitempty"`
	// PeakRSS is the largest peak resident set (VmHWM) of one server
	// process of each system over the shapes: a broker, a nats-server.
	PeakRSS PeakRSS `json:"peak_rss"`
	// SleepWake is this machine's price of a context switch, measured
	// before the shapes; zero when it could not be.
	SleepWake SleepWake `json:"sleep_wake"`
	// PageWrite is this machine's price of writing into new and into
	// cached page-cache pages, measured before the shapes; zero when it
	// could not be.
	PageWrite PageWrite `json:"page_write"`
	// LinkFloor is the round trip between two processes here, the floor
	// under the synchronous rows; nil when it could not be measured.
	LinkFloor *LinkFloor `json:"link_floor,omitempty"`
	// DropsPageCache: the harness could drop the clean page cache before
	// each shape (dropPageCache).
	DropsPageCache bool `json:"drops_page_cache,omitempty"`
	// OneCPU is the synchronous shapes again on one CPU; nil when not run.
	OneCPU *OneCPU `json:"one_cpu,omitempty"`
	// Interleaved: both systems ran side by side, their runs of each shape
	// alternating (measure); false in reports written before that, whose
	// systems ran one after the other, every shape of one before the other's.
	Interleaved bool `json:"interleaved,omitempty"`
	// EachRun: the page cache was written back (and dropped) before each
	// run, not only before each shape (reports written before it).
	EachRun bool `json:"each_run,omitempty"`
	// IdleCPU is, per system, the share of one core its server processes
	// used while the other system's runs were measured (Interleaved).
	IdleCPU map[string]float64 `json:"idle_cpu,omitempty"`
	// Preallocate: tidemark's topics had preallocate=true.
	Preallocate bool `json:"preallocate,omitempty"`
	// TopicConfigs: Options.TopicConfigs.
	TopicConfigs []string `json:"topic_configs,omitempty"`
	// BrokerConfigs: Options.BrokerConfigs.
	BrokerConfigs []string `json:"broker_configs,omitempty"`
	// HaltPollNs is how long an idle vCPU of the machine polled before it
	// halted (haltPollPath); nil on a machine without that setting.
	HaltPollNs *int64 `json:"guest_halt_poll_ns,omitempty"`
	// Profiles are where each tidemark process's CPU went in the profiled
	// runs of the profiled shapes, by its CPU profile.
	Profiles []ProcessCPU `json:"profiles,omitempty"`
}

// PeakRSS is bytes; 0 when it was not read.
type PeakRSS struct {
	Tidemark  int64 `json:"tidemark"`
	JetStream int64 `json:"jetstream"`
}

// Run measures every shape on tidemark, stops it, then on JetStream, and
// writes the table. Progress and the table go to out.
func Run(ctx context.Context, o Options, out io.Writer) (*Result, error) {
	if o.Procs <= 0 {
		o.Procs = devcluster.SharedProcs(3)
	}
	for _, kv := range o.TopicConfigs {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("topic config %q: want key=value", kv)
		}
	}
	for _, kv := range o.BrokerConfigs {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("broker config %q: want key=value", kv)
		}
	}
	res := &Result{Started: time.Now().UTC(), Machine: Machine(), Procs: o.Procs, Plaintext: o.Plaintext, Preallocate: o.Preallocate, TopicConfigs: o.TopicConfigs,
		BrokerConfigs:  o.BrokerConfigs,
		DropsPageCache: unix.Access(dropCachesPath, unix.W_OK) == nil}
	if !res.DropsPageCache {
		fmt.Fprintf(out, "the page cache will not be dropped before the shapes: %s is not writable here (run as root for figures that do not depend on what earlier shapes left cached)\n", dropCachesPath)
	}
	if ns, ok := readHaltPoll(haltPollPath); ok {
		res.HaltPollNs = &ns
		fmt.Fprintf(out, "an idle vCPU here polls %v before it halts (%s)\n", time.Duration(ns), haltPollPath)
	}
	if sw, err := measureSleepWake(2000); err == nil {
		res.SleepWake = sw
		fmt.Fprintf(out, "a thread's sleep and wake-up on this machine: %v of CPU, %v from call to return (1 µs asked)\n", sw.CPU.Round(100*time.Nanosecond), sw.Wall.Round(100*time.Nanosecond))
	} else {
		fmt.Fprintf(out, "the price of a sleep and wake-up not measured: %v\n", err)
	}
	if o.BinDir != "" {
		if lf, err := measureLinkFloor(ctx, o.BinDir, o.Procs); err == nil {
			res.LinkFloor = lf
			fmt.Fprintf(out, "one message each way between two processes here (mutual TLS, loopback): %s\n", lf)
		} else {
			fmt.Fprintf(out, "the round trip between two processes not measured: %v\n", err)
		}
	}
	// In the temporary directory, where both systems' data dirs go.
	if pw, err := measurePageWrite(os.TempDir(), pageWriteBytes); err == nil {
		res.PageWrite = pw
		fmt.Fprintf(out, "writing a file on this machine: %v of CPU per KiB into pages new to the page cache, %v into cached ones\n", pw.Fresh, pw.Cached)
	} else {
		fmt.Fprintf(out, "the price of a page-cache write not measured: %v\n", err)
	}
	stamp := res.Started.Format("20060102-150405")
	logDir := filepath.Join(o.OutDir, "compare-"+stamp+"-logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	for _, s := range o.Shapes {
		res.Rows = append(res.Rows, Row{Shape: s})
	}
	if o.Kills > 0 {
		res.Failover = &Failover{}
	}
	var systems []*system
	if o.Only != "jetstream" {
		systems = append(systems, &system{name: "tidemark", mk: func(dir string, log *os.File) (side, error) {
			ts := &tidemarkSide{binDir: o.BinDir, dir: dir, log: log, procs: o.Procs, plaintext: o.Plaintext, preallocate: o.Preallocate, topicConfigsExtra: o.TopicConfigs,
				brokerConfigs: o.BrokerConfigs}
			if o.ExecTrace || o.KernelWaits {
				ts.traceDir, ts.execTrace, ts.kernelWaits = logDir, o.ExecTrace, o.KernelWaits
			}
			return ts, nil
		}, figure: func(r *Row) *Figure { return &r.Tidemark }, setFailover: func(fo *Failover, f FailoverFigure) { fo.Tidemark = f }, peakRSS: &res.PeakRSS.Tidemark})
	}
	if o.Only != "tidemark" {
		systems = append(systems, &system{name: "jetstream", mk: func(dir string, log *os.File) (side, error) {
			return &jetStreamSide{binDir: o.NatsBinDir, dir: dir, log: log, procs: o.Procs, plaintext: o.Plaintext}, nil
		}, figure: func(r *Row) *Figure { return &r.JetStream }, setFailover: func(fo *Failover, f FailoverFigure) { fo.JetStream = f }, peakRSS: &res.PeakRSS.JetStream})
	}
	res.Interleaved, res.EachRun = len(systems) > 1, true
	if err := measure(ctx, out, logDir, res, o.Kills, systems); err != nil {
		return nil, err
	}
	if o.OneCPU && runtime.NumCPU() > 1 && len(oneCPUShapes(o.Shapes)) > 0 {
		oc, err := measureOneCPU(ctx, o, stamp, out)
		if err != nil {
			oc = &OneCPU{Err: err.Error()}
			fmt.Fprintf(out, "the synchronous shapes on one CPU not measured: %v\n", err)
		}
		res.OneCPU = oc
	}
	md := res.Markdown()
	fmt.Fprintln(out)
	fmt.Fprint(out, md)
	base := filepath.Join(o.OutDir, "compare-"+stamp)
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return res, err
	}
	js, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "\nwritten: %s.md, %s.json (tool output in %s)\n", base, base, logDir)
	return res, nil
}

// profiled are the shapes run once more, unrecorded, while every
// process's profiles are taken: the synchronous path, the 1 KiB path and
// the 1 KiB path at half its peak.
var profiled = []string{"sync1-128", "batch-1k", "paced-1k"}

// profiler is a side that can profile its processes under a shape.
type profiler interface {
	profile(ctx context.Context, s Shape, dir string) ([]string, []ProcessCPU, error)
}

// failoverer is a side that can run the failover measurement.
type failoverer interface {
	failover(ctx context.Context, out io.Writer, kills int) FailoverFigure
}

// serverProcesses is a side whose server processes' memory is read:
// brokers, nats-servers.
type serverProcesses interface {
	serverPIDs() []int
}

// peakRSSOf reads a process's peak resident set (VmHWM) in bytes.
func peakRSSOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM for process %d", pid)
}

// side is one system under measurement.
type side interface {
	start(ctx context.Context) error
	run(ctx context.Context, s Shape) Figure
	stop()
}

// system is one of the systems compared: how to make its side, and where
// its figures go.
type system struct {
	name        string
	mk          func(dir string, log *os.File) (side, error)
	figure      func(*Row) *Figure
	setFailover func(*Failover, FailoverFigure)
	peakRSS     *int64

	sd side // once started

	// While the other systems ran: its server processes' CPU, and the
	// time they ran for.
	idleCPU, idleWall time.Duration
}

// idleUsage reads what the server processes of every system but the one
// about to run are using, and returns a function that adds what they used
// since to their idle account.
func idleUsage(systems []*system, running *system) (done func()) {
	type reading struct {
		m    *system
		pids []int
		u    usage
	}
	var rs []reading
	for _, m := range systems {
		sp, ok := m.sd.(serverProcesses)
		if m == running || !ok {
			continue
		}
		pids := sp.serverPIDs()
		if u, err := usageOfAll(pids); err == nil && len(pids) > 0 {
			rs = append(rs, reading{m, pids, u})
		}
	}
	began := time.Now()
	return func() {
		wall := time.Since(began)
		for _, r := range rs {
			if u, err := usageOfAll(r.pids); err == nil {
				r.m.idleCPU += u.cpu - r.u.cpu
				r.m.idleWall += wall
			}
		}
	}
}

// measure starts every system, each in a temporary directory, and runs
// every shape on them, the runs of a shape alternating between the
// systems (the first system first in odd rounds, last in even ones), so
// that each system's runs of a shape lie within seconds of the other's.
// This machine's speed moves by half within minutes; one system's shapes
// all run before the other's started them, a row's two figures were
// minutes apart and its ratio carried that drift. Only one system runs at
// a time; the other sits idle meanwhile. Then the profiles and the
// failover runs (kills > 0) of each system, one system after the other.
// Every process started is stopped and the directories removed.
func measure(ctx context.Context, out io.Writer, logDir string, res *Result, kills int, systems []*system) error {
	for _, m := range systems {
		dir, err := os.MkdirTemp("", "tidemark-benchcmp-"+m.name+"-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		log, err := os.Create(filepath.Join(logDir, m.name+".log"))
		if err != nil {
			return err
		}
		defer log.Close()
		sd, err := m.mk(dir, log)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "== %s: starting (log %s)\n", m.name, log.Name())
		defer sd.stop()
		if err := sd.start(ctx); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		m.sd = sd
		if err := warmUp(ctx, out, m); err != nil {
			return err
		}
	}
	for i := range res.Rows {
		if err := measureShape(ctx, out, res, i, systems); err != nil {
			return err
		}
	}
	for _, m := range systems {
		if m.idleWall > 0 {
			if res.IdleCPU == nil {
				res.IdleCPU = map[string]float64{}
			}
			res.IdleCPU[m.name] = float64(m.idleCPU) / float64(m.idleWall)
		}
	}
	for _, m := range systems {
		if err := finish(ctx, out, logDir, res, kills, m); err != nil {
			return err
		}
	}
	return nil
}

// warmUp is a short unrecorded run: connections, leaders and stream or
// topic creation settle before the first figure.
func warmUp(ctx context.Context, out io.Writer, m *system) error {
	warm := Shape{Name: "warmup", Mode: Sync, Size: 128, Producers: 1, Records: 200}
	for attempt := 1; ; attempt++ {
		f := m.sd.run(ctx, warm)
		if f.Err == "" {
			return nil
		}
		if attempt == 3 || ctx.Err() != nil {
			return fmt.Errorf("%s: warm-up run: %s", m.name, f.Err)
		}
		fmt.Fprintf(out, "%s  warm-up failed (%s), again\n", m.name, f.Err)
	}
}

// shapeRuns is one system's runs of one shape.
type shapeRuns struct {
	shape  Shape
	figs   []Figure
	failed *Figure // a run that failed ends the system's runs of the shape
	mem    *Memory // before its first run
	redone int
	paused time.Duration
	began  time.Time
	took   time.Duration
}

func (r *shapeRuns) done() bool {
	return r.failed != nil || len(r.figs) >= max(1, r.shape.Runs)
}

// measureShape runs row i on every system, alternating, and files each
// system's median.
func measureShape(ctx context.Context, out io.Writer, res *Result, i int, systems []*system) error {
	runs := make([]*shapeRuns, len(systems))
	for k, m := range systems {
		s := res.Rows[i].Shape
		r := &shapeRuns{shape: s}
		runs[k] = r
		if s.paced() {
			// Each system is paced from its own peak, measured earlier in
			// this run.
			peak := paceFrom(res, s.PaceOf, m.figure)
			if peak <= 0 {
				r.failed = &Figure{Err: fmt.Sprintf("no rate of shape %s to pace from", s.PaceOf)}
				continue
			}
			r.shape.Rate = s.Fraction * peak
			r.shape.Records = max(8, int64(r.shape.Rate*s.Seconds))
		}
	}
	for round := 0; ; round++ {
		ran := false
		for j := range systems {
			k := j
			if round%2 == 1 {
				k = len(systems) - 1 - j
			}
			r := runs[k]
			if r.done() {
				continue
			}
			ran = true
			idle := idleUsage(systems, systems[k])
			runOnce(ctx, out, res, i, systems[k], r)
			idle()
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if !ran {
			break
		}
	}
	for k, m := range systems {
		r := runs[k]
		f := r.median()
		if r.shape.Rate > 0 {
			f.Rate = r.shape.Rate
		}
		if r.mem != nil {
			f.Memory = r.mem
		}
		*m.figure(&res.Rows[i]) = f
		fmt.Fprintf(out, "%s  %-30s %s  (%.1fs)\n", m.name, r.shape.Label(), f.brief(), r.took.Seconds())
	}
	return nil
}

// runOnce makes one run of r's shape on m, each run after the page cache
// was written back (and dropped, where row i allows): the run before it,
// of either system, otherwise left its writeback to this one. A run during
// which the machine paused (watchPauses) is done again, at most pauseRedos
// times for the shape; the figure counts them and the longest such pause.
func runOnce(ctx context.Context, out io.Writer, res *Result, i int, m *system, r *shapeRuns) {
	writeBack(out, m.name)
	if res.DropsPageCache && dropsBefore(res.Rows, i) {
		if err := dropPageCache(dropCachesPath); err != nil {
			fmt.Fprintf(out, "%s  page cache not dropped: %v\n", m.name, err)
		}
	}
	if r.mem == nil && r.figs == nil && r.redone == 0 {
		if mem, err := readMemory(); err == nil {
			r.mem = &mem
		}
	}
	began := time.Now()
	stop := watchPauses()
	f := runMeasured(ctx, m.sd, r.shape)
	late := stop()
	r.took += time.Since(began)
	switch {
	case f.Err != "" || ctx.Err() != nil:
		r.failed = &f
	case late > machinePauseLimit && r.redone < pauseRedos:
		r.redone++
		r.paused = max(r.paused, late)
	default:
		r.figs = append(r.figs, f)
	}
}

// finish reads m's peak memory, profiles its profiled shapes and runs its
// failover measurement.
func finish(ctx context.Context, out io.Writer, logDir string, res *Result, kills int, m *system) error {
	name, sd := m.name, m.sd
	// Before the profiles and the failover run: those restart processes.
	if sp, ok := sd.(serverProcesses); ok {
		for _, pid := range sp.serverPIDs() {
			if hwm, err := peakRSSOf(pid); err == nil {
				*m.peakRSS = max(*m.peakRSS, hwm)
			}
		}
		fmt.Fprintf(out, "%s  peak RSS of one server process over the shapes: %.0f MB\n", name, float64(*m.peakRSS)/1e6)
	}
	if p, ok := sd.(profiler); ok {
		for _, s := range res.Rows {
			if !slices.Contains(profiled, s.Shape.Name) {
				continue
			}
			shape := s.Shape
			if shape.paced() { // again at the rate it ran at
				f := m.figure(&s)
				if f.Rate <= 0 {
					continue
				}
				shape.Rate, shape.Records = f.Rate, max(8, int64(f.Rate*shape.Seconds))
			}
			files, cpus, err := p.profile(ctx, shape, logDir)
			res.Profiles = append(res.Profiles, cpus...)
			if err != nil {
				fmt.Fprintf(out, "%s  profiling %s: %v\n", name, s.Shape.Label(), err)
				continue
			}
			fmt.Fprintf(out, "%s  profiled %s again (not in the table): %s\n", name, s.Shape.Label(), strings.Join(files, ", "))
		}
	}
	if fo, ok := sd.(failoverer); ok && kills > 0 {
		began := time.Now()
		f := fo.failover(ctx, out, kills)
		m.setFailover(res.Failover, f)
		fmt.Fprintf(out, "%s  failover: %s  (%.1fs)\n", name, f.brief(), time.Since(began).Seconds())
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	sd.stop()
	fmt.Fprintf(out, "== %s: stopped\n", name)
	return nil
}

// median is the median run by throughput (a paced shape's throughput is
// its pace: by p99 instead), with the spread of throughput; a run that
// failed is returned as it is.
func (r *shapeRuns) median() Figure {
	if r.failed != nil {
		return *r.failed
	}
	figs := r.figs
	runs := len(figs)
	if runs == 1 {
		f := figs[0]
		f.Redone, f.MachinePause = r.redone, r.paused
		return f
	}
	slices.SortFunc(figs, func(a, b Figure) int { return cmp.Compare(a.MsgsPerSec, b.MsgsPerSec) })
	lo, hi := figs[0].MsgsPerSec, figs[runs-1].MsgsPerSec
	if r.shape.paced() {
		slices.SortFunc(figs, func(a, b Figure) int { return cmp.Compare(a.P99, b.P99) })
	}
	f := figs[runs/2]
	f.Runs, f.MinMsgsPerSec, f.MaxMsgsPerSec = runs, lo, hi
	for _, g := range figs {
		f.MaxStealPct = max(f.MaxStealPct, g.StealPct)
	}
	f.Redone, f.MachinePause = r.redone, r.paused
	return f
}

// runMeasured runs s once and adds the CPU time per record of the side's
// server processes (read from /proc around the run) and of its client.
// Both systems are measured alike; on this machine's two cores the two
// together bound the throughput of a shape that keeps them busy.
func runMeasured(ctx context.Context, sd side, s Shape) Figure {
	// Read before the CPU time and after it: a scrape costs the brokers
	// CPU that is not the run's.
	var split func() *SyncSplit
	if sl, ok := sd.(syncSplitter); ok && s.Mode == Sync {
		split = sl.splitAround(ctx)
	}
	f := runCounted(ctx, sd, s)
	if split != nil && f.Err == "" {
		f.Split = split()
	}
	return f
}

// syncSplitter is a side that can say where a synchronous run's time went
// (tidemark's: its brokers' histograms).
type syncSplitter interface {
	// splitAround starts a split of what happens from now until the
	// returned func is called; nil when it cannot be had.
	splitAround(ctx context.Context) func() *SyncSplit
}

// runCounted is runMeasured's run with its CPU time and context switches.
func runCounted(ctx context.Context, sd side, s Shape) Figure {
	var pids []int
	var before usage
	sp, ok := sd.(serverProcesses)
	if ok {
		pids = sp.serverPIDs()
		var err error
		if before, err = usageOfAll(pids); err != nil {
			pids = nil
		}
	}
	ticks, ticksErr := readCPUTicks(procStatPath)
	f := sd.run(ctx, s)
	if ticksErr == nil {
		if after, err := readCPUTicks(procStatPath); err == nil {
			f.StealPct, f.StealMeasured = stealPct(ticks, after)
			f.MaxStealPct = f.StealPct
		}
	}
	n := recordsOf(s)
	if f.Err != "" || n <= 0 {
		return f
	}
	if len(pids) > 0 {
		// The same processes after the run: one that restarted (a PID that
		// changed) leaves the figure out rather than under-count it.
		if after, err := usageOfAll(pids); err == nil && slices.Equal(pids, sp.serverPIDs()) {
			f.ServerCPU = (after.cpu - before.cpu) / time.Duration(n)
			f.ServerSwitches = float64(after.switches-before.switches) / float64(n)
		}
	}
	f.ClientCPU = f.clientUsage.cpu / time.Duration(n)
	f.ClientSwitches = float64(f.clientUsage.switches) / float64(n)
	return f
}

// recordsOf is how many records a run of s sends (or reads), its paced
// warm-up included: the processes spend CPU on those too.
func recordsOf(s Shape) int64 {
	if s.paced() {
		return s.Records + int64(s.Rate*s.Warmup)
	}
	return s.Records
}

// paceFrom is the records/s one system reached in the shape named name,
// or 0 when it has no figure.
func paceFrom(res *Result, name string, figure func(*Row) *Figure) float64 {
	for i := range res.Rows {
		if res.Rows[i].Shape.Name == name {
			if f := figure(&res.Rows[i]); f.Err == "" && f.Failed == 0 {
				return f.MsgsPerSec
			}
		}
	}
	return 0
}

func (f Figure) brief() string {
	if f.Err != "" {
		return "error: " + f.Err
	}
	s := fmt.Sprintf("%.0f msgs/s", f.MsgsPerSec)
	if f.Rate > 0 {
		s += fmt.Sprintf(" (paced at %.0f/s)", f.Rate)
	}
	if f.Runs > 1 {
		s += fmt.Sprintf(" (median of %d runs, %.0f-%.0f)", f.Runs, f.MinMsgsPerSec, f.MaxMsgsPerSec)
	}
	if f.P99 > 0 {
		s += fmt.Sprintf(", p50 %s, p99 %s", ms(f.P50), ms(f.P99))
	}
	if f.Failed > 0 {
		s += fmt.Sprintf(", %d FAILED", f.Failed)
	}
	if f.StealMeasured {
		s += fmt.Sprintf("; host steal %.1f%%", f.StealPct)
		if f.MaxStealPct > f.StealPct+0.05 {
			s += fmt.Sprintf(" (max %.1f%%)", f.MaxStealPct)
		}
	}
	if f.Redone > 0 {
		s += fmt.Sprintf("; %d run(s) done again, the machine paused (up to %s)", f.Redone, ms(f.MachinePause))
	}
	return s
}

func (f FailoverFigure) brief() string {
	s := fmt.Sprintf("%d kills, writes again after min %s / median %s / max %s; %d acknowledged, %d failed, %d lost, %d duplicated",
		f.Kills, ms(f.Min), ms(f.Median), ms(f.Max), f.Acked, f.Failed, f.Lost, f.Duplicated)
	if f.Err != "" {
		s += "; error: " + f.Err
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// Machine describes where the run happened: CPU model and count, OS.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d × %s, %s/%s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}

// dropCachesPath is the kernel's knob that drops clean cached pages.
const dropCachesPath = "/proc/sys/vm/drop_caches"

// dropPageCache drops the clean page cache (after writeBack made it
// clean) by writing 1 to path. Writing into page-cache pages on this VM
// costs several times more CPU once gigabytes are cached (a 512 MiB file
// took 1.3-1.9 s of system time with 7.6 GB cached, 0.16-0.30 s after a
// drop; the kernel pages out cold memory here), so without it a shape's
// figures depended on how much the shapes before it, of either system,
// had written: the paced 1 KiB rows met a p99 of 258-336 ms in a run whose
// page cache had grown past 5 GB, and 5-13 ms on a dev cluster in the
// same state after a drop.
func dropPageCache(path string) error {
	return os.WriteFile(path, []byte("1"), 0)
}

// dropsBefore says whether the page cache may be dropped before row i: not
// when a consumer at or after i reads a shape run before i, since it reads
// what was just written from the cache, as users' consumers do.
func dropsBefore(rows []Row, i int) bool {
	for c := i; c < len(rows); c++ {
		if rows[c].Shape.Mode != Consume {
			continue
		}
		for j := range i {
			if rows[j].Shape.Name == rows[c].Shape.ReadsFrom {
				return false
			}
		}
	}
	return true
}

// writeBack writes the page cache back to disk before a shape: every
// replica of both systems shares this machine's disk, and the kernel's
// writeback of one shape's data otherwise stalls the next shape's
// processes (the paced shapes follow the batching ones that wrote
// hundreds of megabytes). Both systems get the same treatment.
func writeBack(out io.Writer, name string) {
	began := time.Now()
	syscall.Sync()
	if d := time.Since(began); d > time.Second {
		fmt.Fprintf(out, "%s  wrote the page cache back in %.1fs\n", name, d.Seconds())
	}
}
