package groups

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/client/assign"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
)

// A member reads half a topic, commits, reads on without committing and
// dies (no LeaveGroup, no final commit). A new member of the group starts
// every partition exactly at the committed offset: nothing is skipped, and
// only what came after the commit is read twice.
func TestGroupMemberResumesAtTheCommittedOffsetAfterACrash(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 4, 50
	c.CreateTopic("orders", parts, 3, nil)
	c.ProduceEach("orders", parts, 0, n)

	o := clustertest.GroupOpts("billing", "orders")
	o.DisableAutoCommit = true
	first, err := client.NewGroupConsumer(c.GroupClient(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[client.TopicPartition][]int64{}
	poll := func(until int) {
		t.Helper()
		for total := 0; total < until; {
			recs, err := first.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
				got[tp] = append(got[tp], r.Offset)
			}
			total = 0
			for _, g := range got {
				total += len(g)
			}
		}
	}
	poll(parts * n / 2)
	committed := first.Positions()
	if err := first.CommitSync(ctx, committed); err != nil {
		t.Fatal(err)
	}
	poll(parts*n/2 + 20) // read on past the commit
	first.Abandon()

	for _, tp := range clustertest.TopicPartitions("orders", parts) {
		clustertest.Contiguous(t, fmt.Sprintf("first member, %v", tp), got[tp][:committed[tp]], 0, committed[tp])
	}
	second := c.StartMember(clustertest.GroupOpts("billing", "orders"))
	c.WaitFor(time.Minute, "the second member to read to the end", func() bool {
		if err := second.Failure(); err != nil {
			t.Fatalf("second member: %v", err)
		}
		for _, tp := range clustertest.TopicPartitions("orders", parts) {
			// A partition the first member read to the end before its
			// commit has nothing left to read.
			off := second.Offsets(tp)
			if committed[tp] < n && (len(off) == 0 || off[len(off)-1] < n-1) {
				return false
			}
		}
		return second.Failure() == nil
	})
	for _, tp := range clustertest.TopicPartitions("orders", parts) {
		clustertest.Contiguous(t, fmt.Sprintf("second member, %v", tp), second.Offsets(tp), committed[tp], n)
	}
	if err := second.Failure(); err != nil {
		t.Fatal(err)
	}
}

// Two members share the partitions evenly, then three; a member that stops
// heartbeating is removed after its session timeout and its partitions go
// to the others; every record is read. Cooperative-sticky, so the real
// coordinator carries KIP-429's two-step handover.
func TestGroupBalancesMembersAndMovesASilentMembersPartitions(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 6, 10
	c.CreateTopic("events", parts, 3, nil)
	c.ProduceEach("events", parts, 0, n)
	all := clustertest.TopicPartitions("events", parts)
	o := clustertest.GroupOpts("audit", "events")
	o.Assignors = []assign.Assignor{assign.CooperativeSticky{}}

	m1, m2 := c.StartMember(o), c.StartMember(o)
	c.WaitFor(time.Minute, "two members with 3 partitions each", func() bool { return clustertest.Balanced(all, 3, 3, m1, m2) })
	m3 := c.StartMember(o)
	c.WaitFor(time.Minute, "three members with 2 partitions each", func() bool { return clustertest.Balanced(all, 2, 2, m1, m2, m3) })
	gen := m1.Consumer().Generation()
	m3.Kill()
	c.WaitFor(time.Minute, "the silent member's partitions to move", func() bool {
		return clustertest.Balanced(all, 3, 3, m1, m2) && m1.Consumer().Generation() > gen
	})
	c.WaitFor(time.Minute, "every record read", func() bool {
		for _, tp := range all {
			seen := map[int64]bool{}
			for _, m := range []*clustertest.Member{m1, m2, m3} {
				for _, off := range m.Offsets(tp) {
					seen[off] = true
				}
			}
			for i := range int64(n) {
				if !seen[i] {
					return false
				}
			}
		}
		return true
	})
	for _, m := range []*clustertest.Member{m1, m2, m3} {
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}
	d := c.DescribeGroup("audit")
	if d.GetGroupState() != "Stable" || len(d.GetMembers()) != 2 || d.GetProtocolName() != assign.CooperativeStickyName {
		t.Fatalf("group after the member left: state %s, %d members, protocol %s", d.GetGroupState(), len(d.GetMembers()), d.GetProtocolName())
	}
}

// A member whose user stops calling Poll for longer than
// max.poll.interval.ms leaves the group, as Kafka's consumer does: its
// partitions move to the member that still polls (while its session would
// still be kept alive by heartbeats), it is told they were lost, and it
// joins again and gets its share back at its next Poll.
func TestGroupMemberThatStopsPollingLeavesAndRejoins(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 4, 5
	c.CreateTopic("jobs", parts, 3, nil)
	c.ProduceEach("jobs", parts, 0, n)
	all := clustertest.TopicPartitions("jobs", parts)
	o := clustertest.GroupOpts("workers", "jobs")
	o.RebalanceTimeout = 1500 * time.Millisecond
	m1, m2 := c.StartMember(o), c.StartMember(o)
	c.WaitFor(time.Minute, "two members with 2 partitions each", func() bool { return clustertest.Balanced(all, 2, 2, m1, m2) })

	m1.Hold() // the first member's handler is stuck
	c.WaitFor(time.Minute, "the stuck member to leave and the other to take everything", func() bool {
		d := c.DescribeGroup("workers")
		return len(d.GetMembers()) == 1 && d.GetGroupState() == "Stable" && m1.Consumer().Generation() == -1 &&
			len(m2.Consumer().Assignment()) == parts
	})
	if d := c.DescribeGroup("workers"); d.GetMembers()[0].GetMemberId() != m2.Consumer().MemberID() {
		t.Fatalf("the member left in the group is %s, want the polling one %s", d.GetMembers()[0].GetMemberId(), m2.Consumer().MemberID())
	}
	m1.Release()
	c.WaitFor(time.Minute, "the member to rejoin at its next Poll", func() bool { return clustertest.Balanced(all, 2, 2, m1, m2) })
	lost := m1.Lost()
	if lost == 0 {
		t.Fatal("the member that left on its poll timeout was not told its partitions were lost")
	}
	c.WaitFor(time.Minute, "every record read", func() bool {
		for _, tp := range all {
			if len(m1.Offsets(tp))+len(m2.Offsets(tp)) < n {
				return false
			}
		}
		return true
	})
	for _, m := range []*clustertest.Member{m1, m2} {
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}
}

// A member that read everything gives a partition up when a second member
// joins: it commits before revoking (auto-commit, whose interval never
// comes), so the new owner starts at the end, reading nothing twice.
func TestGroupRebalanceCommitsOnRevoke(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 2, 20
	c.CreateTopic("ledger", parts, 3, nil)
	c.ProduceEach("ledger", parts, 0, n)
	o := clustertest.GroupOpts("reconcile", "ledger")
	o.AutoCommitInterval = time.Hour
	var revoked sync.WaitGroup
	revoked.Add(1)
	var once sync.Once
	o.OnPartitionsRevoked = func(context.Context, []client.TopicPartition) { once.Do(revoked.Done) }
	m1 := c.StartMember(o)
	c.WaitFor(time.Minute, "the first member to read everything", func() bool { return m1.Total() == parts*n })
	o.OnPartitionsRevoked = nil
	m2 := c.StartMember(o)
	c.WaitFor(time.Minute, "one partition each", func() bool { return clustertest.Balanced(clustertest.TopicPartitions("ledger", parts), 1, 1, m1, m2) })
	revoked.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := m2.Consumer().Committed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range clustertest.TopicPartitions("ledger", parts) {
		if got[tp] != n {
			t.Fatalf("committed %v, want %d for every partition", got, n)
		}
	}
	c.ProduceEach("ledger", parts, n, 1)
	c.WaitFor(time.Minute, "the new records", func() bool { return m1.Total()+m2.Total() == parts*(n+1) })
	if m2.Total() != 1 {
		t.Fatalf("the new owner read %d records, want only the one written after the rebalance", m2.Total())
	}
}

// The broker coordinating the group dies mid-consumption: the members find
// the new coordinator (the new leader of the group's __consumer_offsets
// partition), which has every offset committed before (acks=all), and
// consumption goes on with nothing skipped.
func TestGroupFollowsTheCoordinatorWhenItsBrokerDies(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const parts, n = 3, 20
	c.CreateTopic("flow", parts, 3, nil)
	c.ProduceEach("flow", parts, 0, n)
	o := clustertest.GroupOpts("pipeline", "flow")
	m1, m2 := c.StartMember(o), c.StartMember(o)
	all := clustertest.TopicPartitions("flow", parts)
	c.WaitFor(time.Minute, "the first records read", func() bool { return m1.Total()+m2.Total() >= parts*n })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var before map[client.TopicPartition]int64
	c.WaitFor(time.Minute, "every read record committed", func() bool {
		var err error
		before, err = m1.Consumer().Committed(ctx)
		if err != nil {
			return false
		}
		for _, tp := range all {
			if before[tp] != n {
				return false
			}
		}
		return true
	})
	dead, _ := c.CoordinatorOf("pipeline")
	c.CrashBroker(dead)
	c.ProduceEach("flow", parts, n, n)
	c.WaitFor(2*time.Minute, "every record read after the crash", func() bool {
		for _, tp := range all {
			seen := map[int64]bool{}
			for _, off := range append(m1.Offsets(tp), m2.Offsets(tp)...) {
				seen[off] = true
			}
			for i := range int64(2 * n) {
				if !seen[i] {
					return false
				}
			}
		}
		return true
	})
	now, _ := c.CoordinatorOf("pipeline")
	if now == dead {
		t.Fatalf("broker %d still coordinates the group", dead)
	}
	after, err := m2.Consumer().Committed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range all {
		if after[tp] < before[tp] {
			t.Fatalf("%v: committed %d after the crash, %d before: a commit was lost", tp, after[tp], before[tp])
		}
	}
	for _, m := range []*clustertest.Member{m1, m2} {
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}
}

// A static member restarted within its session timeout takes its place
// back: same partitions, no new generation for anyone (KIP-345).
func TestGroupStaticMemberRestartsWithoutARebalance(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	c.CreateTopic("stock", 4, 3, nil)
	o := clustertest.GroupOpts("warehouse", "stock")
	o.SessionTimeout = 20 * time.Second
	o.HeartbeatInterval = 500 * time.Millisecond
	o1, o2 := o, o
	o1.InstanceID, o2.InstanceID = "shelf-1", "shelf-2"
	s1, s2 := c.StartMember(o1), c.StartMember(o2)
	all := clustertest.TopicPartitions("stock", 4)
	c.WaitFor(time.Minute, "two static members with 2 partitions each", func() bool { return clustertest.Balanced(all, 2, 2, s1, s2) })
	gen, had := s2.Consumer().Generation(), s1.Consumer().Assignment()
	s1.Kill()
	back := c.StartMember(o1)
	c.WaitFor(time.Minute, "the restarted member to get its partitions", func() bool { return len(back.Consumer().Assignment()) == 2 })
	if got := back.Consumer().Assignment(); !slices.Equal(got, had) {
		t.Fatalf("restarted member got %v, had %v", got, had)
	}
	if back.Consumer().Generation() != gen || s2.Consumer().Generation() != gen {
		t.Fatalf("generation moved from %d to %d / %d: the restart rebalanced", gen, back.Consumer().Generation(), s2.Consumer().Generation())
	}
	if d := c.DescribeGroup("warehouse"); d.GetGroupState() != "Stable" || d.GetGenerationId() != gen {
		t.Fatalf("group %s generation %d, want Stable %d", d.GetGroupState(), d.GetGenerationId(), gen)
	}
}

// A second consumer with a static member's instance id fences the first,
// which stops with FENCED_INSTANCE_ID and is told its partitions are lost.
func TestGroupStaticMemberIsFencedByItsReplacement(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	c.CreateTopic("fence", 2, 3, nil)
	o := clustertest.GroupOpts("fenced", "fence")
	o.InstanceID = "only-one"
	old := c.StartMember(o)
	c.WaitFor(time.Minute, "the first member's assignment", func() bool { return len(old.Consumer().Assignment()) == 2 })
	replacement := c.StartMember(o)
	c.WaitFor(time.Minute, "the replacement's assignment", func() bool { return len(replacement.Consumer().Assignment()) == 2 })
	c.WaitFor(time.Minute, "the old member fenced", func() bool { return old.Failure() != nil })
	if code := kerr.CodeOf(old.Failure()); code != kerr.FencedInstanceID {
		t.Fatalf("old member stopped with %v, want FENCED_INSTANCE_ID", old.Failure())
	}
	lost := old.Lost()
	if lost == 0 {
		t.Fatal("the fenced member was not told its partitions were lost")
	}
	if err := replacement.Failure(); err != nil {
		t.Fatal(err)
	}
}

// An idle group (no records for several session timeouts, heartbeats
// only) stays Stable in the same generation.
func TestGroupStaysStableThroughAQuietGap(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	c.CreateTopic("quiet", 2, 3, nil)
	o := clustertest.GroupOpts("idle", "quiet")
	o.SessionTimeout = time.Second
	o.HeartbeatInterval = 100 * time.Millisecond
	m1, m2 := c.StartMember(o), c.StartMember(o)
	c.WaitFor(time.Minute, "one partition each", func() bool { return clustertest.Balanced(clustertest.TopicPartitions("quiet", 2), 1, 1, m1, m2) })
	gen := m1.Consumer().Generation()
	time.Sleep(5 * o.SessionTimeout) // the quiet gap itself
	if m1.Consumer().Generation() != gen || m2.Consumer().Generation() != gen {
		t.Fatalf("generation moved from %d to %d / %d during the quiet gap", gen, m1.Consumer().Generation(), m2.Consumer().Generation())
	}
	if d := c.DescribeGroup("idle"); d.GetGroupState() != "Stable" || d.GetGenerationId() != gen || len(d.GetMembers()) != 2 {
		t.Fatalf("after the gap: %s generation %d with %d members, want Stable %d with 2", d.GetGroupState(), d.GetGenerationId(), len(d.GetMembers()), gen)
	}
	for _, m := range []*clustertest.Member{m1, m2} {
		if err := m.Failure(); err != nil {
			t.Fatal(err)
		}
	}
	m1.Close()
	c.WaitFor(time.Minute, "the remaining member to take both partitions", func() bool { return len(m2.Consumer().Assignment()) == 2 })
}

// A member that left on its poll timeout while an operator moved the
// group's commit back (the group was empty, so the reset was allowed)
// rejoins at the reset offset and reads again from there; its automatic
// commits must follow it from there. Before, the consumer left out every
// position up to its own last commit, so the group's commit stayed at the
// reset offset after everything had been read again, and the next member
// would read it all a third time.
func TestAutoCommitFollowsAMemberBackAfterAnOffsetReset(t *testing.T) {
	c := clustertest.StartConsumerCluster(t)
	const n = 6
	c.CreateTopic("audit", 1, 3, nil)
	c.ProduceEach("audit", 1, 0, n)
	tp := client.TopicPartition{Topic: "audit", Partition: 0}
	o := clustertest.GroupOpts("auditors", "audit")
	o.RebalanceTimeout = 1500 * time.Millisecond
	m := c.StartMember(o)
	committed := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := m.Consumer().Committed(ctx, tp)
		if err != nil {
			return -2
		}
		if off, ok := got[tp]; ok {
			return off
		}
		return -1
	}
	c.WaitFor(time.Minute, "everything read and committed", func() bool { return len(m.Offsets(tp)) == n && committed() == n })

	m.Hold() // the member stops polling and leaves on its poll timeout
	c.WaitFor(time.Minute, "the group empty", func() bool {
		d := c.DescribeGroup("auditors")
		return len(d.GetMembers()) == 0 && m.Consumer().Generation() == -1
	})
	admin := c.GroupClient()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := admin.ResetGroupOffsets(ctx, &groupv1.ResetGroupOffsetsRequest{GroupId: "auditors",
		Spec: groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_EARLIEST}); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 0 {
		t.Fatalf("committed %d after the reset to the earliest offset, want 0", got)
	}
	m.Release()
	c.WaitFor(time.Minute, "the records read again from the reset offset", func() bool { return len(m.Offsets(tp)) == 2*n })
	c.WaitFor(30*time.Second, "the rejoined member's commits following it to the end again", func() bool { return committed() == n })
	if err := m.Failure(); err != nil {
		t.Fatal(err)
	}
}
