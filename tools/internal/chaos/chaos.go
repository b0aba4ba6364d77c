// Package chaos is a seeded nemesis against a dev cluster of separate
// processes (tools/internal/devcluster: an embedded etcd, controllers,
// brokers and the gateway, each its own process from bin/), as users run
// tidemark. It writes and reads through the Go client while it kills
// (SIGKILL), stops (SIGTERM, a controlled shutdown), pauses (SIGSTOP) and
// restarts the real processes, kills or freezes the active controller, asks for
// preferred and unclean elections and stalls followers through the
// brokers' fault API, with idle gaps in the traffic, where a cluster's
// quiet-time defects hide. Then it heals everything, waits through a quiet
// period with no produce, polls until every partition is whole (a leader,
// the full ISR, HW = LEO on every replica), checks that the active
// controller's views agree (views.go), stops the cluster, reads every
// replica's log from disk and checks the recorded history against Kafka's
// promises with services/clustertest/history.
//
// The in-process nemesis (services/clustertest) controls time and the
// network finely; this one exercises what only separate processes have:
// signals, process restarts with recovery from disk, real sockets, the
// binaries' flags and defaults.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest/history"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/devcluster/links"
)

// Options configure one run. Zero values pick the defaults shown.
type Options struct {
	Seed uint64
	// Faults is how long faults are injected while the workload runs (60s).
	Faults time.Duration
	// BinDir holds broker, controller and gateway.
	BinDir string
	// DataDir is the cluster's data dir; empty makes a temporary one, removed
	// after a passing run unless KeepData. A failed run always keeps it.
	DataDir  string
	KeepData bool
	// PortBase is the first of devcluster.PortSpan ports; 0 finds a free
	// range (never the documented ports a `make run` may hold).
	PortBase int
	// LagTime is replica.lag.time.max.ms (2.5s).
	LagTime time.Duration
	// Quiet is the quiet period after healing, with no produce (2 lag times
	// plus 2s).
	Quiet time.Duration
	// LivenessBound: every partition must be whole within it after the
	// faults stopped (producers' close + quiet period + 30s).
	LivenessBound time.Duration
	// DumpStuck sends SIGQUIT to the brokers that kept a partition from
	// being whole, before the cluster stops: their goroutine stacks land
	// in their logs. It disturbs the final state read from disk (their
	// partitions fail over while the others stop), so it is off by default.
	DumpStuck bool
	// MaxFaults bounds the fault steps (200).
	MaxFaults int
	// NoLinks launches the cluster without the proxies of
	// devcluster.Options.Links, and so without the network-cut steps.
	NoLinks bool
	// Plaintext runs the cluster without TLS (devcluster.Options.Plaintext).
	Plaintext bool
	// Steps, when set, are the only fault steps the nemesis picks from
	// (by name, see steps).
	Steps []string
	// Out receives the timeline as it happens and the report.
	Out io.Writer
	// Replay is the command that replays this run, printed on failure; %d
	// is replaced by the seed.
	Replay string
}

