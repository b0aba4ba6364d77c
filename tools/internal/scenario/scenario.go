// Package scenario plays the learning note's playbooks against a running
// dev cluster (`tidemark dev up`, or a test's own cluster): each scenario
// creates its own topic, injects its faults through the launcher's control
// API (kill, stop, pause, start) and the brokers' fault API (stall or slow
// a follower's fetching, cut the link between two brokers), narrates what happens as a timeline with the
// partition's per-replica LEO/HW/ISR table at each step, and checks that
// what the note says would happen did happen. Every scenario ends by undoing
// what it did: the nodes it acted on running, its faults cleared, the ISR
// full.
//
// A scenario's check is a pure function of the figures the run recorded
// (its facts), so a recorded trace that contradicts the note fails it
// without a cluster (see the unit tests).
package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/tlsconf"
)

// Env is where the dev cluster runs.
type Env struct {
	// Control is the launcher's control API (DevClusterService).
	Control     string
	Controllers []string
	// Brokers are indexed by id-1: broker-1 is Brokers[0].
	Brokers []string
	// Gateway serves the console (https://Gateway/, or http:// in plaintext).
	Gateway string
	// JaegerUI, when set, is where traces are shown.
	JaegerUI string
	// Logs are the nodes' log files by node name.
	Logs map[string]string
	// TLS is how every node and the launcher are dialled.
	TLS tlsconf.Options
}

// consoleURL is the gateway's console: HTTPS unless the cluster runs
// plaintext.
func (env Env) consoleURL() string {
	if env.TLS.Plaintext {
		return "http://" + env.Gateway + "/"
	}
	return "https://" + env.Gateway + "/"
}

// dial connects to one of the cluster's gRPC addresses with env.TLS.
func (env Env) dial(addr string) (*grpc.ClientConn, error) {
	d, err := env.TLS.DialOption()
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(addr, d)
}

