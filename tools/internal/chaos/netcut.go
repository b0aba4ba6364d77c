package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/clustertest/history"
	"tidemark.io/tools/internal/devcluster/links"
)

// Network cuts between the processes, through the dev cluster's links
// (devcluster.Options.Links): a proxy in front of every broker and
// controller (their advertised addresses) and one from each to etcd. Every
// cut here black-holes (connections held, nothing refused), so a cut node
// looks partitioned, never dead: the controller must leave it to its
// lease, and the leader fence (DESIGN.md section 4) must keep it from
// acknowledging writes once that lease may have expired.
//
// A node's own outbound connections cross the other nodes' proxies; the
// proxies name each connection's source process through /proc, so a full
// isolation (isolate-broker, isolate-follower) is symmetric. isolate-leader
// cuts on purpose only etcd and the controllers, both ways, and leaves the
// clients and the followers reaching the leader: the case where the fence
// alone stops acks=1 writes that the new leader's election would truncate
// (services/clustertest's TestIsolatedLeaderFencesItself, across real
// processes).

// leaseTTL is the brokers' --broker.session.timeout.ms in the runner.
const leaseTTL = 3 * time.Second

// Fence is one isolated leader's window and what its acknowledgements
// show.
type Fence struct {
	TP        history.TP
	OldLeader int32
	OldEpoch  int32
	// NewLeader is -1 when no other leader was elected while it was cut.
	NewLeader int32
	NewEpoch  int32
	CutAt     time.Time
	ElectedAt time.Time // when the runner first saw the new leader
	HealedAt  time.Time
	// AckedByOld: acks=1 writes of TP acknowledged with an epoch older than
	// the new one while cut, and AckedAfterElection those of them
	// acknowledged after the new leader was seen, SentAfterLease those
	// sent more than a lease after the cut (both must be 0: the fence).
	AckedByOld, AckedAfterElection, SentAfterLease int
	// AckedByNew counts the acknowledgements of the new leader while cut.
	AckedByNew int
	// Lost: acks=1 writes acknowledged while cut that the final log does
	// not hold at their offset; LostAfterElection those acknowledged after
	// the new leader was seen (must be 0). The fence does not promise the
	// rest: a write acknowledged before the fence that the new leader had
	// not copied when elected is truncated, as in Kafka.
	Lost, LostAfterElection int
}

// OK reports whether the isolated leader kept the fence.
func (f Fence) OK() bool {
	return f.AckedAfterElection == 0 && f.SentAfterLease == 0 && f.LostAfterElection == 0
}

func (f Fence) String() string {
	if f.NewLeader < 0 {
		return fmt.Sprintf("%s: broker-%d (epoch %d) isolated %s, no new leader elected; %d acks=1 writes acknowledged by it (%d sent more than a lease after the cut)",
			f.TP, f.OldLeader, f.OldEpoch, f.HealedAt.Sub(f.CutAt).Round(time.Millisecond), f.AckedByOld, f.SentAfterLease)
	}
	return fmt.Sprintf("%s: broker-%d (epoch %d) isolated, broker-%d elected (epoch %d) %s after the cut, healed after %s; "+
		"acks=1 writes acknowledged while cut: %d by the old leader (%d after the election, %d sent more than a lease after the cut), %d by the new; "+
		"%d of them lost (%d acknowledged after the election)",
		f.TP, f.OldLeader, f.OldEpoch, f.NewLeader, f.NewEpoch, f.ElectedAt.Sub(f.CutAt).Round(time.Millisecond),
		f.HealedAt.Sub(f.CutAt).Round(time.Millisecond), f.AckedByOld, f.AckedAfterElection, f.SentAfterLease, f.AckedByNew,
		f.Lost, f.LostAfterElection)
}

// ackEpochs remembers the leader epoch of every acknowledgement.
type ackEpochs struct {
	mu sync.Mutex
	m  map[int64]int32
}

func (a *ackEpochs) set(id int64, epoch int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[int64]int32{}
	}
	a.m[id] = epoch
}

func (a *ackEpochs) get(id int64) (int32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[id]
	return e, ok
}

// cut applies a link operation and records it.
func (r *runner) cut(kind history.EventKind, what string, op func() error) bool {
	if err := op(); err != nil {
		r.note("%s failed: %v", what, err)
		return false
	}
	r.event(kind, "%s", what)
	return true
}

func (r *runner) controllerNames() []string {
	var names []string
	for _, n := range r.cl.Nodes() {
		if n.Kind == "controller" {
			names = append(names, n.Name)
		}
	}
	return names
}

