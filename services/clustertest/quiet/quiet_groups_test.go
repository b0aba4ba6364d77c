package quiet

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/services/topicconfig"
)

// committedEach reports whether m's group committed want on every
// partition of all, failing the test if a commit went backwards (below
// floor).
func committedEach(t *testing.T, m *clustertest.Member, all []client.TopicPartition, floor, want int64) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := m.Consumer().Committed(ctx)
	if err != nil {
		return false
	}
	ok := true
	for _, tp := range all {
		if got[tp] < floor {
			t.Fatalf("%v committed %d, below the earlier commit %d", tp, got[tp], floor)
		}
		ok = ok && got[tp] == want
	}
	return ok
}

// An idle group whose members keep running while every broker of the
// cluster is stopped and started again, then killed and started again,
// then restarted one after the other in quick succession (each well within
// a session timeout of the last):
// the coordinators reload the commits from __consumer_offsets, the group
// ends Stable with both members holding a partition each, its commits
// never went backwards, and the records produced afterwards are read from
// the commits on, each once, nothing skipped.
func TestIdleGroupResumesAtItsCommitsAfterTheWholeClusterRestarts(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts every broker of a cluster")
	}
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 2, 5
	c.CreateTopic("dormant", parts, 3, nil)
	c.ProduceEach("dormant", parts, 0, n)
	o := clustertest.GroupOpts("dozers", "dormant")
	o.SessionTimeout = 3 * time.Second
	m1, m2 := c.StartMember(o), c.StartMember(o)
	all := clustertest.TopicPartitions("dormant", parts)
	c.WaitFor(time.Minute, "one partition each", func() bool { return clustertest.Balanced(all, 1, 1, m1, m2) })
	c.WaitFor(time.Minute, "every record read and committed", func() bool { return committedEach(t, m1, all, 0, n) })

	whole := func(what string) {
		t.Helper()
		c.WaitOffsetsWhole(3)
		c.WaitFor(time.Minute, "the group stable with a partition each "+what, func() bool {
			d := c.DescribeGroup("dozers")
			return d.GetGroupState() == "Stable" && len(d.GetMembers()) == 2 && clustertest.Balanced(all, 1, 1, m1, m2)
		})
		c.WaitFor(time.Minute, "the commits "+what, func() bool { return committedEach(t, m1, all, n, n) })
	}
	for id := int32(1); id <= 3; id++ {
		if err := c.StopBroker(id); err != nil {
			t.Fatalf("graceful stop of broker %d: %v", id, err)
		}
	}
	for id := int32(1); id <= 3; id++ {
		c.StartBroker(id)
	}
	whole("after the whole cluster restarted")
	for id := int32(1); id <= 3; id++ {
		c.CrashBroker(id)
	}
	for id := int32(3); id >= 1; id-- {
		c.StartBroker(id)
	}
	whole("after the whole cluster was killed")
	for id := int32(1); id <= 3; id++ {
		if err := c.StopBroker(id); err != nil {
			t.Fatalf("graceful stop of broker %d: %v", id, err)
		}
		c.StartBroker(id)
	}
	whole("after restarts in quick succession")
	for _, m := range []*clustertest.Member{m1, m2} {
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}

	c.ProduceEach("dormant", parts, n, n)
	c.WaitFor(time.Minute, "the new records read and committed", func() bool { return committedEach(t, m1, all, n, 2*n) })
	for _, tp := range all {
		got := append(m1.Offsets(tp), m2.Offsets(tp)...)
		slices.Sort(got)
		want := make([]int64, 2*n)
		for i := range want {
			want[i] = int64(i)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%v: read %v, want each of 0..%d once", tp, got, 2*n-1)
		}
	}
}

// kgoMember is a franz-go group member polled on a goroutine that commits
// every record it reads, recording each offset per partition.
type kgoMember struct {
	cl   *kgo.Client
	done chan struct{}

	mu  sync.Mutex
	got map[int32][]int64
}

