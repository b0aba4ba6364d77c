package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/kerr"
)

// faultsOn is broker id's fault-injection API.
func (c *Cluster) faultsOn(id int32) faultv1.FaultInjectionServiceClient {
	return faultv1.NewFaultInjectionServiceClient(c.Conn(c.Broker(id).Addr()))
}

// isolatedElection isolates topic's partition 0's leader with the fault
// API, from the other brokers too with peers, and waits for the controller
// to elect another leader. It returns the old leader, its leader epoch and
// the new leader.
func (c *Cluster) isolatedElection(topic string, peers bool) (old int32, oldEpoch int32, newLeader int32) {
	c.T.Helper()
	before := c.Partition(topic, 0)
	old, oldEpoch = before.GetLeader(), before.GetLeaderEpoch()
	ctx := context.Background()
	if _, err := c.faultsOn(old).Isolate(ctx, &faultv1.IsolateRequest{BrokerId: old, Peers: peers}); err != nil {
		c.T.Fatalf("isolate broker %d: %v", old, err)
	}
	lf, err := c.faultsOn(old).ListFaults(ctx, &faultv1.ListFaultsRequest{BrokerId: old})
	if err != nil || !lf.GetIsolated() || lf.GetIsolatedFromPeers() != peers {
		c.T.Fatalf("ListFaults on the isolated broker %d: %v, %v; want isolated, from its peers %v", old, lf, err, peers)
	}
	ttl := c.BrokerConfig(old).SessionTimeout
	c.WaitFor(10*ttl, "the controller to elect another leader once the isolated leader's lease expires", func() bool {
		p := c.Partition(topic, 0)
		if l := p.GetLeader(); l > 0 && l != old {
			newLeader = l
			if p.GetLeaderEpoch() <= oldEpoch {
				c.T.Fatalf("new leader %d has leader epoch %d, not above the isolated leader's %d", l, p.GetLeaderEpoch(), oldEpoch)
			}
			return true
		}
		return false
	})
	// The controller's requests are lost on their way to it, so it still
	// takes itself for the leader; the fence is what keeps it from acting
	// as one.
	c.WaitFor(5*time.Second, "the isolated broker to report itself fenced", func() bool { return c.Broker(old).Fenced() })
	return old, oldEpoch, newLeader
}

// wholeAgain waits for the partition to be whole after healing: a leader,
// every replica in the ISR, HW = LEO and identical logs on all, with the
// healed broker a follower. It returns the log.
func (c *Cluster) wholeAgain(topic string, healed, leader int32) []string {
	c.T.Helper()
	c.WaitFor(30*time.Second, fmt.Sprintf("broker %d back in the ISR", healed), func() bool {
		p := c.Partition(topic, 0)
		return p.GetLeader() > 0 && len(p.GetIsr()) == 3 && slices.Contains(p.GetIsr(), healed)
	})
	c.WaitFor(10*time.Second, "the healed broker to report itself unfenced", func() bool { return !c.Broker(healed).Fenced() })
	if l := c.Partition(topic, 0).GetLeader(); l != leader {
		c.T.Errorf("leader after healing is %d, want %d (the leader elected while %d was isolated)", l, leader, healed)
	}
	if c.Leads(healed, topic, 0) {
		c.T.Errorf("the healed broker %d still acts as leader", healed)
	}
	if _, err := c.Produce(context.Background(), topic, 0, -1, "after-heal"); err != nil {
		c.T.Fatalf("acks=all produce after healing: %v", err)
	}
	c.WaitHWAtLEO(topic, 0, 1, 2, 3)
	return c.SameLogs(topic, 0, 1, 2, 3)
}

