package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/clustertest/history"
)

// A fault step injects one fault (or a quick combination) and heals it
// before it returns, so the run has mostly one broker impaired at a time;
// the combinations are where two are.
type step struct {
	name   string
	weight int
	run    func(r *runner, ctx context.Context, rng *rand.Rand)
	// links: the step cuts the network, so it needs the cluster's links.
	links bool
}

var steps = []step{
	{"kill", 4, (*runner).stepKill, false},
	{"sigterm", 3, (*runner).stepSigterm, false},
	{"pause", 3, (*runner).stepPause, false},
	{"double-restart", 2, (*runner).stepDoubleRestart, false},
	{"follower-restart-leader-kill", 2, (*runner).stepFollowerThenLeader, false},
	{"controller-kill", 2, (*runner).stepControllerKill, false},
	{"controller-pause", 1, (*runner).stepControllerPause, false},
	{"preferred-election", 3, (*runner).stepPreferred, false},
	{"fetch-stall", 3, (*runner).stepFetchStall, false},
	{"unclean-election", 1, (*runner).stepUnclean, false},
	{"reassign", 2, (*runner).stepReassign, false},
	{"rest", 2, (*runner).stepRest, false},
	{"etcd-stop", 1, (*runner).stepEtcdStop, false},
	{"isolate-leader", 2, (*runner).stepIsolateLeader, true},
	{"isolate-follower", 2, (*runner).stepIsolateFollower, true},
	{"isolate-broker", 1, (*runner).stepIsolateBroker, true},
	{"etcd-cut-broker", 2, (*runner).stepEtcdCutBroker, true},
	{"etcd-cut-controller", 1, (*runner).stepEtcdCutController, true},
	{"etcd-cut-all", 1, (*runner).stepEtcdCutAll, true},
}

// StepNames lists the nemesis's fault steps.
func StepNames() []string {
	var names []string
	for _, s := range steps {
		names = append(names, s.name)
	}
	return names
}

// nemesis runs seeded fault steps for the run's fault duration, then heals
// everything and returns when the last heal was done.
func (r *runner) nemesis(ctx context.Context) time.Time {
	rng := rand.New(rand.NewPCG(r.o.Seed, 0xfa17))
	var pool []step
	total := 0
	for _, s := range steps {
		if (s.links && r.links == nil) || (len(r.o.Steps) > 0 && !slices.Contains(r.o.Steps, s.name)) {
			continue
		}
		pool = append(pool, s)
		total += s.weight
	}
	if total == 0 {
		r.note("no fault step to run (steps %v, links %v)", r.o.Steps, r.links != nil)
		return r.healAll(ctx)
	}
	deadline := time.Now().Add(r.o.Faults)
	for n := 0; n < r.o.MaxFaults && time.Now().Before(deadline) && ctx.Err() == nil; n++ {
		r.restartCrashed()
		pick := rng.IntN(total)
		for _, s := range pool {
			if pick -= s.weight; pick < 0 {
				s.run(r, ctx, rng)
				break
			}
		}
		_ = sleep(ctx, time.Duration(300+rng.IntN(1500))*time.Millisecond)
	}
	return r.healAll(ctx)
}

// act applies a devcluster action to a node and records it.
func (r *runner) act(kind history.EventKind, name, what string) {
	n, err := r.cl.Node(name)
	if err != nil {
		r.note("%v", err)
		return
	}
	switch what {
	case "kill -9":
		err = n.Kill()
	case "SIGTERM":
		err = n.Stop(30 * time.Second)
	case "SIGSTOP":
		err = n.Pause()
	case "SIGCONT":
		err = n.Resume()
	case "start":
		err = n.Start()
	}
	if err != nil {
		r.note("%s %s failed: %v", what, name, err)
		return
	}
	r.event(kind, "%s %s", what, name)
}

// restartCrashed starts a node that exited without being told to: the
// run notes it (a crash is worth reading the node's log for) and goes on.
func (r *runner) restartCrashed() {
	for _, n := range r.cl.Nodes() {
		if n.State() == devclusterv1.NodeState_NODE_STATE_EXITED {
			r.note("%s EXITED on its own (see %s)", n.Name, n.LogPath)
			r.act(history.Heal, n.Name, "start")
		}
	}
}