func (o Options) withDefaults() Options {
	if o.Faults <= 0 {
		o.Faults = 60 * time.Second
	}
	if o.LagTime <= 0 {
		o.LagTime = 2500 * time.Millisecond
	}
	if o.Quiet <= 0 {
		o.Quiet = 2*o.LagTime + 2*time.Second
	}
	if o.LivenessBound <= 0 {
		o.LivenessBound = producerCloseBound + o.Quiet + 30*time.Second
	}
	if o.MaxFaults <= 0 {
		o.MaxFaults = 200
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Replay == "" {
		o.Replay = fmt.Sprintf("bin/tidemark chaos run --seed %%d --seconds %d", int(o.Faults.Seconds()))
	}
	return o
}

// Result is a run's outcome.
type Result struct {
	Seed    uint64
	DataDir string
	// DataKept says whether DataDir is still there.
	DataKept bool
	Report   history.Report
	// Timeline is every fault, heal and observation, in order.
	Timeline []history.Event
	// Replay is the command that runs the same seed again.
	Replay string
	// Fences are the isolated leaders (isolate-leader) and what their
	// acknowledgements show.
	Fences []Fence
	// AcksOneLost counts, per topic, acknowledged acks=1 writes missing
	// from the final log: nothing promises them in general (a leader
	// killed before its followers copied them), only the fence promises
	// that an isolated leader acknowledges none after the new leader's
	// election (Fence.OK).
	AcksOneLost map[string]int
	// Views are where the active controller's views (tidemark watch, the
	// console) still disagreed with the brokers' own positions once every
	// partition was whole: an operator would have been shown a wrong state.
	Views []string
	// SlowStops are graceful broker stops, made while another broker was
	// frozen, that took longer than 10 s: the stop waited for the frozen
	// broker's connections.
	SlowStops []string
	// Strays are partition logs still on a broker the partition was moved
	// off (a reassignment) once everything was quiet: the broker never
	// deleted them, so they hold its disk for good.
	Strays []string
	// Unserved are partitions that looked whole once everything was quiet
	// but did not take a client's acks=all write, or never handed it to a
	// consumer (probeServing): their named leader did not serve.
	Unserved []string
}

// OK reports whether the run kept every promise.
func (r Result) OK() bool {
	if len(r.Views) > 0 || len(r.SlowStops) > 0 || len(r.Strays) > 0 || len(r.Unserved) > 0 {
		return false
	}
	for _, f := range r.Fences {
		if !f.OK() {
			return false
		}
	}
	return r.Report.OK()
}

// topicPlan is one topic of the workload.
type topicPlan struct {
	name       string
	partitions int32
	configs    map[string]string
	// idempotent: written by the idempotent acks=all producer, else by the
	// plain acks=1 one.
	idempotent bool
	// rf is the replication factor (3 when 0).
	rf int32
}

// durable says whether the topic's configuration promises acknowledged
// acks=all writes (history.Promised).
func (t topicPlan) durable() bool {
	minISR, _ := strconv.Atoi(t.configs["min.insync.replicas"])
	return history.Promised(minISR, t.configs["unclean.leader.election.enable"] == "true")
}

// The workload's topics: acks=all with min.insync.replicas 2 (small
// segments, so restarts recover several), acks=1 on a topic with the same
// promise for acks=all, a short retention that may empty an idle topic,
// the only topic where unclean elections are allowed (outside the promise),
// and an RF 2 topic the reassign step moves around.
func topicPlans() []topicPlan {
	return []topicPlan{
		{name: "durable", partitions: 3, idempotent: true, configs: map[string]string{
			"min.insync.replicas": "2", "segment.bytes": "16384", "segment.ms": "5000"}},
		{name: "retained", partitions: 1, idempotent: true, configs: map[string]string{
			"min.insync.replicas": "2", "segment.bytes": "4096", "segment.ms": "2000", "retention.ms": "5000"}},
		{name: "leader-acks", partitions: 2, configs: map[string]string{
			"min.insync.replicas": "2", "segment.bytes": "8192"}},
		{name: "unclean", partitions: 1, configs: map[string]string{
			"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}},
		{name: movingTopic, partitions: 2, idempotent: true, rf: 2, configs: map[string]string{
			"min.insync.replicas": "2", "segment.bytes": "8192"}},
	}
}

// movingTopic is the topic the reassign step moves between brokers: RF 2
// on 3 brokers, so every move adds a replica that copies the log and
// removes one that must delete it.
const movingTopic = "moving"

func (t topicPlan) replicationFactor() int32 {
	if t.rf == 0 {
		return 3
	}
	return t.rf
}

// producerCloseBound bounds the producers' close after the faults: their
// delivery timeout plus a margin.
const (
	deliveryTimeout    = 15 * time.Second
	producerCloseBound = deliveryTimeout + 5*time.Second
)

type runner struct {
	o     Options
	out   io.Writer
	outMu sync.Mutex
	rec   *history.Recorder
	t0    time.Time

	cl            *devcluster.Cluster
	admin         *client.Admin
	client        *client.Client
	conns         []*grpc.ClientConn
	faults        map[int32]faultv1.FaultInjectionServiceClient
	brokerMetrics map[int32]string
	http          *http.Client
	topics        []topicPlan
	w             *workload
	links         *links.Net
	epochs        ackEpochs
	fences        []Fence
	slowStops     []string // see stepPause
	strays        []string // see Result.Strays
}

// Run runs one seeded schedule. The error is for a run that could not be
// carried out (binaries missing, no free ports, the cluster never came up);
// broken promises are in Result.Report.
func Run(ctx context.Context, o Options) (res Result, err error) {
	o = o.withDefaults()
	r := &runner{o: o, out: o.Out, rec: history.NewRecorder(), t0: time.Now(), topics: topicPlans(),
		faults: map[int32]faultv1.FaultInjectionServiceClient{}, brokerMetrics: map[int32]string{},
		http: &http.Client{Timeout: 3 * time.Second}}
	res = Result{Seed: o.Seed, Replay: strings.ReplaceAll(o.Replay, "%d", fmt.Sprint(o.Seed))}

	for _, name := range o.Steps {
		if !slices.Contains(StepNames(), name) {
			return res, fmt.Errorf("unknown fault step %q (steps: %s)", name, strings.Join(StepNames(), ", "))
		}
	}
	temp := o.DataDir == ""
	if temp {
		if o.DataDir, err = os.MkdirTemp("", fmt.Sprintf("tidemark-chaos-%d-", o.Seed)); err != nil {
			return res, err
		}
		r.o.DataDir = o.DataDir
	}
	res.DataDir, res.DataKept = o.DataDir, true
	defer func() {
		r.shutdown()
		res.Timeline = r.rec.History().Events
		// A passing run leaves nothing; neither does one whose cluster never
		// started (there is nothing to read in its data dir).
		if temp && !o.KeepData && ((err == nil && res.OK()) || r.cl == nil) {
			if os.RemoveAll(o.DataDir) == nil {
				res.DataKept = false
			}
		}
		if res.DataKept && (err != nil || !res.OK()) {
			r.printf("data dir kept: %s (node logs in %s)\n", o.DataDir, filepath.Join(o.DataDir, "logs"))
			r.printf("seed %d; replay: %s\n", o.Seed, res.Replay)
		}
	}()

	r.printf("chaos seed %d: %s of faults, replica.lag.time.max.ms %d, data in %s\n", o.Seed, o.Faults, o.LagTime.Milliseconds(), o.DataDir)
	if err := r.start(ctx); err != nil {
		return res, err
	}
	if err := r.createTopics(ctx); err != nil {
		return res, err
	}
	r.w = r.startWorkload(ctx)
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		r.watch(ctx, stopWatch, time.Second)
	}()
	faultsStopped := r.nemesis(ctx)
	r.note("stopping the producers (bounded by %s)", producerCloseBound)
	r.w.stopProducing()
	r.note("quiet period: %s with no produce", o.Quiet)
	if err := sleep(ctx, o.Quiet); err != nil {
		return res, err
	}
	close(stopWatch)
	<-watched
	last := r.pollLive(ctx, faultsStopped)
	res.Views = r.checkViews(ctx, last)
	for _, d := range res.Views {
		r.note("VIEW WRONG %s", d)
	}
	if len(res.Views) == 0 {
		r.note("the active controller's views show every replica where its broker has it")
	}
	res.Unserved = r.probeServing(ctx, last)
	for _, u := range res.Unserved {
		r.note("NOT SERVING %s", u)
	}
	last = r.repollLive(ctx, last)
	r.w.stopReading()
	if o.DumpStuck {
		r.dumpStuck(last)
	}
	final, err := r.readFinal(ctx, faultsStopped, last)
	if err != nil {
		return res, err
	}
	durable, retention := map[string]bool{}, map[string]bool{}
	for _, t := range r.topics {
		durable[t.name] = t.durable()
		_, retention[t.name] = t.configs["retention.ms"]
	}
	res.SlowStops = r.slowStops
	res.Strays = r.strays
	for _, s := range res.Strays {
		r.printf("STRAY LOG %s\n", s)
	}
	h := r.rec.History()
	res.Report = history.Check(h, final, history.Options{Durable: durable, Retention: retention, LivenessBound: o.LivenessBound})
	r.printf("\n%s\n", res.Report)
	res.AcksOneLost = acksOneLost(h, final)
	r.printf("acknowledged acks=1 writes lost (promised by no topic; the isolated leaders' below): %v\n", res.AcksOneLost)
	res.Fences = r.judgeFences(h, final)
	for _, f := range res.Fences {
		verdict := "fence held"
		if !f.OK() {
			verdict = "FENCE BROKEN"
		}
		r.printf("%s: %s\n", verdict, f)
	}
	if !res.OK() {
		r.saveHistory(h, final, res.Report)
	}
	return res, nil
}

// start launches the cluster on a free port range with short timings.
func (r *runner) start(ctx context.Context) error {
	base := r.o.PortBase
	if base == 0 {
		var err error
		if base, err = freePortBase(r.o.Seed, r.span()); err != nil {
			return err
		}
	}
	lag := r.o.LagTime.Milliseconds()
	opts := devcluster.Options{
		DataDir: r.o.DataDir, BinDir: r.o.BinDir, Brokers: 3, Controllers: 2, PortBase: base,
		FaultInjection: true, Links: !r.o.NoLinks, Plaintext: r.o.Plaintext,
		BrokerArgs: []string{
			fmt.Sprintf("--broker.session.timeout.ms=%d", leaseTTL.Milliseconds()),
			fmt.Sprintf("--config=replica.lag.time.max.ms=%d", lag),
			fmt.Sprintf("--config=replica.fetch.wait.max.ms=%d", min(250, lag)),
			// Retention runs every second, so it empties the short-retention
			// topic during idle gaps, as it would an idle topic in production.
			"--config=log.retention.check.interval.ms=1000",
		},
		// A short imbalance check makes the controller's own preferred
		// elections part of the run.
		ControllerArgs: []string{"--leader.imbalance.check.interval.seconds=10"},
	}
	if err := os.MkdirAll(r.o.DataDir, 0o755); err != nil {
		return err
	}
	launcherLog, err := os.Create(filepath.Join(r.o.DataDir, "launcher.log"))
	if err != nil {
		return err
	}
	defer launcherLog.Close()
	cl, err := devcluster.Up(ctx, opts, launcherLog)
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	r.cl = cl
	r.links = cl.Links()
	ports := cl.Options().Ports()
	r.note("cluster up on ports %d-%d (etcd %s, controllers %s, brokers %s; links: %v)", base, base+r.span()-1,
		ports.EtcdClient, strings.Join(ports.Controllers, ","), strings.Join(ports.Brokers, ","), r.links != nil)
	sec := cl.Options().Security()
	tc, err := sec.ClientOrNil()
	if err != nil {
		return err
	}
	dial, err := sec.DialOption()
	if err != nil {
		return err
	}
	if r.admin, err = client.NewAdmin(ports.Controllers, client.Options{RequestTimeout: 5 * time.Second, TLS: tc}); err != nil {
		return err
	}
	if r.client, err = client.New(ports.Brokers, client.Options{RequestTimeout: 5 * time.Second, RetryBackoffMax: 500 * time.Millisecond, TLS: tc}); err != nil {
		return err
	}
	for i, addr := range ports.Brokers {
		conn, err := grpc.NewClient(addr, dial)
		if err != nil {
			return err
		}
		r.conns = append(r.conns, conn)
		r.faults[int32(i+1)] = faultv1.NewFaultInjectionServiceClient(conn)
		r.brokerMetrics[int32(i+1)] = ports.BrokerMetrics[i]
	}
	// Every broker registered and alive before the topics are placed.
	return waitFor(ctx, 45*time.Second, "3 brokers alive", func() error {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		d, err := r.admin.DescribeCluster(dctx)
		if err != nil {
			return err
		}
		alive := 0
		for _, b := range d.GetBrokers() {
			if b.GetAlive() {
				alive++
			}
		}
		if alive < 3 {
			return fmt.Errorf("%d alive", alive)
		}
		return nil
	})
}

func (r *runner) createTopics(ctx context.Context) error {
	for _, t := range r.topics {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		res, err := r.admin.CreateTopic(cctx, &adminv1.TopicSpec{Name: t.name, NumPartitions: t.partitions,
			ReplicationFactor: t.replicationFactor(), Configs: t.configs})
		cancel()
		if err != nil {
			return fmt.Errorf("create topic %s: %w", t.name, err)
		}
		r.note("topic %s: %d partitions, RF %d, %v, assignments %v", t.name, t.partitions, t.replicationFactor(), t.configs,
			assignments(res.GetAssignments()))
	}
	return waitFor(ctx, 30*time.Second, "every partition led with its full ISR", func() error {
		obs, err := r.observe(ctx)
		if err != nil {
			return err
		}
		for _, ps := range obs.partitions {
			if ps.Leader < 0 || len(ps.ISR) != len(ps.Replicas) {
				return errors.New(stateLine(ps))
			}
		}
		return nil
	})
}

func assignments(as []*adminv1.ReplicaAssignment) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%d:%v", a.GetPartition(), a.GetReplicas()))
	}
	return strings.Join(parts, " ")
}

