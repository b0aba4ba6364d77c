package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// A broker in controlled shutdown that cannot give up every leadership
// retries for seconds, following meanwhile the partitions it did give up.
// The new leader must not propose it back into the ISR on its fetches:
// the controller would refuse each proposal (INELIGIBLE_REPLICA, KIP-841),
// and each one would block a shrink while in flight.
func TestShuttingDownBrokerIsNotProposedIntoISR(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	ctx := context.Background()
	for name, replicas := range map[string][]int32{"moved": {1, 2}, "stuck": {1, 3}} {
		resp, err := c.Admin().CreateTopics(ctx, &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{{Name: name,
			Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: replicas}}}}})
		if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
			t.Fatalf("create %s: %v %v", name, resp, err)
		}
	}
	c.WaitFor(10*time.Second, "broker 1 leading both topics with full ISRs", func() bool {
		m, s := c.Partition("moved", 0), c.Partition("stuck", 0)
		return c.Leads(1, "moved", 0) && c.Leads(1, "stuck", 0) && len(m.GetIsr()) == 2 && len(s.GetIsr()) == 2
	})
	// Records in leader epoch 0, so that broker 1, once a follower, fetches
	// from broker 2 from where both logs agree.
	for i := 0; i < 3; i++ {
		if _, err := c.Produce(ctx, "moved", 0, -1, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	// stuck-0 can only stay on broker 1 once broker 3 is gone.
	c.CrashBroker(3)
	c.WaitFor(10*time.Second, "broker 3 out of stuck-0's ISR", func() bool {
		return fmt.Sprint(c.Partition("stuck", 0).GetIsr()) == "[1]"
	})

	watch, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Admin().WatchCluster(watch, &adminv1.WatchClusterRequest{Topics: []string{"moved"}, IntervalMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var proposals []string
	seen := make(chan struct{})
	go func() {
		defer close(seen)
		for {
			msg, err := stream.Recv()
			if err != nil {
				return
			}
			for _, ev := range msg.GetEvents() {
				if ev.GetKind() == controlv1.EventKind_EVENT_KIND_ISR_EXPAND && ev.GetTopic() == "moved" && slices.Contains(ev.GetIsr(), 1) {
					mu.Lock()
					proposals = append(proposals, fmt.Sprintf("%s (leader epoch %d)", ev.GetReason(), ev.GetLeaderEpoch()))
					mu.Unlock()
				}
			}
		}
	}()

	start := time.Now()
	if err := c.StopBroker(1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("broker 1 stopped after %s: the shutdown did not retry for stuck-0, so this test shows nothing", d)
	}
	if pd := c.Partition("moved", 0); pd.GetLeader() != 2 {
		t.Fatalf("moved-0 is led by %d, want 2", pd.GetLeader())
	}
	// Events travel on broker 2's session; give the last ones time to land.
	time.Sleep(time.Second)
	cancel()
	<-seen
	mu.Lock()
	defer mu.Unlock()
	if len(proposals) > 0 {
		t.Fatalf("broker 2 proposed the shutting-down broker 1 into moved-0's ISR %d times: %v", len(proposals), proposals)
	}
}

// A graceful stop while another broker is frozen (its links stall open, as
// under SIGSTOP): the frozen follower's fetch stream to the stopping broker
// never ends by itself, and the stop used to wait for it until its
// deadline (30 s here), after which the broker's deregistration found no
// time left and failed. The stop must finish well within its deadline and
// deregister the broker.
func TestGracefulStopIsNotHeldByAFrozenPeer(t *testing.T) {
	c := Start(t, Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	CreateAssigned(t, c, "held", [][]int32{{2, 3, 1}, {1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	produceN(t, c, "held", 10)
	c.Net.Pause(BrokerName(3))
	defer c.Net.Resume(BrokerName(3))
	// Broker 3's fetch to leader 2 is parked or in flight when it freezes.
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	err := c.StopBroker(2)
	took := time.Since(start)
	t.Logf("graceful stop of broker 2 with broker 3 frozen: %v, %v", took, err)
	if err != nil {
		t.Fatalf("graceful stop of broker 2 with broker 3 frozen: %v", err)
	}
	if took > 15*time.Second {
		t.Fatalf("graceful stop of broker 2 with broker 3 frozen took %v of its 30s deadline: it waited for the frozen peer", took)
	}
}

// A rack-aware reader following a partition from a follower (KIP-392)
// keeps its stream after the controlled shutdown moved everything else:
// its parked fetch (up to 5 s) held the broker's graceful stop. The stream
// must end by the time the stop drains, with a retriable answer that sends
// the reader on to another replica: NOT_LEADER_OR_FOLLOWER naming the
// leader when the controlled shutdown's StopReplica ended it, else
// REPLICA_NOT_AVAILABLE from the drain.
func TestGracefulStopEndsAFollowersReaders(t *testing.T) {
	c := Start(t, Options{Racks: []string{"a", "b", "c"}})
	CreateAssigned(t, c, "read", [][]int32{{1, 2, 3}}, nil)
	produceN(t, c, "read", 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.BrokerClient(3).Follow(ctx, &brokerv1.FollowRequest{Topic: "read", Partition: 0, MaxBytes: 1 << 20, RackId: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("following read-0 on its follower 3 (rack c): %v", err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // its next fetch is parked
	start := time.Now()
	if err := c.StopBroker(3); err != nil {
		t.Fatalf("graceful stop of broker 3: %v", err)
	}
	took := time.Since(start)
	err = <-ended
	t.Logf("graceful stop of broker 3 with a reader following from it: %v; the stream ended with %v", took, err)
	switch e := kerr.FromStatus(err); {
	case e.Code == kerr.NotLeaderOrFollower && e.Leader != nil && e.Leader.ID != 3:
	case e.Code == kerr.ReplicaNotAvailable:
	default:
		t.Fatalf("the follow stream ended with %v, want NOT_LEADER_OR_FOLLOWER naming another leader, or REPLICA_NOT_AVAILABLE: the broker is shutting down", err)
	}
	if took > 3*time.Second {
		t.Fatalf("graceful stop of broker 3 took %v: the reader's parked fetch held it", took)
	}
}

// A consumer's fetch parked on an idle partition the stopping broker still
// leads (its only replica: the controlled shutdown cannot move it) held the
// graceful stop until the stop's deadline, as its max wait (60 s here) was
// longer: the stop then closed it as a broken call. It must end as the
// stop drains, with a retriable answer, and the stop must finish in time.
func TestGracefulStopEndsAParkedFetch(t *testing.T) {
	c := Start(t, Options{})
	CreateAssigned(t, c, "idle", [][]int32{{3}}, nil)
	produceN(t, c, "idle", 1)
	ended := make(chan error, 1)
	go func() {
		_, err := c.BrokerClient(3).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "idle", Partition: 0, Offset: 1,
			MaxBytes: 1 << 20, MinBytes: 1, MaxWaitMs: 60000})
		ended <- err
	}()
	time.Sleep(500 * time.Millisecond) // parked: nothing arrives
	select {
	case err := <-ended:
		t.Fatalf("the fetch was answered before the stop: %v", err)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.StopBrokerWithin(ctx, 3); err != nil {
		t.Fatalf("graceful stop of broker 3: %v", err)
	}
	var err error
	select {
	case err = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the parked fetch was not answered after the stop")
	}
	if e := kerr.FromStatus(err); e.Code != kerr.ReplicaNotAvailable || !e.Code.Retriable() {
		t.Fatalf("the parked fetch ended with %v, want REPLICA_NOT_AVAILABLE (retriable): the broker is shutting down", err)
	}
}