func startKgoMember(c *clustertest.Cluster, group, topic string, opts ...kgo.Opt) *kgoMember {
	c.T.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(30 * time.Second),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.Balancers(kgo.CooperativeStickyBalancer())}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		c.T.Fatal(err)
	}
	m := &kgoMember{cl: cl, done: make(chan struct{}), got: map[int32][]int64{}}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollRecords(context.Background(), 100)
			if fs.IsClientClosed() {
				return
			}
			recs := fs.Records()
			m.mu.Lock()
			for _, r := range recs {
				m.got[r.Partition] = append(m.got[r.Partition], r.Offset)
			}
			m.mu.Unlock()
			if len(recs) > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = cl.CommitRecords(ctx, recs...) // a failed commit is read again
				cancel()
			}
		}
	}()
	c.T.Cleanup(m.close)
	return m
}

// close closes the client (a static member does not leave the group).
func (m *kgoMember) close() {
	m.cl.Close()
	<-m.done
}

func (m *kgoMember) offsets(p int32) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got[p])
}

// kgoGroupStable waits until group is Stable with the named instances as
// its members, every partition of topic assigned once.
func kgoGroupStable(c *clustertest.Cluster, group string, parts int32, instances ...string) {
	c.T.Helper()
	adm := c.FreshAdmin()
	defer adm.Close()
	c.WaitFor(time.Minute, fmt.Sprintf("%s stable with members %v", group, instances), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ds, err := adm.DescribeGroups(ctx, group)
		d := ds[group]
		if err != nil || d.Err != nil || d.State != "Stable" || len(d.Members) != len(instances) {
			return false
		}
		owned := map[int32]int{}
		for _, m := range d.Members {
			if m.InstanceID == nil || !slices.Contains(instances, *m.InstanceID) {
				return false
			}
			a, ok := m.Assigned.AsConsumer()
			if !ok {
				return false
			}
			for _, tp := range a.Topics {
				for _, p := range tp.Partitions {
					owned[p]++
				}
			}
		}
		for p := range parts {
			if owned[p] != 1 {
				return false
			}
		}
		return len(owned) == int(parts)
	})
}

