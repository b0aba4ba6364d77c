package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/assign"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func groupOptions(group string) client.GroupOptions {
	return client.GroupOptions{
		GroupID: group, Topics: []string{"t"}, AutoOffsetReset: "earliest",
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
		RebalanceTimeout: 2 * time.Second, MaxWait: 30 * time.Millisecond, MaxBytes: 1,
		AutoCommitInterval: 50 * time.Millisecond,
	}
}

// appendEach writes n records to every partition of t, one batch each.
func appendEach(fc *fakebroker.Cluster, parts, n int) {
	for p := range parts {
		for i := range n {
			fc.Append("t", int32(p), recordbatch.Record{Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
}

// polled runs Poll on a goroutine until stopped, keeping what it returns.
type polled struct {
	gc   *client.GroupConsumer
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	got  map[int32][]int64
	err  error
}

func startPolling(t *testing.T, c *client.Client, o client.GroupOptions) *polled {
	t.Helper()
	gc, err := client.NewGroupConsumer(c, o)
	if err != nil {
		t.Fatal(err)
	}
	p := &polled{gc: gc, stop: make(chan struct{}), done: make(chan struct{}), got: map[int32][]int64{}}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			recs, err := gc.Poll(context.Background())
			p.mu.Lock()
			for _, r := range recs {
				p.got[r.Partition] = append(p.got[r.Partition], r.Offset)
			}
			p.err = err
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { p.halt(); gc.Abandon() })
	return p
}

func (p *polled) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

func (p *polled) offsets(part int32) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got[part])
}

func (p *polled) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGroupOptionsAreChecked(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	c := newClient(t, fc)
	for _, c2 := range []struct {
		o    client.GroupOptions
		code kerr.Code
	}{
		{client.GroupOptions{Topics: []string{"t"}}, kerr.InvalidGroupID},
		{client.GroupOptions{GroupID: "g"}, kerr.InvalidConfig},
		{client.GroupOptions{GroupID: "g", Topics: []string{"t"}, AutoOffsetReset: "smallest"}, kerr.InvalidConfig},
		{client.GroupOptions{GroupID: "g", Topics: []string{"t"}, SessionTimeout: time.Second, HeartbeatInterval: time.Second}, kerr.InvalidConfig},
		{client.GroupOptions{GroupID: "g", Topics: []string{"t"}, Assignors: []assign.Assignor{assign.Range{}, assign.Range{}}}, kerr.InvalidConfig},
	} {
		if _, err := client.NewGroupConsumer(c, c2.o); kerr.CodeOf(err) != c2.code {
			t.Errorf("%+v: %v, want %v", c2.o, err, c2.code)
		}
	}
}

// A group id, topic, instance id, client id or rack that is not UTF-8 is
// refused when the consumer is made, naming the option. No request
// carrying it can be sent (proto strings are UTF-8), and the consumer
// joined in the background for ever, Poll answering no records and no
// error.
func TestGroupOptionsThatAreNotUTF8AreRefused(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	for _, c2 := range []struct {
		field string
		set   func(*client.GroupOptions)
	}{
		{"group.id", func(o *client.GroupOptions) { o.GroupID = "g\xff" }},
		{"topics", func(o *client.GroupOptions) { o.Topics = []string{"t", "\xed\xa0\x80"} }},
		{"group.instance.id", func(o *client.GroupOptions) { o.InstanceID = "\xff" }},
		{"client.id", func(o *client.GroupOptions) { o.ClientID = "\xff" }},
		{"client.rack", func(o *client.GroupOptions) { o.Rack = "\xff" }},
	} {
		o := groupOptions("g")
		c2.set(&o)
		gc, err := client.NewGroupConsumer(c, o)
		if err == nil {
			gc.Abandon()
		}
		var ke *kerr.Error
		if !errors.As(err, &ke) || ke.Field != c2.field {
			t.Errorf("%s not UTF-8: %v, want an error naming it", c2.field, err)
		}
	}
}

// Eager and cooperative: a member reads, commits, dies; the next member
// starts at the commit.
func TestGroupConsumerResumesFromTheCommit(t *testing.T) {
	for _, coop := range []bool{false, true} {
		t.Run(fmt.Sprintf("cooperative=%t", coop), func(t *testing.T) {
			fc := startCluster(t, fakebroker.Config{})
			fc.CreateTopic("t", 2)
			appendEach(fc, 2, 10)
			c := newClient(t, fc)
			o := groupOptions("g")
			o.DisableAutoCommit = true
			if coop {
				o.Assignors = []assign.Assignor{assign.CooperativeSticky{}}
			}
			first := startPolling(t, c, o)
			eventually(t, "the first member to read everything", func() bool {
				return len(first.offsets(0)) == 10 && len(first.offsets(1)) == 10
			})
			first.halt()
			// It commits less than it read, then dies.
			pos := map[client.TopicPartition]int64{{Topic: "t", Partition: 0}: 4, {Topic: "t", Partition: 1}: 6}
			ctx := testCtx(t, 5*time.Second)
			if err := first.gc.CommitSync(ctx, pos); err != nil {
				t.Fatal(err)
			}
			first.gc.Abandon()
			for p := range int32(2) {
				if got := fc.Committed("g", "t", p); got != pos[client.TopicPartition{Topic: "t", Partition: p}] {
					t.Fatalf("committed %d for partition %d, want %v", got, p, pos)
				}
			}
			second := startPolling(t, c, o)
			eventually(t, "the second member to read to the end", func() bool {
				a, b := second.offsets(0), second.offsets(1)
				return len(a) > 0 && a[len(a)-1] == 9 && len(b) > 0 && b[len(b)-1] == 9
			})
			for p := range int32(2) {
				from := pos[client.TopicPartition{Topic: "t", Partition: p}]
				want := []int64{}
				for i := from; i < 10; i++ {
					want = append(want, i)
				}
				if got := second.offsets(p); !slices.Equal(got, want) {
					t.Fatalf("partition %d: second member read %v, want %v", p, got, want)
				}
			}
		})
	}
}

// The coordinator moves (NOT_COORDINATOR with a hint) and is loading for a
// while (COORDINATOR_LOAD_IN_PROGRESS): the member follows, keeps its
// place, and commits land on the new coordinator.
func TestGroupConsumerFollowsTheCoordinator(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	fc.CreateTopic("t", 2)
	appendEach(fc, 2, 5)
	c := newClient(t, fc)
	m := startPolling(t, c, groupOptions("g"))
	eventually(t, "everything read and committed", func() bool {
		return fc.Committed("g", "t", 0) == 5 && fc.Committed("g", "t", 1) == 5
	})
	_, gen, _ := fc.GroupState("g")
	loading := 0
	var mu sync.Mutex
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		mu.Lock()
		defer mu.Unlock()
		if call.Node == 2 && call.Method == "Heartbeat" && loading < 3 {
			loading++
			return &fakebroker.Fault{Code: kerr.CoordinatorLoadInProgress}
		}
		return nil
	})
	fc.MoveCoordinator(2)
	appendEach(fc, 2, 1) // offset 5 of each partition
	eventually(t, "the new records committed through the new coordinator", func() bool {
		return fc.Committed("g", "t", 0) == 6 && fc.Committed("g", "t", 1) == 6
	})
	// The commits can find the new coordinator before the next heartbeat
	// is due: wait for one to get through its three refusals.
	eventually(t, "a heartbeat answered by the new coordinator", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fc.NodeCalls(2, "Heartbeat") > loading
	})
	if _, now, _ := fc.GroupState("g"); now != gen {
		t.Fatalf("generation %d → %d: the move cost a rebalance", gen, now)
	}
	if err := m.failure(); err != nil {
		t.Fatal(err)
	}
}