// TestIsolatedLeaderStepsDownAndItsOrphansAreTruncated plays §7.3 ②③ of
// the learning note with the fault API alone (as `tidemark fault isolate`
// does): the leader of an RF=3 partition, cut off from the other brokers,
// takes acks=1 writes only it has; then it is isolated from etcd and the
// controllers while its clients still reach it. Its lease expires, the
// controller elects a new leader with a higher leader epoch, and the old
// one, fenced, acknowledges no acks=all write and refuses acks=1 ones.
// Once healed (`tidemark fault clear`) it registers again, follows the new
// leader, and truncates the orphan records away: every replica ends with
// the same log, which holds every acks=all write ever acknowledged.
func TestIsolatedLeaderStepsDownAndItsOrphansAreTruncated(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2, Adjust: func(cfg *broker.Config) { cfg.FaultInjection = true }})
	c.CreateTopic("iso", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("iso", 0).GetIsr()) == 3 })
	ctx := context.Background()
	var acked []string // acks=all writes acknowledged
	for i := range 5 {
		v := fmt.Sprintf("before-%d", i)
		if _, err := c.Produce(ctx, "iso", 0, -1, v); err != nil {
			t.Fatalf("acks=all produce while healthy: %v", err)
		}
		acked = append(acked, v)
	}
	old := c.Partition("iso", 0).GetLeader()
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != old {
			others = append(others, id)
		}
	}
	for _, o := range others {
		if _, err := c.faultsOn(old).CutLink(ctx, &faultv1.CutLinkRequest{BrokerId: old, ToBrokerId: o}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.faultsOn(o).CutLink(ctx, &faultv1.CutLinkRequest{BrokerId: o, ToBrokerId: old}); err != nil {
			t.Fatal(err)
		}
	}
	// The old leader still holds its lease: it takes acks=1 writes that
	// no follower can fetch.
	var orphans []string
	for i := range 3 {
		v := fmt.Sprintf("orphan-%d", i)
		if _, err := c.produceTo(old, "iso", 0, 1, v); err != nil {
			t.Fatalf("acks=1 produce to the leader cut off from its followers: %v", err)
		}
		orphans = append(orphans, v)
	}

	// While isolated, a client keeps sending acks=all writes to it.
	stop := make(chan struct{})
	type outcome struct {
		value string
		err   error
	}
	var whileIsolated []outcome
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("isolated-all-%d", i)
			_, err := c.produceTo(old, "iso", 0, -1, v)
			whileIsolated = append(whileIsolated, outcome{v, err})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	_, oldEpoch, newLeader := c.isolatedElection("iso", false)
	if _, err := c.produceTo(old, "iso", 0, 1, "late-acks1"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Errorf("acks=1 produce to the fenced old leader: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	close(stop)
	wg.Wait()
	for _, o := range whileIsolated {
		if o.err == nil {
			t.Errorf("acks=all write %s acknowledged by the isolated leader, whose followers could not fetch it", o.value)
		}
	}
	if held := c.Values(old, "iso", 0); !slices.Contains(held, orphans[0]) {
		t.Fatalf("the isolated leader's log %v lacks the acks=1 records it acknowledged", held)
	}
	if nl := c.Values(newLeader, "iso", 0); slices.Contains(nl, orphans[0]) {
		t.Fatalf("the new leader %d holds %s, which its link to the old leader was cut for", newLeader, orphans[0])
	}
	t.Logf("broker %d isolated at leader epoch %d; broker %d elected at epoch %d; %d acks=all writes sent to the isolated leader, none acknowledged",
		old, oldEpoch, newLeader, c.Partition("iso", 0).GetLeaderEpoch(), len(whileIsolated))

	// Heal everything as `tidemark fault clear` does.
	for id := int32(1); id <= 3; id++ {
		if _, err := c.faultsOn(id).ClearFaults(ctx, &faultv1.ClearFaultsRequest{BrokerId: id}); err != nil {
			t.Fatalf("clear faults on broker %d: %v", id, err)
		}
	}
	if lf, err := c.faultsOn(old).ListFaults(ctx, &faultv1.ListFaultsRequest{BrokerId: old}); err != nil || lf.GetIsolated() || len(lf.GetLinks()) > 0 {
		t.Fatalf("ListFaults after ClearFaults: %v, %v; want nothing", lf, err)
	}
	final := c.wholeAgain("iso", old, newLeader)
	for _, v := range orphans {
		if slices.Contains(final, v) {
			t.Errorf("orphan %s, written by the old leader alone, survived its rejoining: %v", v, final)
		}
	}
	for _, v := range acked {
		if !slices.Contains(final, v) {
			t.Errorf("acknowledged acks=all write %s lost: %v", v, final)
		}
	}
}

// TestIsolatedIdleLeaderRejoins isolates the leader of an idle partition
// (no write at all) from etcd and the controllers, its links to the other
// brokers up: another is elected with a higher leader epoch, and once the
// isolation heals (`tidemark fault heal-isolation`) the old leader follows
// and the partition is whole.
func TestIsolatedIdleLeaderRejoins(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2, Adjust: func(cfg *broker.Config) { cfg.FaultInjection = true }})
	c.CreateTopic("idle", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("idle", 0).GetIsr()) == 3 })
	old, _, newLeader := c.isolatedElection("idle", false)
	if _, err := c.faultsOn(old).HealIsolation(context.Background(), &faultv1.HealIsolationRequest{BrokerId: old}); err != nil {
		t.Fatalf("heal the isolation of broker %d: %v", old, err)
	}
	if final := c.wholeAgain("idle", old, newLeader); !slices.Equal(final, []string{"after-heal"}) {
		t.Errorf("log after healing: %v, want the one write made since", final)
	}
}

