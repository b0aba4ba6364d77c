package clustertest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// A broker that heard no keepalive answer for longer than its session
// timeout, while etcd kept its lease alive (the requests got through, the
// answers did not: a one-way stall; or an etcd restart, which gives every
// lease a whole TTL again), keeps that registration: fenced while the lease
// is unconfirmed, it acts as leader again, under the same broker epoch, as
// soon as etcd answers a keepalive. Giving the registration up instead made
// it revoke the lease and register anew, and the controller treat that as a
// bounce: the broker's leaderships moved and its ISRs shrank and regrew.
func TestBrokerKeepsTheRegistrationItsLeaseOutlived(t *testing.T) {
	const ttl = 4 * time.Second
	c := Start(t, Options{Brokers: 3, Adjust: func(cfg *broker.Config) { cfg.SessionTimeout = ttl }})
	const id = 3
	c.CreateTopic("kept", 3, 3, nil)
	p := int32(-1) // a partition broker id leads
	for q := int32(0); q < 3; q++ {
		if c.Partition("kept", q).GetLeader() == id {
			p = q
		}
	}
	if p < 0 {
		t.Fatalf("broker %d leads no partition of kept", id)
	}
	led := c.Partition("kept", p)
	cli := c.Etcd.Client(t)
	key := metastore.DefaultPrefix + "/brokers/ids/" + metastore.BrokerEntity(id)
	held := func() (lease clientv3.LeaseID, epoch int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return 0, 0
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease), resp.Kvs[0].CreateRevision
	}
	oldLease, oldEpoch := held()
	if oldLease == 0 {
		t.Fatalf("broker %d is not registered", id)
	}

	// The broker's link to etcd stalls; etcd still hears the lease renewed
	// (here by the test, as by the broker's own requests getting through).
	c.EtcdLink(id).Pause()
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		tick := time.NewTicker(ttl / 8)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := cli.KeepAliveOnce(ctx, oldLease)
			cancel()
			if err != nil {
				t.Errorf("renewing the broker's lease at etcd: %v", err)
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// Past the broker's own deadline (the TTL after its last answered
	// keepalive): it cannot tell whether the lease lived, so it is fenced.
	time.Sleep(ttl + ttl/3 + ttl/4)
	if !c.Broker(id).Fenced() {
		t.Fatalf("broker %d unheard by etcd for over its TTL still acts as leader", id)
	}
	if _, err := c.Produce(context.Background(), "kept", p, 1, "fenced"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("acks=1 write to the fenced leader: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if l, _ := held(); l != oldLease {
		t.Fatalf("the registration's key is not held by its lease any more (lease %x): the test did not keep it alive", l)
	}
	close(stop)
	<-renewed
	resumed := time.Now()
	c.EtcdLink(id).Resume()

	c.WaitFor(ttl, "the broker acting as leader again", func() bool { return !c.Broker(id).Fenced() })
	if took := time.Since(resumed); took > ttl/3 {
		t.Errorf("acting as leader again %v after etcd was reachable, want about a keepalive's round trip", took)
	}
	if l, e := held(); l != oldLease || e != oldEpoch {
		t.Fatalf("registration after the stall: lease %x epoch %d, want the same lease %x and epoch %d", l, e, oldLease, oldEpoch)
	}
	// Nothing moved: the controller never saw the broker leave.
	now := c.Partition("kept", p)
	if now.GetLeader() != led.GetLeader() || now.GetLeaderEpoch() != led.GetLeaderEpoch() || len(now.GetIsr()) != 3 {
		t.Fatalf("partition after the stall: leader %d epoch %d isr %v, want leader %d epoch %d and the whole ISR",
			now.GetLeader(), now.GetLeaderEpoch(), now.GetIsr(), led.GetLeader(), led.GetLeaderEpoch())
	}
	if _, err := c.Produce(context.Background(), "kept", p, -1, "after"); err != nil {
		t.Fatalf("acks=all write after the stall: %v", err)
	}
}

// A leader cut off from etcd for longer than its lease, whose partitions are
// all moved off it while it is away, registers again still holding those
// leaderships in its own view. The controller has nothing to place on it,
// so no LeaderAndIsr comes to tell it its roles; its full UpdateMetadata
// deletes the old replicas as strays, and the broker, leading nothing any
// more, must stop fencing itself: clients bootstrap through it again.
func TestBrokerWhosePartitionsMovedAwayWhileItWasOutIsNotLeftFenced(t *testing.T) {
	c := Start(t, Options{Brokers: 4})
	CreateAssigned(t, c, "left", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	acked := ProduceAcked(t, c, "left", 10)
	c.SameLogs("left", 0, 1, 2, 3)
	c.EtcdLink(1).Pause()
	c.WaitFor(15*time.Second, "broker 1's partition led by another", func() bool {
		l := c.Partition("left", 0).GetLeader()
		return l > 0 && l != 1
	})
	Reassign(t, c, "left", map[int32][]int32{0: {2, 3, 4}})
	c.WaitFor(20*time.Second, "left-0 on 2,3,4", func() bool { return SettledOn(c, "left", 0, []int32{2, 3, 4}) })
	if !c.Broker(1).Fenced() {
		t.Fatal("broker 1, unheard by etcd for over its lease, is not fenced")
	}
	c.EtcdLink(1).Resume()
	Gone(t, c, 1, "left", 0)
	c.WaitFor(10*time.Second, "broker 1 no longer fenced", func() bool { return !c.Broker(1).Fenced() })
	if _, err := c.BrokerClient(1).Metadata(context.Background(), &brokerv1.MetadataRequest{Topics: []string{"left"}}); err != nil {
		t.Fatalf("metadata through broker 1: %v", err)
	}
	CheckWholeAndLive(t, c, "left", 0, []int32{2, 3, 4}, acked)
}