// Cooperative-sticky: a second member takes half the partitions; the first
// is told to revoke only those, commits them first, and keeps the rest.
func TestGroupConsumerCooperativeRevokesOnlyWhatMoves(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 4)
	appendEach(fc, 4, 3)
	c := newClient(t, fc)
	o := groupOptions("g")
	o.Assignors = []assign.Assignor{assign.CooperativeSticky{}}
	o.AutoCommitInterval = time.Hour
	var mu sync.Mutex
	var revoked [][]client.TopicPartition
	o1 := o
	o1.OnPartitionsRevoked = func(_ context.Context, tps []client.TopicPartition) {
		mu.Lock()
		revoked = append(revoked, tps)
		mu.Unlock()
	}
	m1 := startPolling(t, c, o1)
	eventually(t, "the first member to read everything", func() bool {
		n := 0
		for p := range int32(4) {
			n += len(m1.offsets(p))
		}
		return n == 12
	})
	m2 := startPolling(t, c, o)
	eventually(t, "two partitions each", func() bool {
		return len(m1.gc.Assignment()) == 2 && len(m2.gc.Assignment()) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if len(revoked) != 1 || len(revoked[0]) != 2 {
		t.Fatalf("revoked %v, want the two partitions that moved, once", revoked)
	}
	for _, tp := range revoked[0] {
		if got := fc.Committed("g", "t", tp.Partition); got != 3 {
			t.Fatalf("%v committed at %d before it moved, want 3", tp, got)
		}
		if slices.Contains(m1.gc.Assignment(), tp) {
			t.Fatalf("%v revoked but still assigned", tp)
		}
	}
	for p := range int32(4) {
		if n := len(m2.offsets(p)); n != 0 {
			t.Fatalf("the new member read %d records of partition %d: the commit on revoke was lost", n, p)
		}
	}
}

// A second consumer with the same instance id takes the static member's
// place; the first learns FENCED_INSTANCE_ID, which is fatal.
func TestGroupConsumerFencedIsFatal(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	o := groupOptions("g")
	o.InstanceID = "i-1"
	lost := make(chan []client.TopicPartition, 1)
	o1 := o
	o1.OnPartitionsLost = func(_ context.Context, tps []client.TopicPartition) { lost <- tps }
	m1 := startPolling(t, c, o1)
	eventually(t, "an assignment", func() bool { return len(m1.gc.Assignment()) == 1 })
	m2 := startPolling(t, c, o)
	eventually(t, "the first member fenced", func() bool { return m1.failure() != nil })
	if code := kerr.CodeOf(m1.failure()); code != kerr.FencedInstanceID {
		t.Fatalf("first member: %v", m1.failure())
	}
	select {
	case tps := <-lost:
		if len(tps) != 1 {
			t.Fatalf("lost %v", tps)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnPartitionsLost never called")
	}
	if _, err := m1.gc.Poll(context.Background()); kerr.CodeOf(err) != kerr.FencedInstanceID {
		t.Fatalf("a later Poll: %v", err)
	}
	eventually(t, "the replacement's assignment", func() bool { return len(m2.gc.Assignment()) == 1 })
}

// Close commits, calls OnPartitionsRevoked and leaves at once: the other
// member gets every partition without waiting for a session timeout.
func TestGroupConsumerCloseCommitsAndLeaves(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 2)
	appendEach(fc, 2, 4)
	c := newClient(t, fc)
	o := groupOptions("g")
	o.AutoCommitInterval = time.Hour
	o.SessionTimeout = time.Minute
	o.HeartbeatInterval = 50 * time.Millisecond
	m1 := startPolling(t, c, o)
	eventually(t, "everything read", func() bool { return len(m1.offsets(0))+len(m1.offsets(1)) == 8 })
	m2 := startPolling(t, c, o)
	eventually(t, "one partition each", func() bool { return len(m1.gc.Assignment()) == 1 && len(m2.gc.Assignment()) == 1 })
	m1.halt()
	if err := m1.gc.Close(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other member to take both", func() bool { return len(m2.gc.Assignment()) == 2 })
	if fc.Committed("g", "t", 0) != 4 || fc.Committed("g", "t", 1) != 4 {
		t.Fatalf("committed %d, %d", fc.Committed("g", "t", 0), fc.Committed("g", "t", 1))
	}
	if n := len(m2.offsets(0)) + len(m2.offsets(1)); n != 0 {
		t.Fatalf("the remaining member re-read %d records", n)
	}
	if _, err := m1.gc.Poll(context.Background()); !errorsIsClosed(err) {
		t.Fatalf("Poll after Close: %v", err)
	}
}

func errorsIsClosed(err error) bool { return err != nil && kerr.CodeOf(err) == kerr.InvalidRequest }

// With manual commits, OnPartitionsRevoked may commit during Close: the
// consumer refuses Poll by then, not commits.
func TestGroupConsumerRevokeCallbackCommitsOnClose(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	appendEach(fc, 1, 3)
	c := newClient(t, fc)
	o := groupOptions("g")
	o.DisableAutoCommit = true
	var gc *client.GroupConsumer
	var commitErr error
	o.OnPartitionsRevoked = func(ctx context.Context, tps []client.TopicPartition) {
		commitErr = gc.CommitSync(ctx, nil)
	}
	gc, err := client.NewGroupConsumer(c, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	for n := 0; n < 3; {
		recs, err := gc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(recs)
	}
	if err := gc.Close(ctx); err != nil || commitErr != nil {
		t.Fatalf("close: %v; commit in the callback: %v", err, commitErr)
	}
	if got := fc.Committed("g", "t", 0); got != 3 {
		t.Fatalf("committed %d, want 3", got)
	}
	if err := gc.CommitSync(ctx, nil); err == nil {
		t.Fatal("a commit after Close was accepted")
	}
}

// The leader notices a subscribed topic grew and rebalances, so the new
// partitions are read.
func TestGroupConsumerRebalancesWhenPartitionsAreAdded(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 2)
	o := testOptions()
	o.MetadataMaxAge = 100 * time.Millisecond
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	m := startPolling(t, c, groupOptions("g"))
	eventually(t, "two partitions", func() bool { return len(m.gc.Assignment()) == 2 })
	gen := m.gc.Generation()
	fc.CreateTopic("t", 4) // the topic, now with four partitions
	eventually(t, "four partitions", func() bool { return len(m.gc.Assignment()) == 4 })
	if m.gc.Generation() <= gen {
		t.Fatalf("generation %d, was %d", m.gc.Generation(), gen)
	}
}

// A subscribed topic that did not exist when the leader assigned is
// assigned once it is created, and one deleted is taken away: the leader
// compares every subscribed topic's partition count, 0 for a missing one,
// with what it assigned from. Before, it compared only the topics it had
// assigned partitions of, so it never noticed either change.
func TestGroupConsumerRebalancesWhenASubscribedTopicComesOrGoes(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 2)
	o := testOptions()
	o.MetadataMaxAge = 100 * time.Millisecond
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	g := groupOptions("g")
	g.Topics = []string{"t", "u"}
	m := startPolling(t, c, g)
	eventually(t, "t's two partitions", func() bool { return len(m.gc.Assignment()) == 2 })
	fc.CreateTopic("u", 3)
	eventually(t, "u's three partitions too", func() bool { return len(m.gc.Assignment()) == 5 })
	fc.DeleteTopic("u")
	eventually(t, "u's partitions taken away", func() bool {
		return slices.Equal(m.gc.Assignment(), []client.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}})
	})
	if err := m.failure(); err != nil {
		t.Fatal(err)
	}
}