func pickBroker(rng *rand.Rand) int32 { return int32(1 + rng.IntN(3)) }

func ms(rng *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond
}

func (r *runner) stepKill(ctx context.Context, rng *rand.Rand) {
	b := fmt.Sprintf("broker-%d", pickBroker(rng))
	r.act(history.Fault, b, "kill -9")
	_ = sleep(ctx, ms(rng, 300, 4000))
	r.act(history.Heal, b, "start")
}

func (r *runner) stepSigterm(ctx context.Context, rng *rand.Rand) {
	b := fmt.Sprintf("broker-%d", pickBroker(rng))
	r.act(history.Fault, b, "SIGTERM")
	_ = sleep(ctx, ms(rng, 300, 3000))
	r.act(history.Heal, b, "start")
}

// stepPause freezes a broker, sometimes for longer than the lag time (its
// session lease may expire too: the controller fences it while frozen).
// A third of the time another broker is stopped gracefully meanwhile and
// started again before the frozen one resumes: the frozen broker's
// connections to it stall open, and its stop must not wait for them.
func (r *runner) stepPause(ctx context.Context, rng *rand.Rand) {
	id := pickBroker(rng)
	b := fmt.Sprintf("broker-%d", id)
	r.act(history.Fault, b, "SIGSTOP")
	frozen := ms(rng, 500, int(r.o.LagTime.Milliseconds())*2)
	if rng.IntN(3) == 0 {
		other := fmt.Sprintf("broker-%d", id%3+1)
		_ = sleep(ctx, frozen/2)
		start := time.Now()
		r.act(history.Fault, other, "SIGTERM")
		if took := time.Since(start); took > slowStop {
			r.slowStops = append(r.slowStops, fmt.Sprintf("SIGTERM %s took %s with %s frozen", other, took.Round(time.Millisecond), b))
			r.note("SLOW STOP: SIGTERM %s took %s with %s frozen", other, took.Round(time.Millisecond), b)
		} else {
			r.note("SIGTERM %s took %s with %s frozen", other, took.Round(time.Millisecond), b)
		}
		_ = sleep(ctx, frozen/2)
		r.act(history.Heal, other, "start")
	} else {
		_ = sleep(ctx, frozen)
	}
	r.act(history.Heal, b, "SIGCONT")
}

// slowStop bounds a graceful broker stop while another broker is frozen:
// the controlled shutdown takes milliseconds then, and a stop that waits
// for the frozen broker's connections runs into its 15 s deadline.
const slowStop = 10 * time.Second

// stepDoubleRestart restarts the same broker twice within a second.
func (r *runner) stepDoubleRestart(ctx context.Context, rng *rand.Rand) {
	b := fmt.Sprintf("broker-%d", pickBroker(rng))
	r.act(history.Fault, b, "kill -9")
	r.act(history.Heal, b, "start")
	_ = sleep(ctx, ms(rng, 100, 900))
	r.act(history.Fault, b, "kill -9")
	r.act(history.Heal, b, "start")
}

// stepFollowerThenLeader restarts a follower of a partition and kills its
// leader at once, while the follower is still catching up.
func (r *runner) stepFollowerThenLeader(ctx context.Context, rng *rand.Rand) {
	tp := r.pickPartition(rng, true)
	p, err := r.describe(ctx, tp)
	if err != nil || p.GetLeader() < 0 {
		r.note("%s: no leader to kill (%v)", tp, err)
		return
	}
	var followers []int32
	for _, id := range p.GetReplicas() {
		if id != p.GetLeader() {
			followers = append(followers, id)
		}
	}
	f := followers[rng.IntN(len(followers))]
	leader := fmt.Sprintf("broker-%d", p.GetLeader())
	r.note("%s: leader %d, ISR %v; restarting follower %d then killing the leader", tp, p.GetLeader(), p.GetIsr(), f)
	r.act(history.Fault, fmt.Sprintf("broker-%d", f), "kill -9")
	r.act(history.Heal, fmt.Sprintf("broker-%d", f), "start")
	r.act(history.Fault, leader, "kill -9")
	_ = sleep(ctx, ms(rng, 500, 3000))
	r.act(history.Heal, leader, "start")
}

