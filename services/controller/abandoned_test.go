package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// TestASessionBrokenBeforeItOpensLeavesNoSession: a broker's session stream
// that breaks while its opening still waits behind a busy controller loop
// must not leave a session open that nobody will close. Such a session
// cancels the fast-failover check of the broker's earlier, broken stream
// ("reopened its session"), so a broker that died meanwhile would keep its
// partitions until its lease expired.
func TestASessionBrokenBeforeItOpensLeavesNoSession(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "t", [][]int32{{1, 2, 3}}, nil)
	eventually(t, 10*time.Second, "sessions open", func() bool {
		return c.brokers[1].sessionOpen() && c.brokers[2].sessionOpen() && c.brokers[3].sessionOpen()
	})
	b := c.brokers[1]
	epoch := b.brokerEpoch()
	control := c.control(c1)

	a := c1.office.current()
	release, ok := a.StallForTest()
	if !ok {
		t.Fatal("the term ended")
	}
	defer release()
	b.kill() // the process dies: its stream's close queues behind the stall

	// A stream of the same incarnation (opened as the process died) whose
	// opening waits on the loop, then breaks.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := control.BrokerSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&controlv1.BrokerSessionRequest{BrokerId: 1, BrokerEpoch: epoch}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the session's opening queued on the loop", func() bool { return a.QueuedCallsForTest() == 1 })
	cancel()
	eventually(t, 5*time.Second, "the broken stream's handler gone", func() bool { return a.QueuedCallsForTest() == 0 })
	killed := time.Now()
	release()

	c.waitState("t", 0, 3*brokerTTL, "new leader", func(s metastore.PartitionState) bool { return s.Leader != 1 && s.Leader > 0 })
	t.Logf("dead leader replaced %s after the loop resumed", time.Since(killed))
	if c.logs.count("declaring it dead now", "broker_id=1") == 0 {
		t.Fatal("the dead broker was left to its lease: a session opened for a broken stream cancelled its fast failover")
	}
	resp, err := c.admin(c1).DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, br := range resp.GetBrokers() {
		if br.GetNode().GetId() == 1 && br.GetAlive() {
			t.Fatal("broker 1 still counted alive")
		}
	}
}

// TestAWatchBrokenBeforeItStartsLeavesNoWatcher: a WatchCluster stream that
// ends while its subscription still waits behind a busy loop leaves no
// subscriber behind for the loop to wake for ever.
func TestAWatchBrokenBeforeItStartsLeavesNoWatcher(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	a := c1.office.current()
	admin := c.admin(c1)
	release, ok := a.StallForTest()
	if !ok {
		t.Fatal("the term ended")
	}
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := admin.WatchCluster(ctx, &adminv1.WatchClusterRequest{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the watch's subscription queued on the loop", func() bool { return a.QueuedCallsForTest() == 1 })
	cancel()
	eventually(t, 5*time.Second, "the ended watch's handler gone", func() bool { return a.QueuedCallsForTest() == 0 })
	release()
	if n := a.WatchersForTest(); n != 0 {
		t.Fatalf("%d watchers left after the only watch ended", n)
	}
}

// TestAnAlterPartitionItsSenderGaveUpOnStillCommitsOnce: the leader's
// AlterPartition whose call ends while the request waits behind a busy
// loop is still decided by the loop (as Kafka's controller handles a
// request whose client timed out); the caller's answer is only the error,
// and the leader's retry finds the change made and writes nothing more.
func TestAnAlterPartitionItsSenderGaveUpOnStillCommitsOnce(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "a", [][]int32{{1, 2, 3}}, nil)
	// Every session open before the stall: one still opening would queue
	// behind it beside the AlterPartition.
	eventually(t, 10*time.Second, "sessions open", func() bool {
		return c.brokers[1].sessionOpen() && c.brokers[2].sessionOpen() && c.brokers[3].sessionOpen()
	})
	control := c.control(c1)
	e1, e2 := c.brokers[1].brokerEpoch(), c.brokers[2].brokerEpoch()
	shrink := &controlv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: e1, Partitions: []*controlv1.AlterPartitionItem{{
		Topic: "a", Partition: 0, LeaderEpoch: 0, PartitionEpoch: 0,
		NewIsr: []*controlv1.IsrMember{{BrokerId: 1, BrokerEpoch: e1}, {BrokerId: 2, BrokerEpoch: e2}}}}}

	a := c1.office.current()
	release, ok := a.StallForTest()
	if !ok {
		t.Fatal("the term ended")
	}
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		resp, err := control.AlterPartition(ctx, shrink)
		if err == nil {
			err = fmt.Errorf("answered %v while the loop was stalled", resp)
		}
		gaveUp <- err
	}()
	eventually(t, 5*time.Second, "the request queued on the loop", func() bool { return a.QueuedCallsForTest() == 1 })
	cancel()
	if err := <-gaveUp; status.Code(err) != codes.Canceled {
		t.Fatalf("the abandoned call answered %v, want Canceled", err)
	}
	eventually(t, 5*time.Second, "the handler gone", func() bool { return a.QueuedCallsForTest() == 0 })
	release()

	c.waitState("a", 0, 5*time.Second, "the shrink committed", func(s metastore.PartitionState) bool {
		return slices.Equal(s.ISR, []int32{1, 2}) && s.PartitionEpoch == 1
	})
	resp, err := control.AlterPartition(context.Background(), shrink)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetPartitions()[0]
	wantCode(t, r.GetErrorCode(), kerr.None, "the leader's retry")
	if r.GetPartitionEpoch() != 1 || !slices.Equal(r.GetIsr(), []int32{1, 2}) {
		t.Fatalf("retry answered %v, want the committed ISR [1 2] at partition epoch 1", r)
	}
}