// stepIsolateLeader cuts the leader of an acks=1 partition from etcd and
// both controllers past its lease while acks=1 writes to it go on, waits
// for the new leader's election, holds the cut a while longer, and heals.
func (r *runner) stepIsolateLeader(ctx context.Context, rng *rand.Rand) {
	tp := history.TP{Topic: "leader-acks", Partition: int32(rng.IntN(2))}
	p, err := r.describe(ctx, tp)
	if err != nil || p.GetLeader() < 0 {
		r.note("%s: no leader to isolate (%v)", tp, err)
		return
	}
	f := Fence{TP: tp, OldLeader: p.GetLeader(), OldEpoch: p.GetLeaderEpoch(), NewLeader: -1}
	name := fmt.Sprintf("broker-%d", f.OldLeader)
	// Writes flow before the cut, so that the old leader has acknowledged
	// traffic to go on with while cut (a loaded machine could otherwise
	// spend the lease before the producer's first answer, and the step
	// would show nothing of the fence).
	stop := make(chan struct{})
	acked := make(chan struct{}, 1)
	var driving sync.WaitGroup
	driving.Add(1)
	go func() {
		defer driving.Done()
		r.w.drive(tp, stop, acked)
	}()
	stopDriving := func() {
		close(stop)
		driving.Wait()
	}
	select {
	case <-acked:
	case <-time.After(15 * time.Second):
		r.note("%s: no acks=1 write acknowledged by broker-%d within 15s; isolating it anyway", tp, f.OldLeader)
	case <-ctx.Done():
		stopDriving()
		return
	}
	ok := r.cut(history.Fault, fmt.Sprintf("isolate %s (leader of %s, epoch %d) from etcd and the controllers (blackhole); clients and followers still reach it",
		name, tp, f.OldEpoch), func() error {
		if err := r.links.CutEtcd(name, links.Blackhole); err != nil {
			return err
		}
		for _, c := range r.controllerNames() {
			if err := r.links.CutBetween(name, c, links.Blackhole); err != nil {
				return err
			}
		}
		return nil
	})
	if !ok {
		stopDriving()
		r.links.HealAll()
		return
	}
	f.CutAt = time.Now()
	// A preferred election asked for at once: where the isolated leader is
	// not the preferred replica, the controller must not move the
	// partition while that leader, unable to hear of it, takes writes; it
	// asks the leader to yield, which it cannot, and its lease decides.
	var electing sync.WaitGroup
	electing.Add(1)
	go func() {
		defer electing.Done()
		r.elect(ctx, adminv1.ElectionType_ELECTION_TYPE_PREFERRED, []*commonv1.TopicPartition{{Topic: tp.Topic, Partition: tp.Partition}})
	}()
	defer electing.Wait()
	deadline := f.CutAt.Add(3*leaseTTL + 10*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		p, err := r.describe(ctx, tp)
		if err == nil && p.GetLeader() >= 0 && p.GetLeader() != f.OldLeader {
			f.NewLeader, f.NewEpoch, f.ElectedAt = p.GetLeader(), p.GetLeaderEpoch(), time.Now()
			r.note("%s: broker-%d elected leader (epoch %d) %s after the cut", tp, f.NewLeader, f.NewEpoch, f.ElectedAt.Sub(f.CutAt).Round(time.Millisecond))
			break
		}
		_ = sleep(ctx, 100*time.Millisecond)
	}
	if f.NewLeader < 0 {
		r.note("%s: no new leader within %s of the cut", tp, deadline.Sub(f.CutAt))
	}
	// The old leader, unfenced, would keep acknowledging meanwhile.
	_ = sleep(ctx, ms(rng, 1000, 2500))
	stopDriving()
	r.cut(history.Heal, "heal "+name, func() error { return r.links.Heal(name) })
	f.HealedAt = time.Now()
	r.fences = append(r.fences, f)
}

// stepIsolateFollower cuts a follower of a durable partition off from
// everything, sometimes past its lease.
func (r *runner) stepIsolateFollower(ctx context.Context, rng *rand.Rand) {
	tp := r.pickPartition(rng, true)
	p, err := r.describe(ctx, tp)
	if err != nil || p.GetLeader() < 0 {
		r.note("%s: no leader (%v)", tp, err)
		return
	}
	var followers []int32
	for _, id := range p.GetReplicas() {
		if id != p.GetLeader() {
			followers = append(followers, id)
		}
	}
	name := fmt.Sprintf("broker-%d", followers[rng.IntN(len(followers))])
	r.isolate(ctx, name, fmt.Sprintf("(follower of %s, leader %d)", tp, p.GetLeader()), ms(rng, 1000, 5000))
}

// stepIsolateBroker cuts any broker off from everything past its lease.
func (r *runner) stepIsolateBroker(ctx context.Context, rng *rand.Rand) {
	r.isolate(ctx, fmt.Sprintf("broker-%d", pickBroker(rng)), "", leaseTTL+ms(rng, 500, 3000))
}

func (r *runner) isolate(ctx context.Context, name, why string, hold time.Duration) {
	what := fmt.Sprintf("isolate %s %s from every node and etcd (blackhole) for %s", name, why, hold.Round(time.Millisecond))
	if !r.cut(history.Fault, strings.Replace(what, "  ", " ", 1), func() error { return r.links.Cut(name, links.Blackhole) }) {
		r.links.HealAll()
		return
	}
	_ = sleep(ctx, hold)
	r.cut(history.Heal, "heal "+name, func() error { return r.links.Heal(name) })
}