// activeController names the active controller's node ("controller-N"),
// or notes that none was found and returns "".
func (r *runner) activeController(ctx context.Context) string {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	d, err := r.admin.DescribeCluster(dctx)
	cancel()
	if err != nil {
		r.note("no active controller found: %v", err)
		return ""
	}
	return fmt.Sprintf("controller-%d", d.GetController().GetId())
}

func (r *runner) stepControllerKill(ctx context.Context, rng *rand.Rand) {
	c := r.activeController(ctx)
	if c == "" {
		return
	}
	how := "kill -9"
	if rng.IntN(3) == 0 {
		how = "SIGTERM"
	}
	r.note("%s is the active controller", c)
	r.act(history.Fault, c, how)
	_ = sleep(ctx, ms(rng, 500, 4000))
	r.act(history.Heal, c, "start")
}

// stepEtcdStop stops etcd for everyone as SIGTERM stops it (it drains
// open streams for up to 7 s first) and starts it again after up to twice
// the brokers' session timeout: leaders fence themselves meanwhile, and
// once etcd is back they must keep their registrations and lead again.
func (r *runner) stepEtcdStop(ctx context.Context, rng *rand.Rand) {
	if err := r.cl.StopEtcd(); err != nil {
		r.note("stop etcd failed: %v", err)
		return
	}
	r.event(history.Fault, "SIGTERM etcd")
	_ = sleep(ctx, ms(rng, 1000, 12000))
	r.startEtcd(ctx)
}

func (r *runner) startEtcd(ctx context.Context) {
	if err := r.cl.StartEtcd(ctx); err != nil {
		r.note("start etcd failed: %v", err)
		return
	}
	r.event(history.Heal, "start etcd")
}

// stepControllerPause freezes the active controller, mostly for longer
// than its 3 s lease: its connections stall without closing, a standby
// takes office, and the frozen one, resumed, must find itself deposed and
// change nothing. Half the time a broker crashes while it is frozen and
// comes back before it resumes: the new controller must see the crash
// (its fast failover watches the brokers' sessions, which must have left
// the frozen one) and the broker's return.
func (r *runner) stepControllerPause(ctx context.Context, rng *rand.Rand) {
	c := r.activeController(ctx)
	if c == "" {
		return
	}
	r.note("%s is the active controller", c)
	r.act(history.Fault, c, "SIGSTOP")
	frozen := ms(rng, 1000, 9000)
	if rng.IntN(2) == 0 {
		b := fmt.Sprintf("broker-%d", pickBroker(rng))
		_ = sleep(ctx, frozen/2)
		r.act(history.Fault, b, "kill -9")
		_ = sleep(ctx, frozen/2)
		r.act(history.Heal, b, "start")
	} else {
		_ = sleep(ctx, frozen)
	}
	r.act(history.Heal, c, "SIGCONT")
}

func (r *runner) stepPreferred(ctx context.Context, _ *rand.Rand) {
	r.elect(ctx, adminv1.ElectionType_ELECTION_TYPE_PREFERRED, nil)
}

func (r *runner) elect(ctx context.Context, kind adminv1.ElectionType, tps []*commonv1.TopicPartition) {
	ectx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	resp, err := r.admin.ElectLeaders(ectx, &adminv1.ElectLeadersRequest{ElectionType: kind, Partitions: tps,
		AllPartitions: len(tps) == 0, TimeoutMs: 5000})
	if err != nil {
		r.event(history.Fault, "%s election failed: %v", kind, err)
		return
	}
	var moved, not []string
	for _, res := range resp.GetResults() {
		if res.GetErrorCode() == commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
			moved = append(moved, fmt.Sprintf("%s-%d→%d", res.GetTopic(), res.GetPartition(), res.GetLeader()))
		} else {
			not = append(not, fmt.Sprintf("%s-%d %s", res.GetTopic(), res.GetPartition(),
				strings.TrimPrefix(res.GetErrorCode().String(), "ERROR_CODE_")))
		}
	}
	what := strings.ToLower(strings.TrimPrefix(kind.String(), "ELECTION_TYPE_"))
	r.event(history.Fault, "%s election: %d of %d partitions elected %v; not elected %v", what, len(moved), len(resp.GetResults()), moved, not)
}

