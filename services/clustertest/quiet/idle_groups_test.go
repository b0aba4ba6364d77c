package quiet

import (
	"context"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/topicconfig"
)

// An idle group whose offsets partition changes leader twice while
// nothing is produced (its coordinator killed, then the preferred replica
// elected back once it returned): each new coordinator loads the group
// and its commits, the members' heartbeats find it and go on in the same
// generation (no rebalance), and when records come again each member
// reads on from where it was, and its commits land.
func TestIdleGroupKeepsItsGenerationAndCommitsAcrossCoordinatorMoves(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 2, 5
	c.CreateTopic("calm", parts, 3, nil)
	c.ProduceEach("calm", parts, 0, n)
	o := clustertest.GroupOpts("sleepers", "calm")
	o.SessionTimeout = 3 * time.Second
	m1, m2 := c.StartMember(o), c.StartMember(o)
	all := clustertest.TopicPartitions("calm", parts)
	c.WaitFor(time.Minute, "one partition each", func() bool { return clustertest.Balanced(all, 1, 1, m1, m2) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	committedAll := func(want int64) func() bool {
		return func() bool {
			got, err := m1.Consumer().Committed(ctx)
			if err != nil {
				return false
			}
			for _, tp := range all {
				if got[tp] != want {
					return false
				}
			}
			return true
		}
	}
	c.WaitFor(time.Minute, "every record read and committed", committedAll(n))
	gen := m1.Consumer().Generation()

	_, gs := c.CoordinatorOf("sleepers")
	fc, err := gs.FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: "sleepers"})
	if err != nil {
		t.Fatal(err)
	}
	offsetsPartition := fc.GetPartition()
	preferred := c.Partition(topicconfig.OffsetsTopic, offsetsPartition).GetReplicas()[0]
	first, _ := c.CoordinatorOf("sleepers")
	if first != preferred {
		t.Skipf("the preferred replica %d of %s-%d does not lead it (broker %d does)", preferred, topicconfig.OffsetsTopic, offsetsPartition, first)
	}
	// Quiet: the coordinator dies, another loads the group.
	c.CrashBroker(first)
	c.WaitFor(time.Minute, "another coordinator", func() bool {
		id, _ := c.CoordinatorOf("sleepers")
		return id != first
	})
	time.Sleep(2 * o.SessionTimeout) // idle under the new coordinator
	c.StartBroker(first)
	c.WaitFor(time.Minute, "the old coordinator back in the ISR", func() bool {
		return len(c.Partition(topicconfig.OffsetsTopic, offsetsPartition).GetIsr()) == 3
	})
	resp, err := c.Admin().ElectLeaders(ctx, &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions: []*commonv1.TopicPartition{{Topic: topicconfig.OffsetsTopic, Partition: offsetsPartition}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("preferred election: %v %v", resp, err)
	}
	c.WaitFor(time.Minute, "the preferred replica to coordinate again", func() bool {
		id, _ := c.CoordinatorOf("sleepers")
		return id == first && c.Leads(first, topicconfig.OffsetsTopic, offsetsPartition)
	})
	time.Sleep(2 * o.SessionTimeout) // idle under the returned coordinator

	for _, m := range []*clustertest.Member{m1, m2} {
		if g := m.Consumer().Generation(); g != gen {
			t.Fatalf("a member is in generation %d after the idle moves, was %d", g, gen)
		}
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}
	if d := c.DescribeGroup("sleepers"); d.GetGroupState() != "Stable" || d.GetGenerationId() != gen || len(d.GetMembers()) != 2 {
		t.Fatalf("after the moves: %s generation %d with %d members, want Stable %d with 2", d.GetGroupState(), d.GetGenerationId(), len(d.GetMembers()), gen)
	}
	if !committedAll(n)() {
		got, err := m1.Consumer().Committed(ctx)
		t.Fatalf("committed after the moves: %v %v, want %d each", got, err, n)
	}

	c.ProduceEach("calm", parts, n, n)
	c.WaitFor(time.Minute, "the new records read and committed", committedAll(2*n))
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

// An idle group's coordinator is frozen (as by SIGSTOP: its links, etcd's
// and its members', stall) past its lease and the members' session
// timeout, while nothing is produced. Another broker takes the offsets
// partition over and the members carry on with it in the same generation.
// When the frozen broker runs again, its clock jumped past every
// session: on its stale state it must not rebalance the group or expire
// anything that counts. The group stays Stable in its generation with
// both members and its commits, the offsets partition is whole, and
// records produced afterwards are read and committed.
func TestFrozenCoordinatorOfAnIdleGroupChangesNothingWhenItResumes(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 2, 5
	c.CreateTopic("hush", parts, 3, nil)
	c.ProduceEach("hush", parts, 0, n)
	o := clustertest.GroupOpts("hushed", "hush")
	o.SessionTimeout = 3 * time.Second
	m1 := c.StartMemberOn(c.GroupClientVia("member-1"), o)
	m2 := c.StartMemberOn(c.GroupClientVia("member-2"), o)
	all := clustertest.TopicPartitions("hush", parts)
	c.WaitFor(time.Minute, "one partition each", func() bool { return clustertest.Balanced(all, 1, 1, m1, m2) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	committedAll := func(want int64) func() bool {
		return func() bool {
			got, err := m1.Consumer().Committed(ctx)
			if err != nil {
				return false
			}
			for _, tp := range all {
				if got[tp] != want {
					return false
				}
			}
			return true
		}
	}
	c.WaitFor(time.Minute, "every record read and committed", committedAll(n))
	gen := m1.Consumer().Generation()
	first, gs := c.CoordinatorOf("hushed")
	fc, err := gs.FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: "hushed"})
	if err != nil {
		t.Fatal(err)
	}
	op := fc.GetPartition()

	c.EtcdLink(first).Pause()
	c.Net.Pause(clustertest.BrokerName(first))
	c.WaitFor(time.Minute, "another leader of the offsets partition", func() bool {
		l := c.Partition(topicconfig.OffsetsTopic, op).GetLeader()
		return l > 0 && l != first && c.Leads(l, topicconfig.OffsetsTopic, op)
	})
	time.Sleep(2 * o.SessionTimeout) // idle, the old coordinator still frozen
	c.Net.Resume(clustertest.BrokerName(first))
	c.EtcdLink(first).Resume()
	c.WaitFor(time.Minute, "the resumed broker back in the offsets partition's ISR", func() bool {
		return len(c.Partition(topicconfig.OffsetsTopic, op).GetIsr()) == 3
	})
	time.Sleep(2 * o.SessionTimeout) // idle again, every broker running

	for _, m := range []*clustertest.Member{m1, m2} {
		if g := m.Consumer().Generation(); g != gen {
			t.Fatalf("a member is in generation %d after the freeze, was %d", g, gen)
		}
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}
	if d := c.DescribeGroup("hushed"); d.GetGroupState() != "Stable" || d.GetGenerationId() != gen || len(d.GetMembers()) != 2 {
		t.Fatalf("after the freeze: %s generation %d with %d members, want Stable %d with 2", d.GetGroupState(), d.GetGenerationId(), len(d.GetMembers()), gen)
	}
	if !committedAll(n)() {
		got, err := m1.Consumer().Committed(ctx)
		t.Fatalf("committed after the freeze: %v %v, want %d each", got, err, n)
	}
	c.WaitHWAtLEO(topicconfig.OffsetsTopic, op, 1, 2, 3)
	c.SameLogs(topicconfig.OffsetsTopic, op, 1, 2, 3)

	c.ProduceEach("hush", parts, n, n)
	c.WaitFor(time.Minute, "the new records read and committed", committedAll(2*n))
}