// Discover asks the launcher at control, dialled with sec, for its nodes.
func Discover(ctx context.Context, control string, sec tlsconf.Options) (Env, error) {
	env := Env{Control: control, Logs: map[string]string{}, TLS: sec}
	conn, err := env.dial(control)
	if err != nil {
		return env, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := devclusterv1.NewDevClusterServiceClient(conn).ListNodes(ctx, &devclusterv1.ListNodesRequest{})
	if err != nil {
		return env, fmt.Errorf("the dev cluster's launcher at %s does not answer (is `tidemark dev up` running? --control names another): %w", control, err)
	}
	brokers := map[int32]string{}
	for _, n := range resp.GetNodes() {
		env.Logs[n.GetName()] = n.GetLogFile()
		switch n.GetKind() {
		case "controller":
			env.Controllers = append(env.Controllers, n.GetAddress())
		case "broker":
			brokers[n.GetId()] = n.GetAddress()
		case "gateway":
			env.Gateway = n.GetAddress()
		case "jaeger":
			env.JaegerUI = "http://" + n.GetAddress()
		}
	}
	for id := int32(1); int(id) <= len(brokers); id++ {
		addr, ok := brokers[id]
		if !ok {
			return env, fmt.Errorf("the launcher at %s lists brokers %v: ids are not 1..%d", control, brokers, len(brokers))
		}
		env.Brokers = append(env.Brokers, addr)
	}
	if len(env.Brokers) < 3 || len(env.Controllers) < 1 {
		return env, fmt.Errorf("the scenarios need at least 3 brokers and a controller; the launcher at %s runs %d brokers and %d controllers",
			control, len(env.Brokers), len(env.Controllers))
	}
	return env, nil
}

// Hold takes the launcher's scenario slot at env.Control for a run of name
// played in this process, so that neither the console's Scenarios panel
// nor another CLI starts one meanwhile: both would kill, pause and heal the
// same nodes. It refuses, naming the running one, while the launcher plays
// or another process holds one. release gives the slot back; the slot
// outlives ctx, so that a cancelled run still heals under it. A launcher
// that plays no scenarios has no slot to hold.
func Hold(ctx context.Context, env Env, name string) (release func(), err error) {
	conn, err := env.dial(env.Control)
	if err != nil {
		return nil, err
	}
	hold, cancel := context.WithCancel(context.WithoutCancel(ctx))
	release = func() {
		cancel()
		conn.Close()
	}
	late := time.AfterFunc(5*time.Second, cancel)
	stop := context.AfterFunc(ctx, cancel)
	stream, err := devclusterv1.NewDevClusterServiceClient(conn).HoldScenario(hold, &devclusterv1.HoldScenarioRequest{Name: name})
	if err == nil {
		_, err = stream.Recv()
	}
	timedOut, cancelled := !late.Stop(), !stop()
	switch {
	case err == nil && !timedOut && !cancelled:
		return release, nil
	case status.Code(err) == codes.Unimplemented:
		release()
		return func() {}, nil
	case status.Code(err) == codes.FailedPrecondition:
		release()
		return nil, fmt.Errorf("the launcher at %s refuses: %s", env.Control, status.Convert(err).Message())
	case cancelled:
		err = ctx.Err()
	case timedOut:
		err = errors.New("no answer within 5s")
	}
	release()
	return nil, fmt.Errorf("ask the launcher at %s for the scenario slot: %w", env.Control, err)
}

// Options shape a run's narration.
type Options struct {
	Out io.Writer
	// Explain prints, after the run, the note's questions the scenario
	// bears on, answered with the run's figures.
	Explain bool
	// Table renders a WatchCluster snapshot (the CLI passes `tidemark
	// watch`'s view); nil prints a plain table.
	Table func(io.Writer, *adminv1.WatchClusterResponse)
	// Wait bounds each wait for the cluster to reach a state (60s).
	Wait time.Duration
	// LagTime overrides the brokers' replica.lag.time.max.ms; 0 reads
	// broker 1's from DescribeConfigs (its startup flag included).
	LagTime time.Duration
	// Events, when set, gets the timeline as structured events (what the
	// launcher's RunScenario streams to the console), besides the text on
	// Out. It is called from the run's goroutines, one call at a time.
	Events func(*devclusterv1.RunScenarioResponse)
}

// Scenario is one playbook.
type Scenario struct {
	Name  string
	Title string
	// Note names the learning note's section.
	Note string
	// Rule is the one-paragraph explanation of the rule at work.
	Rule string
	play func(r *run) (facts, error)
}

// facts are a scenario's recorded figures: Verdict lists what contradicts
// the note (empty: as the note says), Explain answers its questions.
type facts interface {
	Verdict() []string
	Explain() string
}

// Result is a run's outcome.
type Result struct {
	Scenario string
	Topic    string
	// Failures list what did not happen as the note says.
	Failures []string
	Elapsed  time.Duration
}

// OK reports whether the run went as the note says.
func (r Result) OK() bool { return len(r.Failures) == 0 }

// Names lists the scenarios in the note's order.
func Names() []string {
	var names []string
	for _, s := range All() {
		names = append(names, s.Name)
	}
	return names
}

// Find returns the named scenario.
func Find(name string) (Scenario, error) {
	for _, s := range All() {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("no scenario %q (scenarios: %s)", name, strings.Join(Names(), ", "))
}

// Run plays the named scenario. The error is for a run that could not be
// carried out (cluster unreachable, a wait that timed out before the
// scenario's point could be checked); what contradicts the note is in
// Result.Failures.
func Run(ctx context.Context, name string, env Env, o Options) (Result, error) {
	s, err := Find(name)
	if err != nil {
		return Result{Scenario: name}, err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Wait <= 0 {
		o.Wait = 60 * time.Second
	}
	r, err := newRun(ctx, s, env, o)
	if err != nil {
		return Result{Scenario: name}, err
	}
	defer r.close()
	res := Result{Scenario: name, Topic: r.topic}
	r.emit(&devclusterv1.RunScenarioResponse{Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STARTED,
		Text: s.Title, Topic: r.topic, Rule: s.Rule})
	r.printf("scenario %s: %s (%s)\n", s.Name, s.Title, s.Note)
	r.printf("topic %s; console %s (its Scenarios panel plays this too)\n\n", r.topic, env.consoleURL())
	f, playErr := s.play(r)
	// Healing goes on after a Ctrl-C: a scenario must not leave a node
	// killed or paused, or a follower stalled.
	healCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*o.Wait)
	defer cancel()
	r.ctx = healCtx
	healErr := r.heal()
	res.Elapsed = time.Since(r.t0)
	if playErr != nil {
		err := errors.Join(playErr, healErr)
		r.finish(nil, err)
		return res, err
	}
	if healErr != nil {
		err := fmt.Errorf("the cluster was not healthy again after the scenario: %w", healErr)
		r.finish(nil, err)
		return res, err
	}
	r.printf("\nthe rule: %s\n", s.Rule)
	r.links()
	res.Failures = f.Verdict()
	r.finish(res.Failures, nil)
	if o.Explain {
		r.printf("\n%s", f.Explain())
	}
	if res.OK() {
		r.printf("\nverdict: as the note says (%s)\n", res.Elapsed.Round(100*time.Millisecond))
	} else {
		r.printf("\nverdict: NOT as the note says:\n")
		for _, fl := range res.Failures {
			r.printf("  - %s\n", fl)
		}
	}
	return res, nil
}

// run is one scenario's connections and timeline.
type run struct {
	ctx   context.Context
	s     Scenario
	env   Env
	o     Options
	t0    time.Time
	topic string
	outMu sync.Mutex

	admin  *client.Admin
	client *client.Client
	dev    devclusterv1.DevClusterServiceClient
	conns  []*grpc.ClientConn
	faults []faultv1.FaultInjectionServiceClient
	// brokers are the brokers' own APIs, by id - 1, for a write to one
	// broker whatever the metadata says.
	brokers []brokerv1.BrokerServiceClient
	http    *http.Client

	// created says the scenario's topic exists.
	created bool
	// hwTraces are the trace ids of the scenario topic's HW advances seen.
	hwTraces []string
	// events counts the structured events sent to Options.Events.
	events int32

	// touched is what heal undoes: only what the scenario did, not what an
	// operator or another tool did to the cluster.
	touched touched
}

// touched records the nodes a scenario acted on, the brokers whose
// fetching of its topic it slowed or stalled and the links it cut, each
// before the call, which a cancelled call may still have carried out.
type touched struct {
	mu      sync.Mutex
	nodes   map[string]bool
	brokers map[int32]bool
	links   map[[2]int32]bool // from, to
}

func (t *touched) node(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nodes == nil {
		t.nodes = map[string]bool{}
	}
	t.nodes[name] = true
}

func (t *touched) broker(id int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.brokers == nil {
		t.brokers = map[int32]bool{}
	}
	t.brokers[id] = true
}

func (t *touched) link(from, to int32) {
	t.broker(from)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.links == nil {
		t.links = map[[2]int32]bool{}
	}
	t.links[[2]int32{from, to}] = true
}

func (t *touched) hasLink(from, to int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.links[[2]int32{from, to}]
}

func (t *touched) hasNode(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodes[name]
}

func (t *touched) hasBroker(id int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.brokers[id]
}

func newRun(ctx context.Context, s Scenario, env Env, o Options) (*run, error) {
	r := &run{ctx: ctx, s: s, env: env, o: o, t0: time.Now(), http: &http.Client{Timeout: 2 * time.Second},
		topic: fmt.Sprintf("scenario-%s-%s", s.Name, strconv.FormatInt(time.Now().UnixMilli(), 36))}
	tc, err := env.TLS.ClientOrNil()
	if err != nil {
		return nil, err
	}
	if r.admin, err = client.NewAdmin(env.Controllers, client.Options{RequestTimeout: 5 * time.Second, TLS: tc}); err != nil {
		return nil, err
	}
	if r.client, err = client.New(env.Brokers, client.Options{RequestTimeout: 5 * time.Second, RetryBackoffMax: 300 * time.Millisecond, TLS: tc}); err != nil {
		r.close()
		return nil, err
	}
	dial := func(addr string) (*grpc.ClientConn, error) {
		c, err := env.dial(addr)
		if err == nil {
			r.conns = append(r.conns, c)
		}
		return c, err
	}
	c, err := dial(env.Control)
	if err != nil {
		r.close()
		return nil, err
	}
	r.dev = devclusterv1.NewDevClusterServiceClient(c)
	for _, b := range env.Brokers {
		c, err := dial(b)
		if err != nil {
			r.close()
			return nil, err
		}
		r.faults = append(r.faults, faultv1.NewFaultInjectionServiceClient(c))
		r.brokers = append(r.brokers, brokerv1.NewBrokerServiceClient(c))
	}
	return r, nil
}

func (r *run) close() {
	if r.client != nil {
		r.client.Close()
	}
	if r.admin != nil {
		r.admin.Close()
	}
	for _, c := range r.conns {
		c.Close()
	}
}

func (r *run) printf(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(r.o.Out, format, args...)
}

// step puts an event on the timeline.
func (r *run) step(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	r.printf("[%7.3fs] %s\n", time.Since(r.t0).Seconds(), text)
	r.emit(&devclusterv1.RunScenarioResponse{Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_STEP, Text: text})
}

// check puts on the timeline a state waited for or a point of the note
// checked, and whether it held.
func (r *run) check(what string, passed bool, detail string) {
	r.emit(&devclusterv1.RunScenarioResponse{Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_CHECK,
		Check: what, Passed: passed, Text: detail})
}

// finish ends the structured timeline: the verdict's failures, or the
// error that kept the run from one.
func (r *run) finish(failures []string, err error) {
	e := &devclusterv1.RunScenarioResponse{Kind: devclusterv1.ScenarioEventKind_SCENARIO_EVENT_KIND_FINISHED,
		Failures: failures, Passed: err == nil && len(failures) == 0}
	switch {
	case err != nil:
		e.Error = err.Error()
		e.Text = "the run could not be carried out: " + err.Error()
	case len(failures) == 0:
		e.Text = "as the note says"
	default:
		e.Text = "NOT as the note says: " + strings.Join(failures, "; ")
	}
	r.emit(e)
}

// emit stamps e with its index, time and scenario and hands it to
// Options.Events.
func (r *run) emit(e *devclusterv1.RunScenarioResponse) {
	if r.o.Events == nil {
		return
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	now := time.Now()
	e.Index, e.Scenario = r.events, r.s.Name
	e.TimeUnixMs, e.ElapsedMs = now.UnixMilli(), now.Sub(r.t0).Milliseconds()
	r.events++
	r.o.Events(e)
}

// links names where to look further: the console and, when Jaeger runs,
// the trace of a fetch that advanced the HW.
func (r *run) links() {
	r.printf("\nsee it in the console: %s (topic %s)\n", r.env.consoleURL(), r.topic)
	if r.env.JaegerUI == "" {
		return
	}
	if n := len(r.hwTraces); n > 0 {
		r.printf("the fetch that advanced the HW last: %s/trace/%s\n", strings.TrimRight(r.env.JaegerUI, "/"), r.hwTraces[n-1])
	} else {
		r.printf("traces: %s (no traced HW advance seen for the topic)\n", r.env.JaegerUI)
	}
}

// createTopic creates the scenario's topic (one partition, RF 3) and waits
// until it is led with its full ISR.
func (r *run) createTopic(configs map[string]string) (*adminv1.PartitionView, error) {
	return r.createTopicOn(nil, configs)
}

// createTopicOn is createTopic with the replicas given in preference order
// (nil: the controller places them).
func (r *run) createTopicOn(replicas []int32, configs map[string]string) (*adminv1.PartitionView, error) {
	spec := &adminv1.TopicSpec{Name: r.topic, NumPartitions: 1, ReplicationFactor: 3, Configs: configs}
	if replicas != nil {
		spec.NumPartitions, spec.ReplicationFactor = 0, 0
		spec.Assignments = []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: replicas}}
	}
	ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
	_, err := r.admin.CreateTopic(ctx, spec)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", r.topic, err)
	}
	r.created = true
	p, err := r.waitFor("the topic led with its full ISR", func(p *adminv1.PartitionView) bool {
		return p.GetLeader() > 0 && len(p.GetIsr()) == 3
	})
	if err != nil {
		return nil, err
	}
	r.step("created %s: replicas %v, leader %d, ISR %v, %v", r.topic, p.GetReplicas(), p.GetLeader(), p.GetIsr(), configs)
	return p, nil
}