// franz-go static members with the cooperative-sticky balancer over the
// Kafka listener, the group idle. One member's process is gone for longer
// than its session (its client closed: a static member sends no
// LeaveGroup): the coordinator removes it and gives its partitions to the
// other, which starts them at their commits. It comes back with its
// instance id and the group rebalances to both. Then the coordinator's
// broker is killed, and later every broker, nothing produced: the group is
// Stable again each time with both members, the commits never went backwards,
// and the records produced after all this are read from the commits on,
// each once, nothing skipped.
func TestKafkaStaticCooperativeMembersAcrossAnIdleAbsenceAndACoordinatorMove(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: consumer group tests start a cluster")
	}
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3)})
	adm := kadm.NewClient(c.KafkaClient())
	const parts, n = 4, 3
	c.KafkaCreate(adm, "still", parts, 3, nil)
	prod := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(from int) {
		t.Helper()
		for p := range int32(parts) {
			for i := from; i < from+n; i++ {
				r := &kgo.Record{Topic: "still", Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))}
				if err := prod.ProduceSync(clustertest.CtxFor(t, 30*time.Second), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	produce(0)
	a := startKgoMember(c, "statics", "still", kgo.InstanceID("a"))
	b := startKgoMember(c, "statics", "still", kgo.InstanceID("b"))
	kgoGroupStable(c, "statics", parts, "a", "b")
	c.KgoCommitted("statics", "still", parts, 0, n)

	a.close()
	kgoGroupStable(c, "statics", parts, "b") // after a's session ran out
	c.KgoCommitted("statics", "still", parts, n, n)
	a2 := startKgoMember(c, "statics", "still", kgo.InstanceID("a"))
	kgoGroupStable(c, "statics", parts, "a", "b")

	coord, _ := c.CoordinatorOf("statics")
	c.CrashBroker(coord)
	c.WaitFor(time.Minute, "another coordinator", func() bool {
		id, _ := c.CoordinatorOf("statics")
		return id != coord
	})
	kgoGroupStable(c, "statics", parts, "a", "b")
	c.KgoCommitted("statics", "still", parts, n, n)
	c.StartBroker(coord)
	c.WaitOffsetsWhole(3)
	kgoGroupStable(c, "statics", parts, "a", "b")
	for id := int32(1); id <= 3; id++ {
		c.CrashBroker(id)
	}
	for id := int32(1); id <= 3; id++ {
		c.StartBroker(id)
	}
	c.WaitOffsetsWhole(3)
	kgoGroupStable(c, "statics", parts, "a", "b")
	c.KgoCommitted("statics", "still", parts, n, n)

	produce(n)
	c.KgoCommitted("statics", "still", parts, n, 2*n)
	for p := range int32(parts) {
		got := append(append(a.offsets(p), b.offsets(p)...), a2.offsets(p)...)
		slices.Sort(got)
		want := make([]int64, 2*n)
		for i := range want {
			want[i] = int64(i)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("still-%d: read %v, want each of 0..%d once", p, got, 2*n-1)
		}
	}
}

// A member of an idle group is cut off from every broker (it sends no
// LeaveGroup) while the two others keep heartbeating and nothing is
// produced: after its session the group rebalances, the survivors take its
// partition and start it at its commit, and read what comes next once,
// nothing skipped. When its network comes back it joins again, the group
// is Stable with all three, and consumption goes on to the end.
func TestIdleGroupMovesACutOffMembersPartitionFromItsCommit(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 3, 4
	c.CreateTopic("hushed", parts, 3, nil)
	c.ProduceEach("hushed", parts, 0, n)
	o := clustertest.GroupOpts("lookouts", "hushed")
	o.SessionTimeout = 3 * time.Second
	m1, m2 := c.StartMember(o), c.StartMember(o)
	m3 := c.StartMemberOn(c.GroupClientVia("member-3"), o)
	all := clustertest.TopicPartitions("hushed", parts)
	c.WaitFor(time.Minute, "one partition each", func() bool { return clustertest.Balanced(all, 1, 1, m1, m2, m3) })
	c.WaitFor(time.Minute, "every record read and committed", func() bool { return committedEach(t, m1, all, 0, n) })
	gen, had := m1.Consumer().Generation(), m3.Consumer().Assignment()
	// What the survivors read before (m1 alone, say, before the others
	// joined) is no part of what they read after the cut.
	before := map[*clustertest.Member]map[client.TopicPartition]int{m1: {}, m2: {}}
	for m, at := range before {
		for _, tp := range had {
			at[tp] = len(m.Offsets(tp))
		}
	}

	c.Net.Isolate("member-3", clustertest.BrokerName(1), clustertest.BrokerName(2), clustertest.BrokerName(3))
	c.WaitFor(time.Minute, "the survivors holding every partition", func() bool {
		return clustertest.Balanced(all, 1, 2, m1, m2) && m1.Consumer().Generation() > gen
	})
	c.WaitFor(time.Minute, "the commits kept", func() bool { return committedEach(t, m1, all, n, n) })
	if d := c.DescribeGroup("lookouts"); d.GetGroupState() != "Stable" || len(d.GetMembers()) != 2 {
		t.Fatalf("without the cut-off member: %s with %d members, want Stable with 2", d.GetGroupState(), len(d.GetMembers()))
	}
	c.ProduceEach("hushed", parts, n, n)
	c.WaitFor(time.Minute, "the survivors read and commit the new records", func() bool { return committedEach(t, m1, all, n, 2*n) })
	for _, tp := range had {
		got := append(m1.Offsets(tp)[before[m1][tp]:], m2.Offsets(tp)[before[m2][tp]:]...)
		slices.Sort(got)
		clustertest.Contiguous(t, fmt.Sprintf("%v read by the survivors", tp), got, n, 2*n)
	}

	c.Net.HealAll()
	c.WaitFor(time.Minute, "the returned member in the group again", func() bool {
		d := c.DescribeGroup("lookouts")
		return d.GetGroupState() == "Stable" && len(d.GetMembers()) == 3 && clustertest.Balanced(all, 1, 1, m1, m2, m3)
	})
	c.WaitOffsetsWhole(3)
	c.ProduceEach("hushed", parts, 2*n, n)
	c.WaitFor(time.Minute, "the last records read and committed", func() bool { return committedEach(t, m1, all, 2*n, 3*n) })
	for _, tp := range all {
		seen := map[int64]int{}
		for _, m := range []*clustertest.Member{m1, m2, m3} {
			for _, off := range m.Offsets(tp) {
				seen[off]++
			}
		}
		for i := range int64(3 * n) {
			if seen[i] == 0 {
				t.Fatalf("%v: offset %d skipped", tp, i)
			}
		}
	}
	for _, m := range []*clustertest.Member{m1, m2, m3} {
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}
}

// A commit acknowledged while one follower of its offsets partition is
// down (the ISR shrunk to the coordinator and one follower) is there after
// the coordinator's broker is killed right after, nothing else written:
// the remaining follower, which had to hold it for the acknowledgment,
// coordinates with it. Both killed brokers return, the partition is whole
// again, and the commit is still there and the member still in the group.
func TestCommitAckedWithAShrunkISRSurvivesTheCoordinatorsDeath(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	c.CreateTopic("orders", 3, 3, nil)
	g := clustertest.Groups{C: c}
	j := g.Join("tally", "", 30*time.Second)
	g.SyncAlone("tally", j, "")
	coord, gs := c.CoordinatorOf("tally")
	fc, err := gs.FindCoordinator(clustertest.CtxFor(t, 10*time.Second), &groupv1.FindCoordinatorRequest{Key: "tally"})
	if err != nil {
		t.Fatal(err)
	}
	op := fc.GetPartition()
	var follower int32 = -1
	for _, r := range c.Partition(topicconfig.OffsetsTopic, op).GetReplicas() {
		if r != coord {
			follower = r
			break
		}
	}
	c.CrashBroker(follower)
	c.WaitFor(time.Minute, "the offsets partition's ISR without the dead follower", func() bool {
		pd := c.Partition(topicconfig.OffsetsTopic, op)
		return len(pd.GetIsr()) == 2 && !slices.Contains(pd.GetIsr(), follower) && pd.GetLeader() == coord
	})
	want := map[int32]int64{0: 7, 1: 8, 2: 9}
	if err := g.Commit("tally", j.GetGenerationId(), j.GetMemberId(), "", want); err != nil {
		t.Fatalf("commit: %v", err)
	}
	c.CrashBroker(coord)
	if next := g.Coordinator("tally"); next == coord || next == follower {
		t.Fatalf("coordinator %d after the deaths of %d and %d", next, coord, follower)
	}
	if got := g.Fetch("tally"); !clustertest.SameOffsets(got, want) {
		t.Fatalf("after the coordinator's death fetched %v, want %v", got, want)
	}
	c.StartBroker(follower)
	c.StartBroker(coord)
	c.WaitOffsetsWhole(3)
	if got := g.Fetch("tally"); !clustertest.SameOffsets(got, want) {
		t.Fatalf("with every broker back fetched %v, want %v", got, want)
	}
	if err := g.Heartbeat("tally", j.GetGenerationId(), j.GetMemberId(), ""); err != nil {
		t.Fatalf("the member's heartbeat: %v", err)
	}
}

// A group's members die silently (no LeaveGroup, no last commit) and the
// whole cluster is killed and started again while nothing consumes; the
// records produced after their last commit wait. The coordinators load
// the dead members with the group and expire them a session later; two
// new members then start every partition at its commit: what was
// committed is not read again and nothing after it is skipped.
func TestNewMembersResumeAtTheCommitsOfADeadGroupAfterTheWholeClusterRestarts(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts every broker of a cluster")
	}
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 2, 5
	c.CreateTopic("ledger", parts, 3, nil)
	c.ProduceEach("ledger", parts, 0, n)
	o := clustertest.GroupOpts("clerks", "ledger")
	o.SessionTimeout = 3 * time.Second
	m1, m2 := c.StartMember(o), c.StartMember(o)
	all := clustertest.TopicPartitions("ledger", parts)
	c.WaitFor(time.Minute, "one partition each", func() bool { return clustertest.Balanced(all, 1, 1, m1, m2) })
	c.WaitFor(time.Minute, "every record read and committed", func() bool { return committedEach(t, m1, all, 0, n) })
	m1.Kill()
	m2.Kill()
	c.ProduceEach("ledger", parts, n, n)

	for id := int32(1); id <= 3; id++ {
		c.CrashBroker(id)
	}
	for id := int32(1); id <= 3; id++ {
		c.StartBroker(id)
	}
	c.WaitOffsetsWhole(3)
	n1, n2 := c.StartMember(o), c.StartMember(o)
	c.WaitFor(time.Minute, "the new members holding a partition each", func() bool { return clustertest.Balanced(all, 1, 1, n1, n2) })
	c.WaitFor(time.Minute, "the waiting records read and committed", func() bool { return committedEach(t, n1, all, n, 2*n) })
	for _, tp := range all {
		got := append(n1.Offsets(tp), n2.Offsets(tp)...)
		slices.Sort(got)
		clustertest.Contiguous(t, fmt.Sprintf("%v read by the new members", tp), got, n, 2*n)
	}
	if d := c.DescribeGroup("clerks"); d.GetGroupState() != "Stable" || len(d.GetMembers()) != 2 {
		t.Fatalf("with the new members: %s with %d members, want Stable with 2", d.GetGroupState(), len(d.GetMembers()))
	}
}