// stepEtcdCutBroker cuts a broker from etcd alone: its lease lapses if
// the cut outlasts it, while it still serves clients and controllers.
func (r *runner) stepEtcdCutBroker(ctx context.Context, rng *rand.Rand) {
	r.etcdCut(ctx, fmt.Sprintf("broker-%d", pickBroker(rng)), ms(rng, 500, 6000))
}

// stepEtcdCutController cuts the active controller from etcd: it must
// step down when its lease may be gone, and the other take office.
func (r *runner) stepEtcdCutController(ctx context.Context, rng *rand.Rand) {
	if c := r.activeController(ctx); c != "" {
		r.etcdCut(ctx, c, ms(rng, 500, 6000))
	}
}

// stepEtcdCutAll cuts every broker and controller from etcd, often past
// the lease: etcd runs on and lets every lease expire, while the brokers,
// which cannot tell, fence themselves and go on with acks=all writes where
// their in-sync followers vouch for them. At the heal every broker
// registers again at once and the controller elects from what the ISRs
// say.
func (r *runner) stepEtcdCutAll(ctx context.Context, rng *rand.Rand) {
	hold := ms(rng, 1000, int(3*leaseTTL/time.Millisecond))
	var cut []string
	for _, n := range r.cl.Nodes() {
		if n.Kind != "broker" && n.Kind != "controller" {
			continue
		}
		if err := r.links.CutEtcd(n.Name, links.Blackhole); err != nil {
			r.note("cut %s from etcd failed: %v", n.Name, err)
			continue
		}
		cut = append(cut, n.Name)
	}
	if len(cut) == 0 {
		return
	}
	r.event(history.Fault, "cut every node from etcd (blackhole) for %s: %s", hold.Round(time.Millisecond), strings.Join(cut, ", "))
	_ = sleep(ctx, hold)
	for _, name := range cut {
		if err := r.links.HealEtcd(name); err != nil {
			r.note("heal %s's etcd link failed: %v", name, err)
		}
	}
	r.event(history.Heal, "heal every node's etcd link")
}

func (r *runner) etcdCut(ctx context.Context, name string, hold time.Duration) {
	if !r.cut(history.Fault, fmt.Sprintf("cut %s from etcd (blackhole) for %s", name, hold.Round(time.Millisecond)),
		func() error { return r.links.CutEtcd(name, links.Blackhole) }) {
		return
	}
	_ = sleep(ctx, hold)
	r.cut(history.Heal, "heal "+name+"'s etcd link", func() error { return r.links.HealEtcd(name) })
}

// judgeFences fills each fence's counts from the history and the final
// logs.
func (r *runner) judgeFences(h history.History, final history.Final) []Fence {
	logs := finalLogs(final)
	out := slices.Clone(r.fences)
	for i := range out {
		f := &out[i]
		for _, p := range h.Produces {
			if p.TP != f.TP || p.Outcome != history.Acked || p.End.Before(f.CutAt) || p.End.After(f.HealedAt) {
				continue
			}
			epoch, ok := r.epochs.get(p.ID)
			old := ok && (f.NewLeader < 0 || epoch < f.NewEpoch)
			if old {
				f.AckedByOld++
			} else {
				f.AckedByNew++
			}
			after := f.NewLeader >= 0 && p.End.After(f.ElectedAt)
			if old && after {
				f.AckedAfterElection++
			}
			// The fence refuses acks=0/1 writes once the lease may be gone,
			// whether or not a new leader was elected (or seen).
			if old && p.Start.After(f.CutAt.Add(leaseTTL)) {
				f.SentAfterLease++
			}
			if v, held := logs[f.TP][p.Offset]; !held || v != p.Value {
				f.Lost++
				if after {
					f.LostAfterElection++
				}
			}
		}
	}
	return out
}

// acksOneLost counts, per topic, the acknowledged acks=1 writes the final
// logs do not hold at their offset (retention aside).
func acksOneLost(h history.History, final history.Final) map[string]int {
	logs := finalLogs(final)
	starts := map[history.TP]int64{}
	for _, ps := range final.Partitions {
		for _, rs := range ps.Replicas {
			if rs.Readable && rs.Broker == ps.Leader {
				starts[ps.TP] = rs.LogStart
			}
		}
	}
	out := map[string]int{}
	for _, p := range h.Produces {
		if p.Acks != history.AcksLeader || p.Outcome != history.Acked || p.Offset < starts[p.TP] {
			continue
		}
		if v, held := logs[p.TP][p.Offset]; !held || v != p.Value {
			out[p.TP.Topic]++
		}
	}
	return out
}

// finalLogs is each partition's final log, offset → value: the leader's
// replica when readable, else the first readable one.
func finalLogs(final history.Final) map[history.TP]map[int64]string {
	out := map[history.TP]map[int64]string{}
	for _, ps := range final.Partitions {
		var pick *history.ReplicaState
		for i := range ps.Replicas {
			rs := &ps.Replicas[i]
			if rs.Readable && (pick == nil || rs.Broker == ps.Leader) {
				pick = rs
			}
		}
		m := map[int64]string{}
		if pick != nil {
			for _, rec := range pick.Records {
				m[rec.Offset] = rec.Value
			}
		}
		out[ps.TP] = m
	}
	return out
}