// watch streams snapshots of the topic until each returns false or the
// wait bound passes, noting the HW advances' traces.
func (r *run) watch(timeout time.Duration, each func(*adminv1.WatchClusterResponse) bool) error {
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	req := &adminv1.WatchClusterRequest{Topics: []string{r.topic}, IntervalMs: 200}
	for msg, err := range r.admin.WatchCluster(ctx, req) {
		if err != nil {
			if ctx.Err() != nil && r.ctx.Err() == nil {
				return errTimeout
			}
			return err
		}
		for _, e := range msg.GetEvents() {
			if e.GetTopic() == r.topic && e.GetTraceId() != "" && e.GetKind() == controlv1.EventKind_EVENT_KIND_HW_ADVANCE {
				r.hwTraces = append(r.hwTraces, e.GetTraceId())
			}
		}
		if !each(msg) {
			return nil
		}
	}
	if ctx.Err() != nil && r.ctx.Err() == nil {
		return errTimeout
	}
	return r.ctx.Err()
}

var errTimeout = errors.New("timed out")

// waitFor waits until the topic's partition satisfies cond, and returns it.
func (r *run) waitFor(what string, cond func(*adminv1.PartitionView) bool) (*adminv1.PartitionView, error) {
	var got, last *adminv1.PartitionView
	err := r.watch(r.o.Wait, func(msg *adminv1.WatchClusterResponse) bool {
		if ps := msg.GetPartitions(); len(ps) > 0 {
			last = ps[0]
			if cond(ps[0]) {
				got = ps[0]
				return false
			}
		}
		return true
	})
	if got != nil {
		r.check(what, true, describe(got))
		return got, nil
	}
	if errors.Is(err, errTimeout) {
		err = fmt.Errorf("waiting for %s: not after %s (last seen: %s)", what, r.o.Wait, describe(last))
	} else {
		err = fmt.Errorf("waiting for %s: %w", what, err)
	}
	r.check(what, false, err.Error())
	return nil, err
}