// stepFetchStall stalls one broker's fetching (all topics, or one) until it
// leaves the ISR of what it follows, then clears the fault.
func (r *runner) stepFetchStall(ctx context.Context, rng *rand.Rand) {
	id := pickBroker(rng)
	f := &faultv1.FetchFault{Partition: -1, Stall: true}
	if rng.IntN(2) == 0 {
		f.Topic = r.topics[rng.IntN(len(r.topics))].name
	}
	if !r.setFetchFault(ctx, id, f) {
		return
	}
	_ = sleep(ctx, r.o.LagTime+ms(rng, 500, 3000))
	r.clearFaults(ctx, id)
}

func (r *runner) setFetchFault(ctx context.Context, id int32, f *faultv1.FetchFault) bool {
	fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := r.faults[id].SetFetchFault(fctx, &faultv1.SetFetchFaultRequest{Fault: f}); err != nil {
		r.note("stall broker-%d fetching failed: %v", id, err)
		return false
	}
	topic := f.Topic
	if topic == "" {
		topic = "every topic"
	}
	r.event(history.Fault, "stall broker-%d fetching of %s", id, topic)
	return true
}

func (r *runner) clearFaults(ctx context.Context, id int32) {
	fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := r.faults[id].ClearFaults(fctx, &faultv1.ClearFaultsRequest{}); err != nil {
		r.note("clear broker-%d faults failed: %v", id, err)
		return
	}
	r.event(history.Heal, "clear broker-%d fetch faults", id)
}

// stepUnclean drives topic "unclean" (unclean.leader.election.enable) to an
// unclean election: its followers stall and fall out of the ISR behind a
// few writes, the leader is killed, an unclean election is asked for (the
// controller may already have made one), then everything heals.
func (r *runner) stepUnclean(ctx context.Context, rng *rand.Rand) {
	tp := history.TP{Topic: "unclean", Partition: 0}
	p, err := r.describe(ctx, tp)
	if err != nil || p.GetLeader() < 0 {
		r.note("%s: no leader (%v)", tp, err)
		return
	}
	leader := p.GetLeader()
	var stalled []int32
	for _, id := range p.GetReplicas() {
		if id != leader && r.setFetchFault(ctx, id, &faultv1.FetchFault{Topic: tp.Topic, Partition: -1, Stall: true}) {
			stalled = append(stalled, id)
		}
	}
	defer func() {
		for _, id := range stalled {
			r.clearFaults(ctx, id)
		}
	}()
	r.w.produceSome(tp, 5, fmt.Sprintf("unclean%d", rng.Uint32()))
	err = waitFor(ctx, 4*r.o.LagTime, "ISR shrunk to the leader", func() error {
		p, err := r.describe(ctx, tp)
		if err != nil {
			return err
		}
		if !slices.Equal(p.GetIsr(), []int32{leader}) {
			return fmt.Errorf("ISR %v", p.GetIsr())
		}
		return nil
	})
	if err != nil {
		r.note("%s: %v; no unclean election this time", tp, err)
		return
	}
	name := fmt.Sprintf("broker-%d", leader)
	r.act(history.Fault, name, "kill -9")
	r.elect(ctx, adminv1.ElectionType_ELECTION_TYPE_UNCLEAN, []*commonv1.TopicPartition{{Topic: tp.Topic, Partition: tp.Partition}})
	_ = sleep(ctx, ms(rng, 500, 2000))
	r.act(history.Heal, name, "start")
}