// Static members of an idle group, the whole cluster killed and started
// again: the coordinators load the instance ids with the group, so the
// members go on in their generation, and one of them restarted after the
// reload gets its partitions back without a rebalance.
func TestStaticMembersKeepTheirGenerationAcrossAWholeClusterKill(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts every broker of a cluster")
	}
	c := clustertest.StartConsumerCluster(t)
	c.CreateTopic("shelves", 4, 3, nil)
	o := clustertest.GroupOpts("stockroom", "shelves")
	o.SessionTimeout = 20 * time.Second
	o.HeartbeatInterval = 500 * time.Millisecond
	o1, o2 := o, o
	o1.InstanceID, o2.InstanceID = "shelf-1", "shelf-2"
	s1, s2 := c.StartMember(o1), c.StartMember(o2)
	all := clustertest.TopicPartitions("shelves", 4)
	c.WaitFor(time.Minute, "two static members with 2 partitions each", func() bool { return clustertest.Balanced(all, 2, 2, s1, s2) })
	gen, had := s2.Consumer().Generation(), s1.Consumer().Assignment()

	for id := int32(1); id <= 3; id++ {
		c.CrashBroker(id)
	}
	for id := int32(1); id <= 3; id++ {
		c.StartBroker(id)
	}
	c.WaitOffsetsWhole(3)
	s1.Kill()
	back := c.StartMember(o1)
	c.WaitFor(time.Minute, "the restarted member to get its partitions", func() bool { return len(back.Consumer().Assignment()) == 2 })
	if got := back.Consumer().Assignment(); !slices.Equal(got, had) {
		t.Fatalf("restarted member got %v, had %v", got, had)
	}
	if back.Consumer().Generation() != gen || s2.Consumer().Generation() != gen {
		t.Fatalf("generation moved from %d to %d / %d across the cluster's restart", gen, back.Consumer().Generation(), s2.Consumer().Generation())
	}
	if d := c.DescribeGroup("stockroom"); d.GetGroupState() != "Stable" || d.GetGenerationId() != gen || len(d.GetMembers()) != 2 {
		t.Fatalf("group %s generation %d with %d members, want Stable %d with 2", d.GetGroupState(), d.GetGenerationId(), len(d.GetMembers()), gen)
	}
	for _, m := range []*clustertest.Member{back, s2} {
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}
}