// show prints the topic's current table. Brokers report their replicas'
// positions every half second, so it waits briefly for a snapshot where
// every in-sync replica's reported LEO has reached the HW (a just
// restarted follower reports late), and prints the last one it has.
func (r *run) show() *adminv1.PartitionView {
	var snap *adminv1.WatchClusterResponse
	_ = r.watch(1500*time.Millisecond, func(msg *adminv1.WatchClusterResponse) bool {
		snap = msg
		ps := msg.GetPartitions()
		return len(ps) == 0 || !settled(ps[0])
	})
	if snap == nil {
		r.printf("  (no snapshot from the controller)\n")
		return nil
	}
	r.table(snap)
	if ps := snap.GetPartitions(); len(ps) > 0 {
		return ps[0]
	}
	return nil
}

// settled says whether every live in-sync replica's reported LEO has
// reached the partition's HW.
func settled(p *adminv1.PartitionView) bool {
	for _, rv := range p.GetReplicaViews() {
		if rv.GetAlive() && rv.GetInIsr() && rv.GetLogEndOffset() < p.GetHighWatermark() {
			return false
		}
	}
	return true
}

func (r *run) table(snap *adminv1.WatchClusterResponse) {
	var b strings.Builder
	if r.o.Table != nil {
		r.o.Table(&b, snap)
	} else {
		plainTable(&b, snap)
	}
	r.printf("%s", indent(b.String()))
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "    " + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// plainTable is the fallback rendering: one line per replica.
func plainTable(w io.Writer, snap *adminv1.WatchClusterResponse) {
	fmt.Fprintf(w, "controller %d  controller_epoch %d\n", snap.GetCluster().GetController().GetId(), snap.GetCluster().GetControllerEpoch())
	for _, p := range snap.GetPartitions() {
		fmt.Fprintf(w, "%s\n", describe(p))
	}
}

// describe renders a partition on one line: leader, epoch, ISR, HW and
// each replica's LEO/HW.
func describe(p *adminv1.PartitionView) string {
	if p == nil {
		return "nothing"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s-%d leader %d epoch %d ISR %v HW %d |", p.GetTopic(), p.GetPartition(), p.GetLeader(), p.GetLeaderEpoch(), p.GetIsr(), p.GetHighWatermark())
	for _, rv := range p.GetReplicaViews() {
		mark := ""
		if rv.GetLeader() {
			mark = "*"
		}
		if !rv.GetAlive() {
			fmt.Fprintf(&b, " %d%s:down", rv.GetBrokerId(), mark)
			continue
		}
		fmt.Fprintf(&b, " %d%s:%d/%d", rv.GetBrokerId(), mark, rv.GetLogEndOffset(), rv.GetHighWatermark())
	}
	return b.String()
}

// replica returns broker id's view in p.
func replica(p *adminv1.PartitionView, id int32) *adminv1.ReplicaView {
	for _, rv := range p.GetReplicaViews() {
		if rv.GetBrokerId() == id {
			return rv
		}
	}
	return nil
}

// followers are p's replicas other than its leader, in assignment order.
func followers(p *adminv1.PartitionView) []int32 {
	var out []int32
	for _, id := range p.GetReplicas() {
		if id != p.GetLeader() {
			out = append(out, id)
		}
	}
	return out
}

func inISR(p *adminv1.PartitionView, id int32) bool { return slices.Contains(p.GetIsr(), id) }

// waitLeaderView waits until the leader's own metadata shows the
// partition as the controller does (leader epoch and ISR): the
// controller's view runs ahead of what the leader has applied.
func (r *run) waitLeaderView(p *adminv1.PartitionView) error {
	addr := r.env.Brokers[p.GetLeader()-1]
	want := slices.Sorted(slices.Values(p.GetIsr()))
	deadline := time.Now().Add(r.o.Wait)
	var last string
	for {
		bc, err := r.client.Broker(addr)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(r.ctx, 2*time.Second)
		md, err := bc.Metadata(ctx, &brokerv1.MetadataRequest{Topics: []string{r.topic}})
		cancel()
		if err == nil {
			for _, t := range md.GetTopics() {
				for _, mp := range t.GetPartitions() {
					isr := slices.Sorted(slices.Values(mp.GetIsr()))
					if mp.GetLeaderEpoch() == p.GetLeaderEpoch() && slices.Equal(isr, want) {
						return nil
					}
					last = fmt.Sprintf("leader epoch %d, ISR %v", mp.GetLeaderEpoch(), isr)
				}
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker %d's metadata never showed leader epoch %d, ISR %v (last: %s)", p.GetLeader(), p.GetLeaderEpoch(), want, last)
		}
		if err := sleep(r.ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// node acts on a node through the launcher.
func (r *run) node(action devclusterv1.Action, name string) error { return r.nodeWith(action, name) }

// nodeWith starts or restarts a node with extra arguments on top of its
// launch flags, for that start only.
func (r *run) nodeWith(action devclusterv1.Action, name string, extra ...string) error {
	r.touched.node(name)
	ctx, cancel := context.WithTimeout(r.ctx, 40*time.Second)
	defer cancel()
	_, err := r.dev.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: name, Action: action, ExtraArgs: extra})
	if err != nil {
		return fmt.Errorf("%s %s: %w", strings.ToLower(strings.TrimPrefix(action.String(), "ACTION_")), name, err)
	}
	return nil
}

// waitStopped waits until node name is no longer STOPPING (its graceful
// stop ends within 30 s, by SIGKILL at the latest) and returns it then.
func (r *run) waitStopped(name string) (*devclusterv1.DevNode, error) {
	deadline := time.Now().Add(40 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		resp, err := r.dev.ListNodes(ctx, &devclusterv1.ListNodesRequest{})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		for _, n := range resp.GetNodes() {
			if n.GetName() == name && n.GetState() != devclusterv1.NodeState_NODE_STATE_STOPPING {
				return n, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is still stopping after 40 s", name)
		}
		select {
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func brokerName(id int32) string { return fmt.Sprintf("broker-%d", id) }

// brokerEpoch is broker id's registration epoch as the controller knows it
// (0: not alive).
func (r *run) brokerEpoch(id int32) int64 {
	d, err := r.describeCluster()
	if err != nil {
		return 0
	}
	for _, b := range d.GetBrokers() {
		if b.GetNode().GetId() == id && b.GetAlive() {
			return b.GetBrokerEpoch()
		}
	}
	return 0
}

// waitBrokerAlive waits until the controller lists broker id as alive with
// a registration newer than epoch: a restarted process registers a moment
// after it starts, and until then the controller may still list the old one.
func (r *run) waitBrokerAlive(id int32, epoch int64) error {
	deadline := time.Now().Add(r.o.Wait)
	for {
		if e := r.brokerEpoch(id); e > epoch {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker %d not registered with the controller again after %s", id, r.o.Wait)
		}
		if err := sleep(r.ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// lastLogLine is the last line of node's log file about the topic that
// contains what, or "" (the log is not on this machine, or has none).
func (r *run) lastLogLine(node, what string) string {
	path := r.env.Logs[node]
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], what) && strings.Contains(lines[i], r.topic) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

// fetchFault sets a fetch fault on broker id's fetchers for the topic:
// stall stops its fetching, delay slows each round trip.
func (r *run) fetchFault(id int32, stall bool, delay time.Duration) error {
	r.touched.broker(id)
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	_, err := r.faults[id-1].SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{Fault: &faultv1.FetchFault{
		Topic: r.topic, Partition: -1, Stall: stall, DelayMs: int32(delay.Milliseconds())}})
	if err != nil {
		return fmt.Errorf("fault API of broker %d (is the cluster started with --fault-injection?): %w", id, err)
	}
	return nil
}

// clearFault lifts broker id's fetch fault on the topic.
func (r *run) clearFault(id int32) error { return r.fetchFault(id, false, 0) }

// cutLinks cuts (or heals) the links between brokers a and b, both ways:
// nothing either sends reaches the other, while both still reach etcd,
// the controllers and the clients.
func (r *run) cutLinks(a, b int32, cut bool) error {
	for _, l := range [][2]int32{{a, b}, {b, a}} {
		r.touched.link(l[0], l[1])
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		var err error
		if cut {
			_, err = r.faults[l[0]-1].CutLink(ctx, &faultv1.CutLinkRequest{BrokerId: l[0], ToBrokerId: l[1]})
		} else {
			_, err = r.faults[l[0]-1].HealLink(ctx, &faultv1.HealLinkRequest{BrokerId: l[0], ToBrokerId: l[1]})
		}
		cancel()
		if err != nil {
			return fmt.Errorf("fault API of broker %d (is the cluster started with --fault-injection?): %w", l[0], err)
		}
	}
	return nil
}

// isolate cuts broker id off from etcd and the controllers, and with peers
// from the other brokers too (or heals it), while its clients still reach
// it.
func (r *run) isolate(id int32, isolate, peers bool) error {
	r.touched.broker(id)
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	var err error
	if isolate {
		_, err = r.faults[id-1].Isolate(ctx, &faultv1.IsolateRequest{BrokerId: id, Peers: peers})
	} else {
		_, err = r.faults[id-1].HealIsolation(ctx, &faultv1.HealIsolationRequest{BrokerId: id})
	}
	if err != nil {
		return fmt.Errorf("fault API of broker %d (is the cluster started with --fault-injection?): %w", id, err)
	}
	return nil
}

// produceTo writes one record to broker id itself, whether or not it
// leads, and returns the error name it answered ("" when acknowledged).
func (r *run) produceTo(id int32, acks int32, v string) string {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	_, err := r.brokers[id-1].Produce(ctx, &brokerv1.ProduceRequest{Topic: r.topic, Partition: 0, Acks: acks, TimeoutMs: 2000,
		Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: []*commonv1.Record{{Value: []byte(v)}}}}})
	if err != nil {
		return kerr.CodeOf(kerr.FromStatus(err)).String()
	}
	return ""
}

// clearFaults removes the topic's fault and the links the scenario cut
// from broker id's list. The fault API clears only the whole list, so the
// faults and cuts others set on the broker are set again.
func (r *run) clearFaults(id int32) error {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	fc := r.faults[id-1]
	list, err := fc.ListFaults(ctx, &faultv1.ListFaultsRequest{})
	if err != nil {
		return err
	}
	if _, err := fc.ClearFaults(ctx, &faultv1.ClearFaultsRequest{}); err != nil {
		return err
	}
	for _, f := range list.GetFaults() {
		if f.GetTopic() == r.topic {
			continue
		}
		if _, err := fc.SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{Fault: f}); err != nil {
			return err
		}
	}
	for _, l := range list.GetLinks() {
		if r.touched.hasLink(id, l.GetToBrokerId()) {
			continue
		}
		if _, err := fc.CutLink(ctx, &faultv1.CutLinkRequest{BrokerId: id, ToBrokerId: l.GetToBrokerId()}); err != nil {
			return err
		}
	}
	return nil
}

// heal leaves the cluster as the scenario found it: every node it acted on
// running with its own flags, none of its fetch faults or link cuts left,
// the topic's ISR full.
func (r *run) heal() error {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	resp, err := r.dev.ListNodes(ctx, &devclusterv1.ListNodesRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	var errs []error
	restarted := map[string]bool{}
	for _, n := range resp.GetNodes() {
		if !r.touched.hasNode(n.GetName()) {
			continue
		}
		if n.GetState() == devclusterv1.NodeState_NODE_STATE_STOPPING {
			// A stop in flight (the launcher's, or a console page's) takes
			// up to 30 s: heal what it leaves.
			r.step("healing: wait for %s to finish stopping", n.GetName())
			if n, err = r.waitStopped(n.GetName()); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		switch n.GetState() {
		case devclusterv1.NodeState_NODE_STATE_PAUSED:
			r.step("healing: resume %s", n.GetName())
			errs = append(errs, r.node(devclusterv1.Action_ACTION_RESUME, n.GetName()))
		case devclusterv1.NodeState_NODE_STATE_STOPPED, devclusterv1.NodeState_NODE_STATE_EXITED:
			r.step("healing: start %s", n.GetName())
			errs = append(errs, r.node(devclusterv1.Action_ACTION_START, n.GetName()))
			restarted[n.GetName()] = true
		case devclusterv1.NodeState_NODE_STATE_RUNNING:
			// A node the scenario started in another mode goes back to its
			// own flags.
			if len(n.GetExtraArgs()) > 0 {
				r.step("healing: restart %s with its own flags (it ran with %s)", n.GetName(), strings.Join(n.GetExtraArgs(), " "))
				errs = append(errs, r.node(devclusterv1.Action_ACTION_RESTART, n.GetName()))
				restarted[n.GetName()] = true
			}
		}
	}
	for i := range r.faults {
		id := int32(i + 1)
		if !r.touched.hasBroker(id) || restarted[brokerName(id)] {
			continue // a new process has no faults (and may not listen yet)
		}
		if err := r.clearFaults(id); err != nil {
			errs = append(errs, fmt.Errorf("clear the faults of broker %d: %w", id, err))
		}
	}
	if err := errors.Join(errs...); err != nil || !r.created {
		return err
	}
	_, err = r.waitFor("the topic's ISR full again", func(p *adminv1.PartitionView) bool {
		if p.GetLeader() <= 0 || len(p.GetIsr()) != len(p.GetReplicas()) {
			return false
		}
		for _, rv := range p.GetReplicaViews() {
			if !rv.GetAlive() {
				return false
			}
		}
		return true
	})
	return err
}

// produced is what a producer got acknowledged.
type produced struct {
	acked  map[string]int64 // value -> offset
	failed int
	codes  map[string]int // error name -> count
}

// produce writes n records with the given acks, one at a time, each
// waiting for its answer; retries off, so an error is what the leader said.
func (r *run) produce(n int, acks client.Acks, tag string) (produced, error) {
	out := produced{acked: map[string]int64{}, codes: map[string]int{}}
	p, err := client.NewProducer(r.client, client.ProducerOptions{Acks: acks, Idempotence: client.IdempotenceOff,
		Linger: -1, Retries: -1, RequestTimeout: 5 * time.Second, DeliveryTimeout: 10 * time.Second})
	if err != nil {
		return out, err
	}
	defer p.Close(context.Background())
	for i := range n {
		v := fmt.Sprintf("%s-%d", tag, i)
		ctx, cancel := context.WithTimeout(r.ctx, 12*time.Second)
		res, err := p.Produce(ctx, client.Record{Topic: r.topic, Partition: 0, ManualPartition: true, Value: []byte(v)})
		cancel()
		if err != nil {
			out.failed++
			out.codes[res.Code.String()]++
			continue
		}
		out.acked[v] = res.Offset
	}
	return out, nil
}

// produceValue writes one record with acks=all, retries off, waiting up to
// timeout for the answer, and returns its offset.
func (r *run) produceValue(v string, timeout time.Duration) (int64, error) {
	p, err := client.NewProducer(r.client, client.ProducerOptions{Acks: client.AcksAll, Idempotence: client.IdempotenceOff,
		Linger: -1, Retries: -1, RequestTimeout: timeout, DeliveryTimeout: timeout + time.Second})
	if err != nil {
		return 0, err
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(r.ctx, timeout+2*time.Second)
	defer cancel()
	res, err := p.Produce(ctx, client.Record{Topic: r.topic, Partition: 0, ManualPartition: true, Value: []byte(v)})
	if err != nil {
		return 0, fmt.Errorf("produce %s with acks=all: %w", v, err)
	}
	return res.Offset, nil
}

// produceBatch writes values in one batch (as one produce request) with
// acks=1 and returns how many were acknowledged.
func (r *run) produceBatch(values ...string) (int, error) {
	p, err := client.NewProducer(r.client, client.ProducerOptions{Acks: client.AcksLeader, Idempotence: client.IdempotenceOff,
		Linger: 100 * time.Millisecond, Retries: -1, RequestTimeout: 5 * time.Second, DeliveryTimeout: 10 * time.Second})
	if err != nil {
		return 0, err
	}
	defer p.Close(context.Background())
	var mu sync.Mutex
	acked := 0
	var errs []error
	for _, v := range values {
		p.ProduceAsync(client.Record{Topic: r.topic, Partition: 0, ManualPartition: true, Value: []byte(v)}, func(_ client.Result, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			acked++
		})
	}
	ctx, cancel := context.WithTimeout(r.ctx, 12*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		return acked, err
	}
	mu.Lock()
	defer mu.Unlock()
	return acked, errors.Join(errs...)
}

// background is a producer writing acks=all records until stopped, as in
// the note's playbooks (acks=all, idempotent).
type background struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	acked  map[string]int64
	failed int
}

func (r *run) startProducer(tag string, every time.Duration) (*background, error) {
	p, err := client.NewProducer(r.client, client.ProducerOptions{Acks: client.AcksAll, Idempotence: client.IdempotenceOn,
		RequestTimeout: 3 * time.Second, DeliveryTimeout: 20 * time.Second})
	if err != nil {
		return nil, err
	}
	b := &background{stop: make(chan struct{}), done: make(chan struct{}), acked: map[string]int64{}}
	go func() {
		defer close(b.done)
		var wg sync.WaitGroup
		for i := 0; ; i++ {
			select {
			case <-b.stop:
				wg.Wait()
				ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
				_ = p.Close(ctx)
				cancel()
				return
			case <-time.After(every):
			}
			v := fmt.Sprintf("%s-%d", tag, i)
			wg.Add(1)
			p.ProduceAsync(client.Record{Topic: r.topic, Partition: 0, ManualPartition: true, Value: []byte(v)}, func(res client.Result, err error) {
				defer wg.Done()
				b.mu.Lock()
				defer b.mu.Unlock()
				if err != nil {
					b.failed++
					return
				}
				b.acked[v] = res.Offset
			})
		}
	}()
	return b, nil
}

func (b *background) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.acked)
}

// finish stops the producer and returns what it got acknowledged.
func (b *background) finish() (map[string]int64, int) {
	close(b.stop)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.acked, b.failed
}

// readAll reads the partition from its start to its HW.
func (r *run) readAll() (map[string]int64, int64, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	end, err := r.client.ListOffsets(ctx, r.topic, 0, client.Latest())
	if err != nil {
		return nil, 0, fmt.Errorf("list offsets: %w", err)
	}
	cs, err := client.NewConsumer(r.client, client.ConsumerOptions{Topic: r.topic, Partition: 0,
		StartOffset: client.OffsetEarliest, MaxWait: 200 * time.Millisecond})
	if err != nil {
		return nil, 0, err
	}
	defer cs.Close()
	got := map[string]int64{}
	for cs.Position() < end.Offset {
		recs, err := cs.Poll(ctx)
		if err != nil {
			return got, end.Offset, fmt.Errorf("read at offset %d of %d: %w", cs.Position(), end.Offset, err)
		}
		for _, rc := range recs {
			got[string(rc.Value)] = rc.Offset
		}
	}
	return got, end.Offset, nil
}

// missing lists the acknowledged values not read back.
func missing(acked, read map[string]int64) []string {
	var out []string
	for v := range acked {
		if _, ok := read[v]; !ok {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// describeCluster asks the controllers for the cluster.
func (r *run) describeCluster() (*adminv1.DescribeClusterResponse, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	return r.admin.DescribeCluster(ctx)
}

func (r *run) alterTopic(key, value string) error {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	resp, err := r.admin.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: r.topic},
		Ops:      []*adminv1.ConfigOp{{Name: key, Value: value, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}}}})
	if err != nil {
		return err
	}
	for _, res := range resp.GetResults() {
		if res.GetErrorCode() != 0 {
			return fmt.Errorf("set %s=%s on %s: %s %s", key, value, r.topic, res.GetErrorCode(), res.GetErrorMessage())
		}
	}
	return nil
}

// brokerConfig returns broker id's effective value of key.
func (r *run) brokerConfig(id int32, key string) (string, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	resp, err := r.admin.DescribeConfigs(ctx, &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{{
		Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: strconv.Itoa(int(id))}}})
	if err != nil {
		return "", err
	}
	for _, d := range resp.GetResults() {
		if d.GetErrorCode() != 0 {
			return "", fmt.Errorf("describe broker %d's configs: %s %s", id, d.GetErrorCode(), d.GetErrorMessage())
		}
		for _, e := range d.GetEntries() {
			if e.GetName() == key {
				return e.GetValue(), nil
			}
		}
	}
	return "", fmt.Errorf("broker %d has no config %s", id, key)
}

// lagTimeOr is Options.LagTime when set, else what the controller says
// broker 1's replica.lag.time.max.ms is.
func (r *run) lagTimeOr() time.Duration {
	if r.o.LagTime > 0 {
		return r.o.LagTime
	}
	return r.lagTime()
}

// lagTime is the brokers' replica.lag.time.max.ms (broker 1's).
func (r *run) lagTime() time.Duration {
	v, err := r.brokerConfig(1, "replica.lag.time.max.ms")
	if err != nil {
		return 0
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