// TestPartitionedLeaderStepsDownAndItsOrphansAreTruncated plays §7.3 ③ of
// the learning note as one fault on the leader alone (`tidemark fault
// isolate --peers`): a network partition that leaves it only its clients.
// Until its lease lapses it takes acks=1 writes no follower can fetch; the
// other brokers' requests to it go unanswered; the controller elects a new
// leader with a higher epoch and the old one refuses writes. Healed
// (`tidemark fault heal-isolation`, its links with it), it truncates its
// orphans away and the partition is whole, and stays whole over an idle
// gap longer than replica.lag.time.max.ms with nothing produced.
func TestPartitionedLeaderStepsDownAndItsOrphansAreTruncated(t *testing.T) {
	const lagMax = 2 * time.Second
	c := Start(t, Options{Brokers: 3, Controllers: 2, Adjust: func(cfg *broker.Config) { cfg.FaultInjection = true },
		BrokerSettings: map[string]string{"replica.lag.time.max.ms": strconv.Itoa(int(lagMax / time.Millisecond))}})
	c.CreateTopic("part", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("part", 0).GetIsr()) == 3 })
	ctx := context.Background()
	var acked []string
	for i := range 5 {
		v := fmt.Sprintf("before-%d", i)
		if _, err := c.Produce(ctx, "part", 0, -1, v); err != nil {
			t.Fatalf("acks=all produce while healthy: %v", err)
		}
		acked = append(acked, v)
	}
	c.WaitHWAtLEO("part", 0, 1, 2, 3)
	before := c.Partition("part", 0)
	old := before.GetLeader()
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != old {
			others = append(others, id)
		}
	}
	if _, err := c.faultsOn(old).Isolate(ctx, &faultv1.IsolateRequest{BrokerId: old, Peers: true}); err != nil {
		t.Fatalf("isolate broker %d with its peers: %v", old, err)
	}
	// Its lease still holds: it takes acks=1 writes, which no follower can
	// fetch.
	var orphans []string
	for i := range 3 {
		v := fmt.Sprintf("orphan-%d", i)
		if _, err := c.produceTo(old, "part", 0, 1, v); err != nil {
			t.Fatalf("acks=1 produce to the partitioned leader before its lease lapsed: %v", err)
		}
		orphans = append(orphans, v)
	}
	// The other brokers' requests reach it only once healed.
	lookup := &replicationv1.OffsetForLeaderEpochRequest{ReplicaId: others[0], Partitions: []*replicationv1.OffsetForLeaderEpochPartition{
		{Topic: "part", Partition: 0, CurrentLeaderEpoch: before.GetLeaderEpoch(), LeaderEpoch: before.GetLeaderEpoch()}}}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	resp, err := replicationv1.NewReplicationServiceClient(c.Conn(c.Broker(old).Addr())).OffsetForLeaderEpoch(lctx, lookup)
	cancel()
	if err == nil {
		t.Errorf("a leader epoch lookup from broker %d reached the partitioned broker %d: %v", others[0], old, resp)
	}

	ttl := c.BrokerConfig(old).SessionTimeout
	var newLeader int32
	c.WaitFor(10*ttl, "the controller to elect another leader once the partitioned leader's lease expires", func() bool {
		p := c.Partition("part", 0)
		newLeader = p.GetLeader()
		return newLeader > 0 && newLeader != old && p.GetLeaderEpoch() > before.GetLeaderEpoch()
	})
	c.WaitFor(5*time.Second, "the partitioned broker to report itself fenced", func() bool { return c.Broker(old).Fenced() })
	if _, err := c.produceTo(old, "part", 0, 1, "late-acks1"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Errorf("acks=1 produce to the fenced old leader: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if held := c.Values(old, "part", 0); !slices.Contains(held, orphans[0]) {
		t.Fatalf("the partitioned leader's log %v lacks the acks=1 records it acknowledged", held)
	}
	for _, o := range others {
		if held := c.Values(o, "part", 0); slices.Contains(held, orphans[0]) {
			t.Fatalf("broker %d holds %s, which the partitioned leader alone took", o, orphans[0])
		}
	}
	// The controller's choice is known before the new leader has applied it.
	c.WaitFor(10*time.Second, "the new leader to lead", func() bool { return c.Leads(newLeader, "part", 0) })
	if _, err := c.Produce(ctx, "part", 0, -1, "during"); err != nil {
		t.Fatalf("acks=all produce to the new leader %d: %v", newLeader, err)
	}
	acked = append(acked, "during")

	if _, err := c.faultsOn(old).HealIsolation(ctx, &faultv1.HealIsolationRequest{BrokerId: old}); err != nil {
		t.Fatalf("heal the isolation of broker %d: %v", old, err)
	}
	if lf, err := c.faultsOn(old).ListFaults(ctx, &faultv1.ListFaultsRequest{BrokerId: old}); err != nil || lf.GetIsolated() || lf.GetIsolatedFromPeers() {
		t.Fatalf("ListFaults after HealIsolation: %v, %v; want nothing", lf, err)
	}
	final := c.wholeAgain("part", old, newLeader)
	for _, v := range orphans {
		if slices.Contains(final, v) {
			t.Errorf("orphan %s, written by the partitioned leader alone, survived its rejoining: %v", v, final)
		}
	}
	for _, v := range acked {
		if !slices.Contains(final, v) {
			t.Errorf("acknowledged acks=all write %s lost: %v", v, final)
		}
	}

	// Idle: nothing produced for longer than replica.lag.time.max.ms. A
	// follower whose fetching the heal left stuck would leave the ISR.
	time.Sleep(lagMax + lagMax/2)
	if p := c.Partition("part", 0); p.GetLeader() != newLeader || len(p.GetIsr()) != 3 {
		t.Fatalf("after an idle gap: leader %d ISR %v, want leader %d and the full ISR", p.GetLeader(), p.GetIsr(), newLeader)
	}
	if _, err := c.Produce(ctx, "part", 0, -1, "after-idle"); err != nil {
		t.Fatalf("acks=all produce after an idle gap: %v", err)
	}
	c.WaitHWAtLEO("part", 0, 1, 2, 3)
	if final := c.SameLogs("part", 0, 1, 2, 3); !slices.Contains(final, "after-idle") {
		t.Errorf("log after the idle gap lacks the write made since: %v", final)
	}
}

// TestPartitionedIdleLeaderRejoins cuts the leader of an idle partition
// off from everything but its clients while its followers' fetches are
// parked on it: they are neither answered nor served, the followers elect
// past it, and once healed the old leader follows and the partition is
// whole.
func TestPartitionedIdleLeaderRejoins(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2, Adjust: func(cfg *broker.Config) { cfg.FaultInjection = true }})
	c.CreateTopic("quiet", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("quiet", 0).GetIsr()) == 3 })
	old, _, newLeader := c.isolatedElection("quiet", true)
	if _, err := c.faultsOn(old).ClearFaults(context.Background(), &faultv1.ClearFaultsRequest{BrokerId: old}); err != nil {
		t.Fatalf("clear the faults of broker %d: %v", old, err)
	}
	if final := c.wholeAgain("quiet", old, newLeader); !slices.Equal(final, []string{"after-heal"}) {
		t.Errorf("log after healing: %v, want the one write made since", final)
	}
}