// stepReassign moves a partition of the RF 2 topic to another replica
// set (2 brokers, sometimes 3), or replaces or cancels the reassignment in
// flight. The steps around it kill, pause and cut the brokers it copies
// between, the leader it yields from, and the controller driving it.
func (r *runner) stepReassign(ctx context.Context, rng *rand.Rand) {
	tp := history.TP{Topic: movingTopic, Partition: int32(rng.IntN(2))}
	p, err := r.describe(ctx, tp)
	if err != nil {
		r.note("reassign %s: %v", tp, err)
		return
	}
	inFlight := len(p.GetAddingReplicas())+len(p.GetRemovingReplicas()) > 0
	target := reassignTarget(rng, slices.DeleteFunc(slices.Clone(p.GetReplicas()), func(id int32) bool {
		return slices.Contains(p.GetRemovingReplicas(), id)
	}))
	what := fmt.Sprintf("reassign %s %v -> %v", tp, p.GetReplicas(), target)
	if inFlight && rng.IntN(3) == 0 {
		target = nil
		what = fmt.Sprintf("cancel the reassignment of %s (replicas %v, adding %v, removing %v)", tp,
			p.GetReplicas(), p.GetAddingReplicas(), p.GetRemovingReplicas())
	}
	actx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	resp, err := r.admin.AlterPartitionReassignments(actx, &adminv1.AlterPartitionReassignmentsRequest{
		Partitions: []*adminv1.ReassignablePartition{{Topic: tp.Topic, Partition: tp.Partition, Replicas: target}}})
	switch {
	case err != nil:
		r.event(history.Fault, "%s failed: %v", what, err)
	case len(resp.GetResults()) == 1 && resp.GetResults()[0].GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED:
		res := resp.GetResults()[0]
		r.event(history.Fault, "%s refused: %s %s", what, strings.TrimPrefix(res.GetErrorCode().String(), "ERROR_CODE_"), res.GetErrorMessage())
	default:
		r.event(history.Fault, "%s", what)
	}
}

// reassignTarget picks a replica set other than cur: 2 of the 3 brokers,
// one time in four all 3, in a random order (the first is the preferred
// leader).
func reassignTarget(rng *rand.Rand, cur []int32) []int32 {
	for {
		all := []int32{1, 2, 3}
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		target := all[:2]
		if rng.IntN(4) == 0 {
			target = all
		}
		if !slices.Equal(target, cur) {
			return target
		}
	}
}

// stepRest injects nothing for a while: faults stop while traffic goes on
// or idles.
func (r *runner) stepRest(ctx context.Context, rng *rand.Rand) {
	_ = sleep(ctx, ms(rng, 1000, 4000))
}

// healAll clears every fetch fault, resumes paused nodes and starts
// stopped ones; it returns when that was done.
func (r *runner) healAll(ctx context.Context) time.Time {
	if r.links != nil {
		if cuts := r.links.Cuts(); len(cuts) > 0 {
			r.links.HealAll()
			r.event(history.Heal, "heal every link (%s)", strings.Join(cuts, ", "))
		}
	}
	for _, id := range sortedIDs(r.faults) {
		fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, _ = r.faults[id].ClearFaults(fctx, &faultv1.ClearFaultsRequest{})
		cancel()
	}
	if !r.cl.EtcdRunning() {
		r.startEtcd(ctx)
	}
	for _, n := range r.cl.Nodes() {
		switch n.State() {
		case devclusterv1.NodeState_NODE_STATE_PAUSED:
			r.act(history.Heal, n.Name, "SIGCONT")
		case devclusterv1.NodeState_NODE_STATE_EXITED:
			r.note("%s EXITED on its own (see %s)", n.Name, n.LogPath)
			r.act(history.Heal, n.Name, "start")
		case devclusterv1.NodeState_NODE_STATE_STOPPED:
			r.act(history.Heal, n.Name, "start")
		}
	}
	return r.event(history.Heal, "faults stopped: every fetch fault cleared, every link healed, every node running")
}

func (r *runner) pickPartition(rng *rand.Rand, durableOnly bool) history.TP {
	var tps []history.TP
	for _, t := range r.topics {
		if durableOnly && !t.durable() {
			continue
		}
		for p := range t.partitions {
			tps = append(tps, history.TP{Topic: t.name, Partition: p})
		}
	}
	return tps[rng.IntN(len(tps))]
}

func (r *runner) describe(ctx context.Context, tp history.TP) (*adminv1.PartitionDescription, error) {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := r.admin.DescribeTopics(dctx, &adminv1.DescribeTopicsRequest{Topics: []string{tp.Topic}})
	if err != nil {
		return nil, err
	}
	for _, t := range resp.GetTopics() {
		for _, p := range t.GetPartitions() {
			if p.GetPartition() == tp.Partition {
				return p, nil
			}
		}
	}
	return nil, fmt.Errorf("%s not described", tp)
}
