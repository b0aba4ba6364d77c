package clustertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/kerr"
)

// leaderEpochOn is the leader epoch broker id's replica of topic-p is at.
func (c *Cluster) leaderEpochOn(id int32, topic string, p int32) int32 {
	b := c.Broker(id)
	if b == nil {
		return -1
	}
	for _, r := range b.Replicas().Replicas() {
		if r.TP().Topic == topic && r.TP().Partition == p {
			return r.Snapshot(time.Now()).LeaderEpoch
		}
	}
	return -1
}

// A follower removed from the ISR by the controller (here: it crashed)
// makes the controller bump the leader epoch while the leader stays. An
// acks=all produce parked at that moment must be answered once the HW
// passes it, not with NOT_LEADER_OR_FOLLOWER naming the same leader, which
// made a producer without idempotence write the record twice.
func TestParkedProduceSurvivesISRRemovalByController(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Adjust: func(cfg *broker.Config) { cfg.FaultInjection = true }})
	c.CreateTopic("park", 1, 3, nil)
	c.WaitFor(10*time.Second, "a leader with the full ISR", func() bool {
		pd := c.Partition("park", 0)
		return pd.GetLeader() > 0 && len(pd.GetIsr()) == 3
	})
	pd := c.Partition("park", 0)
	leader, epoch := pd.GetLeader(), pd.GetLeaderEpoch()
	var followers []int32
	for _, id := range []int32{1, 2, 3} {
		if id != leader {
			followers = append(followers, id)
		}
	}
	stay, crash := followers[0], followers[1]
	ctx := context.Background()
	for _, id := range followers {
		fc := faultv1.NewFaultInjectionServiceClient(c.Conn(c.Broker(id).Addr()))
		if _, err := fc.SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{Fault: &faultv1.FetchFault{Topic: "park", Partition: -1, Stall: true}}); err != nil {
			t.Fatal(err)
		}
	}

	type outcome struct {
		off int64
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		off, err := c.Produce(ctx, "park", 0, -1, "v")
		done <- outcome{off, err}
	}()
	c.WaitFor(5*time.Second, "the record in the leader's log", func() bool { return len(c.Values(leader, "park", 0)) == 1 })

	c.CrashBroker(crash)
	c.WaitFor(10*time.Second, "the leader to apply the controller's smaller ISR in a new leader epoch", func() bool {
		return c.leaderEpochOn(leader, "park", 0) > epoch
	})
	if pd := c.Partition("park", 0); pd.GetLeader() != leader || slices.Contains(pd.GetIsr(), crash) {
		t.Fatalf("controller state %v: want leader %d, ISR without %d", pd, leader, crash)
	}
	select {
	case o := <-done:
		t.Fatalf("the produce was answered before the HW could pass it: offset %d, %v", o.off, o.err)
	default:
	}

	fc := faultv1.NewFaultInjectionServiceClient(c.Conn(c.Broker(stay).Addr()))
	if _, err := fc.ClearFaults(ctx, &faultv1.ClearFaultsRequest{}); err != nil {
		t.Fatal(err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the produce was not answered")
	}
	if o.err != nil || o.off != 0 {
		t.Fatalf("parked produce across the ISR removal: offset %d, %v", o.off, o.err)
	}
	if got := c.SameLogs("park", 0, leader, stay); fmt.Sprint(got) != "[v]" {
		t.Fatalf("logs %v, want the record once", got)
	}
}

// An acks=all write to an idle partition whose followers stop fetching
// (cut off from the leader, alive to the controller, so only the leader's
// own ISR expiration removes them). With one follower gone the write must
// complete once the leader shrinks the ISR, which still meets
// min.insync.replicas; with both gone it must fail as Kafka's does
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, or
// NOT_ENOUGH_REPLICAS if the shrink came first), never succeed. Once the
// links heal the ISR is full again and the replicas identical.
func TestParkedProduceOnIdlePartitionAcrossLeaderISRShrinks(t *testing.T) {
	c := Start(t, Options{Brokers: 3, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	CreateAssigned(t, c, "shrink", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	produceN(t, c, "shrink", 1)
	c.WaitHWAtLEO("shrink", 0, 1, 2, 3)
	time.Sleep(time.Second) // idle

	c.Net.Partition(BrokerName(3), BrokerName(1))
	if off, err := c.Produce(context.Background(), "shrink", 0, -1, "one-gone"); err != nil || off != 1 {
		t.Fatalf("acks=all with follower 3 cut off: offset %d, %v; want 1 once the ISR shrinks to [1 2]", off, err)
	}
	c.Net.Partition(BrokerName(2), BrokerName(1))
	_, err := c.Produce(context.Background(), "shrink", 0, -1, "both-gone")
	t.Logf("acks=all with both followers cut off: %v", err)
	switch kerr.CodeOf(err) {
	case kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut, kerr.NotEnoughReplicas:
	default:
		t.Fatalf("acks=all with both followers cut off: %v; want NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS", err)
	}

	c.Net.HealAll()
	c.WaitFor(30*time.Second, "the full ISR again", func() bool { return len(c.Partition("shrink", 0).GetIsr()) == 3 })
	if _, err := c.Produce(context.Background(), "shrink", 0, -1, "healed"); err != nil {
		t.Fatalf("acks=all after the links healed: %v", err)
	}
	c.WaitHWAtLEO("shrink", 0, 1, 2, 3)
	if got := c.SameLogs("shrink", 0, 1, 2, 3); !slices.Contains(got, "one-gone") || got[len(got)-1] != "healed" {
		t.Fatalf("logs %v: want the acknowledged writes", got)
	}
}