// A member starts at the group's commit with the leader epoch committed
// with it (KIP-320), so its first fetch finds a log truncated under the
// commit by an unclean election: with a reset policy it reads from where
// the logs part, with none it gets a LogTruncation. Before, the epoch was
// dropped (and a member that read nothing committed -1 over it): the next
// owner started at the committed offset in the new log and silently
// skipped the records written there since.
func TestGroupConsumerChecksTheCommittedLeaderEpoch(t *testing.T) {
	for _, reset := range []string{"earliest", "none"} {
		t.Run(reset, func(t *testing.T) {
			fc := startCluster(t, fakebroker.Config{})
			fc.CreateTopic("t", 1)
			for i := range 6 {
				fc.Append("t", 0, recordbatch.Record{Value: fmt.Appendf(nil, "a%d", i)})
			}
			c := newClient(t, fc)
			o := groupOptions("g")
			tp := client.TopicPartition{Topic: "t", Partition: 0}
			first := startPolling(t, c, o)
			eventually(t, "the first member to read a0..a5", func() bool { return len(first.offsets(0)) == 6 })
			first.halt()
			if err := first.gc.Close(testCtx(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			// One that reads nothing new commits the epoch it started from.
			idle := startPolling(t, c, o)
			eventually(t, "the idle member's position", func() bool { _, ok := idle.gc.Positions()[tp]; return ok })
			idle.halt()
			if err := idle.gc.Close(testCtx(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			if off, epoch := fc.CommittedWithEpoch("g", "t", 0); off != 6 || epoch != 0 {
				t.Fatalf("committed offset %d at leader epoch %d, want 6 at 0", off, epoch)
			}

			fc.UncleanElection("t", 0, 1) // the new leader has a0 only
			for i := 1; i <= 7; i++ {
				fc.Append("t", 0, recordbatch.Record{Value: fmt.Appendf(nil, "b%d", i)})
			}
			o.AutoOffsetReset = reset
			next := startPolling(t, c, o)
			if reset == "none" {
				eventually(t, "the next member to fail", func() bool { return next.failure() != nil })
				var lt *client.LogTruncation
				if err := next.failure(); !errors.As(err, &lt) || lt.DivergentOffset != 1 || lt.Position != 6 {
					t.Fatalf("the next member with auto.offset.reset=none: %v, want a LogTruncation from offset 1 at position 6", err)
				}
				if got := next.offsets(0); len(got) > 0 {
					t.Fatalf("it read %v", got)
				}
				return
			}
			eventually(t, "the next member to read to offset 7", func() bool {
				got := next.offsets(0)
				return len(got) > 0 && got[len(got)-1] == 7
			})
			if got, want := next.offsets(0), []int64{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(got, want) {
				t.Fatalf("the next member read offsets %v, want %v: from where the logs part", got, want)
			}
			next.halt()
			if err := next.gc.Close(testCtx(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			if off, epoch := fc.CommittedWithEpoch("g", "t", 0); off != 8 || epoch != 1 {
				t.Fatalf("committed offset %d at leader epoch %d, want 8 at 1", off, epoch)
			}
		})
	}
}

// A member whose user stopped calling Poll, caught by a rebalance that
// takes partitions from it, leaves the group once max.poll.interval.ms
// (the rebalance timeout) has passed: the other member gets everything in
// the rebalance the leave starts. Before, it joined the next generation
// anyway and left only a heartbeat later, two rebalances instead of one.
func TestGroupConsumerThatStoppedPollingLeavesInsteadOfRejoining(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 4)
	appendEach(fc, 4, 3)
	c := newClient(t, fc)
	o := groupOptions("g")
	o.Assignors = []assign.Assignor{assign.CooperativeSticky{}}
	m1 := startPolling(t, c, o)
	eventually(t, "the first member to own everything", func() bool { return len(m1.gc.Assignment()) == 4 })
	_, gen, _ := fc.GroupState("g")
	m1.halt() // its user stops calling Poll
	m2 := startPolling(t, c, o)
	eventually(t, "the second member to own everything", func() bool { return len(m2.gc.Assignment()) == 4 })
	state, final, members := fc.GroupState("g")
	// gen+1: both members, two partitions taken from the first; gen+2:
	// the first member left.
	if members != 1 || final != gen+2 || state != "Stable" {
		t.Fatalf("group %s at generation %d with %d members; want Stable at generation %d (one rebalance for the join, one for the leave) with 1",
			state, final, members, gen+2)
	}
	if n := fc.Calls("LeaveGroup"); n != 1 {
		t.Fatalf("%d LeaveGroup calls, want 1", n)
	}
}

// A member whose position moves back without records (a truncation under
// it on an idle partition, auto.offset.reset=earliest) commits the new
// position: the partition's next owner starts where the log now goes on.
// Before, only a member's first position was committed without records,
// and the commit stayed at the offset the log no longer has.
func TestGroupConsumerCommitsAPositionMovedWithoutRecords(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	for i := range 6 {
		fc.Append("t", 0, recordbatch.Record{Value: fmt.Appendf(nil, "a%d", i)})
	}
	c := newClient(t, fc)
	o := groupOptions("g")
	o.AutoOffsetReset = "earliest"
	m := startPolling(t, c, o)
	eventually(t, "the member to read a0..a5", func() bool { return len(m.offsets(0)) == 6 })
	eventually(t, "offset 6 committed", func() bool { off, _ := fc.CommittedWithEpoch("g", "t", 0); return off == 6 })
	fc.UncleanElection("t", 0, 1) // the new leader has a0 only; nothing is written after
	eventually(t, "the position moved back to 1 committed", func() bool {
		off, epoch := fc.CommittedWithEpoch("g", "t", 0)
		return off == 1 && epoch == 0
	})
	m.halt()
	if err := m.gc.Close(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// A commit of a negative offset, a negative partition or no topic is
// refused at once naming the partition, and nothing is sent: every offset
// a consumer reads back below 0 means "no commit", so a commit of -7 was
// accepted and erased the group's position, the next member starting over
// at auto.offset.reset (Kafka's client refuses such an offset too).
func TestGroupCommitOfANegativeOffsetIsRefused(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	gc, err := client.NewGroupConsumer(c, groupOptions("g"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gc.Abandon)
	for deadline := time.Now().Add(10 * time.Second); len(gc.Assignment()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no assignment within 10s")
		}
		if _, err := gc.Poll(testCtx(t, 100*time.Millisecond)); err != nil && codeOf(err) != kerr.RequestTimedOut {
			t.Logf("poll: %v", err)
		}
	}
	if err := gc.CommitSync(testCtx(t, 5*time.Second), map[client.TopicPartition]int64{{Topic: "t", Partition: 0}: 5}); err != nil {
		t.Fatalf("commit of 5: %v", err)
	}
	calls := fc.Calls("OffsetCommit")
	bad := []map[client.TopicPartition]int64{
		{{Topic: "t", Partition: 0}: -7},
		{{Topic: "t", Partition: 0}: 6, {Topic: "t", Partition: -1}: 3},
		{{Topic: "", Partition: 0}: 3},
	}
	for _, offsets := range bad {
		err := gc.CommitSync(testCtx(t, 5*time.Second), offsets)
		if codeOf(err) != kerr.InvalidRequest {
			t.Errorf("CommitSync(%v): %v (code %v), want INVALID_REQUEST", offsets, err, codeOf(err))
		}
		async := make(chan error, 1)
		gc.CommitAsync(offsets, func(_ map[client.TopicPartition]int64, err error) { async <- err })
		select {
		case err := <-async:
			if codeOf(err) != kerr.InvalidRequest {
				t.Errorf("CommitAsync(%v): %v (code %v), want INVALID_REQUEST", offsets, err, codeOf(err))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("CommitAsync(%v): no answer within 5s", offsets)
		}
	}
	if n := fc.Calls("OffsetCommit") - calls; n != 0 || fc.Committed("g", "t", 0) != 5 {
		t.Fatalf("after the refused commits: %d more OffsetCommit calls, committed %d; want none and 5", n, fc.Committed("g", "t", 0))
	}
}