func (r *runner) topicNames() []string {
	var names []string
	for _, t := range r.topics {
		names = append(names, t.name)
	}
	return names
}

// pollLive polls until every partition is whole or the liveness bound
// after the faults stopped has passed, and returns the last observation
// with each partition's LiveAt set (the first observation that found it
// whole).
func (r *runner) pollLive(ctx context.Context, faultsStopped time.Time) observation {
	liveAt := map[history.TP]time.Time{}
	deadline := faultsStopped.Add(r.o.LivenessBound)
	var last observation
	var lastErr error
	for {
		obs, err := r.observe(ctx)
		if err == nil {
			last, lastErr = obs, nil
			all := true
			for i := range last.partitions {
				ps := &last.partitions[i]
				if ok, _ := ps.Live(); ok && liveAt[ps.TP].IsZero() {
					liveAt[ps.TP] = obs.at
					r.note("live after %s: %s", obs.at.Sub(faultsStopped).Round(time.Millisecond), stateLine(*ps))
				}
				ps.LiveAt = liveAt[ps.TP]
				if ps.LiveAt.IsZero() {
					all = false
				}
			}
			if all {
				return last
			}
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if lastErr != nil {
				r.note("could not observe the cluster: %v", lastErr)
			}
			for _, ps := range last.partitions {
				if ps.LiveAt.IsZero() {
					_, why := ps.Live()
					r.note("NOT live %s after the faults stopped (%s): %s", time.Since(faultsStopped).Round(time.Millisecond), why, stateLine(ps))
				}
			}
			return last
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// dumpStuck sends SIGQUIT to the brokers of the replicas that kept a
// partition from being whole: each prints its goroutines' stacks into its
// log (where a fetcher or a purgatory is stuck) and exits.
func (r *runner) dumpStuck(last observation) {
	stuck := map[int32]bool{}
	for _, ps := range last.partitions {
		if !ps.LiveAt.IsZero() {
			continue
		}
		for _, rs := range ps.Replicas {
			if !slices.Contains(ps.ISR, rs.Broker) || rs.HW != rs.LEO || (rs.Readable && rs.LEO != ps.Replicas[0].LEO) {
				stuck[rs.Broker] = true
			}
		}
	}
	for _, id := range sortedIDs(stuck) {
		n, err := r.cl.Node(fmt.Sprintf("broker-%d", id))
		if err != nil {
			continue
		}
		if err := n.Quit(10 * time.Second); err != nil {
			r.note("SIGQUIT %s: %v", n.Name, err)
			continue
		}
		r.note("SIGQUIT %s: its goroutine stacks are at the end of %s", n.Name, n.LogPath)
	}
}

// readFinal stops the cluster gracefully and reads every replica's log
// from disk. Leader, ISR and the assigned replicas are those of the last
// observation; a log left on a broker outside them is a stray.
func (r *runner) readFinal(ctx context.Context, faultsStopped time.Time, last observation) (history.Final, error) {
	final := history.Final{FaultsStopped: faultsStopped}
	observed := map[history.TP]history.PartitionState{}
	for _, ps := range last.partitions {
		observed[ps.TP] = ps
	}
	r.note("stopping the cluster (SIGTERM, controlled shutdown) to read every log from disk")
	r.stopCluster()
	for _, t := range r.topics {
		for p := range t.partitions {
			tp := history.TP{Topic: t.name, Partition: p}
			obs, ok := observed[tp]
			ps := history.PartitionState{TP: tp, Leader: -1}
			if ok {
				ps.Leader, ps.ISR, ps.LiveAt, ps.MinInsyncReplicas = obs.Leader, obs.ISR, obs.LiveAt, obs.MinInsyncReplicas
			}
			assigned := []int32{1, 2, 3}
			if ok && len(obs.Replicas) > 0 {
				assigned = assigned[:0]
				for _, o := range obs.Replicas {
					assigned = append(assigned, o.Broker)
				}
				r.strays = append(r.strays, strayLogs(r.o.DataDir, tp, assigned)...)
			}
			for _, id := range assigned {
				rs, notes, err := readReplica(filepath.Join(r.o.DataDir, fmt.Sprintf("broker-%d", id)), id, tp)
				for _, n := range notes {
					r.note("%s", n)
				}
				if err != nil {
					r.note("unreadable replica: %v", err)
					rs = history.ReplicaState{Broker: id}
				}
				if ok {
					for _, o := range obs.Replicas {
						if o.Broker == id && o.Readable && rs.Readable && (o.LEO != rs.LEO || o.HW != rs.HW) {
							r.note("%s replica %d: broker reported HW %d LEO %d when live, disk has HW %d LEO %d", tp, id, o.HW, o.LEO, rs.HW, rs.LEO)
						}
					}
				}
				ps.Replicas = append(ps.Replicas, rs)
			}
			final.Partitions = append(final.Partitions, ps)
		}
	}
	return final, nil
}

// saveHistory writes what the checker judged into the data dir
// (history.json), so a failed run can be examined, or checked again, after
// the fact.
func (r *runner) saveHistory(h history.History, final history.Final, report history.Report) {
	b, err := json.Marshal(struct {
		Seed    uint64          `json:"seed"`
		History history.History `json:"history"`
		Final   history.Final   `json:"final"`
		Report  history.Report  `json:"report"`
	}{r.o.Seed, h, final, report})
	if err == nil {
		err = os.WriteFile(filepath.Join(r.o.DataDir, "history.json"), b, 0o644)
	}
	if err != nil {
		r.printf("saving the history: %v\n", err)
		return
	}
	r.printf("history, final state and report in %s\n", filepath.Join(r.o.DataDir, "history.json"))
}

// stopCluster stops every node gracefully and etcd; the launcher's output
// goes to launcher.log.
func (r *runner) stopCluster() {
	if r.cl == nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(r.o.DataDir, "launcher.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	var w io.Writer = io.Discard
	if err == nil {
		defer f.Close()
		w = f
	}
	r.cl.Down(w)
}

// shutdown ends everything the run started, whatever state it is in.
func (r *runner) shutdown() {
	if r.w != nil {
		r.w.abort()
	}
	if r.client != nil {
		r.client.Close()
	}
	if r.admin != nil {
		r.admin.Close()
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.stopCluster()
}

func (r *runner) printf(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(r.out, format, args...)
}

// event records a fault, heal or note and prints it on the timeline.
func (r *runner) event(kind history.EventKind, format string, args ...any) time.Time {
	at := r.rec.Event(kind, format, args...)
	r.printf("%8.3fs %-5s %s\n", at.Sub(r.t0).Seconds(), kind, fmt.Sprintf(format, args...))
	return at
}

func (r *runner) note(format string, args ...any) { _ = r.event(history.Note, format, args...) }

// span is how many ports the run's cluster takes.
func (r *runner) span() int {
	return devcluster.Options{Links: !r.o.NoLinks}.Span()
}

// freePortBase finds span consecutive free loopback ports below the
// ephemeral range (platform/loopback), starting from a place the seed picks,
// so parallel runs rarely probe the same range.
func freePortBase(seed uint64, span int) (int, error) {
	return loopback.FreeRange(rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano()))), span)
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

// waitFor polls cond until it returns nil or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s: %v", what, timeout, err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// sortedIDs returns m's keys in order.
func sortedIDs[V any](m map[int32]V) []int32 {
	var ids []int32
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
