package clustertest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// A preferred election asked for just as the leader is cut off from etcd
// and both controllers (its followers and the client still reach it). The
// leader cannot hear of an election, so the controller must not elect
// another leader while it may still take writes: it asks the leader to
// yield first, and a leader that does not answer keeps the partition until
// its lease fence and the failure path take it. Before, the election was
// written at once and the old leader acknowledged acks=1 writes beside the
// new one until its fence went up (DESIGN.md, "Voluntary moves").
func TestPreferredElectionWaitsForTheLeaderToYield(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2})
	preferred, old := topicLedOffItsPreferredReplica(c, "moving")
	ttl := c.BrokerConfig(old).SessionTimeout

	stop := make(chan struct{})
	var acks []produced
	var wg sync.WaitGroup
	var lp loopProgress
	wg.Add(1)
	go func() { defer wg.Done(); acks = produceLoop(c, old, "moving", "r", stop, 5000, &lp) }()
	lp.waitFor(c, 10, true, "writes acknowledged while healthy")

	isolated := time.Now()
	c.EtcdLink(old).Pause()
	for ctl := int32(1); ctl <= 2; ctl++ {
		c.Net.Partition(BrokerName(old), ControllerName(ctl))
	}
	type electOutcome struct {
		resp *adminv1.ElectLeadersResponse
		err  error
		took time.Duration
	}
	answered := make(chan electOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := c.Admin().ElectLeaders(ctx, &adminv1.ElectLeadersRequest{
			ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
			Partitions:   []*commonv1.TopicPartition{{Topic: "moving", Partition: 0}}})
		answered <- electOutcome{resp, err, time.Since(isolated)}
	}()
	var elected time.Time
	var newLeader int32
	c.WaitFor(4*ttl+10*time.Second, "another leader elected", func() bool {
		if l := c.Partition("moving", 0).GetLeader(); l > 0 && l != old {
			elected, newLeader = time.Now(), l
			return true
		}
		return false
	})
	ans := <-answered
	if ans.err != nil {
		t.Fatalf("ElectLeaders: %v", ans.err)
	}
	res := ans.resp.GetResults()[0]
	switch kerr.Code(res.GetErrorCode()) {
	case kerr.RequestTimedOut, kerr.BrokerNotAvailable:
	default:
		t.Errorf("preferred election of a partition whose leader is cut off answered %v (%s) after %s; want REQUEST_TIMED_OUT or BROKER_NOT_AVAILABLE: the leader did not yield",
			kerr.Code(res.GetErrorCode()), res.GetErrorMessage(), ans.took.Round(time.Millisecond))
	}
	t.Logf("ElectLeaders answered after %s: %v %q", ans.took.Round(time.Millisecond), kerr.Code(res.GetErrorCode()), res.GetErrorMessage())
	lp.waitFor(c, 20, false, "more writes sent to the old leader after the election")
	close(stop)
	wg.Wait()

	var before, afterElection, afterTTL int
	var lastAck time.Time
	for _, a := range acks {
		switch {
		case a.err == nil && a.done.After(elected):
			afterElection++
			t.Errorf("%s acknowledged at offset %d by the old leader %s after broker %d was elected", a.value, a.offset, a.done.Sub(elected), newLeader)
		case a.err == nil && a.sent.After(isolated.Add(ttl)):
			afterTTL++
			t.Errorf("%s sent %s after the isolation (lease %s) was acknowledged", a.value, a.sent.Sub(isolated), ttl)
		case a.err == nil:
			before++
			lastAck = a.done
		}
	}
	t.Logf("isolated at 0: last ack from the old leader at %s, broker %d elected at %s (lease %s); %d acknowledged before, %d sent in all",
		lastAck.Sub(isolated).Round(time.Millisecond), newLeader, elected.Sub(isolated).Round(time.Millisecond), ttl, before, len(acks))
	if elected.Sub(isolated) < ttl/2 {
		t.Errorf("broker %d elected %s after the isolation, before the old leader's lease (%s) could have run out: the preferred election did not wait",
			newLeader, elected.Sub(isolated).Round(time.Millisecond), ttl)
	}

	// Healed, and then nothing happens for a while: the cluster must come
	// back whole, and a preferred election must now go through.
	c.EtcdLink(old).Resume()
	for ctl := int32(1); ctl <= 2; ctl++ {
		c.Net.Heal(BrokerName(old), ControllerName(ctl))
	}
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return len(c.Partition("moving", 0).GetIsr()) == 3
	})
	time.Sleep(2 * time.Second)
	resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions:   []*commonv1.TopicPartition{{Topic: "moving", Partition: 0}}})
	if err != nil {
		t.Fatalf("preferred election after healing: %v", err)
	}
	if code := kerr.Code(resp.GetResults()[0].GetErrorCode()); code != kerr.None && code != kerr.ElectionNotNeeded {
		t.Fatalf("preferred election after healing: %v %s", code, resp.GetResults()[0].GetErrorMessage())
	}
	c.WaitFor(10*time.Second, "the preferred replica leading and applying it", func() bool {
		return c.Partition("moving", 0).GetLeader() == preferred && c.Leads(preferred, "moving", 0)
	})
	if _, err := c.Produce(context.Background(), "moving", 0, -1, "after-heal"); err != nil {
		t.Fatalf("acks=all produce after healing: %v", err)
	}
	c.WaitHWAtLEO("moving", 0, 1, 2, 3)
	final := c.SameLogs("moving", 0, 1, 2, 3)
	for _, a := range acks {
		if a.err == nil && a.done.After(elected) && !slices.Contains(final, a.value) {
			t.Errorf("%s, acknowledged after the election, is lost", a.value)
		}
	}
}

// The controller loses etcd right after the leader yielded: the election
// is never written, the controller's term ends, and the standby takes
// office. The yielded leader must not go on refusing writes: the new
// controller's LeaderAndIsr ends the yield (it knows nothing of the move),
// and after a quiet spell the partition is whole and takes writes.
func TestLeaderTakesWritesAgainWhenTheControllerDiesMidHandoff(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2, PausableControllers: true})
	_, leader := topicLedOffItsPreferredReplica(c, "stranded")
	if _, err := c.Produce(context.Background(), "stranded", 0, -1, "before"); err != nil {
		t.Fatal(err)
	}
	active, epoch := c.ActiveController()
	// The active controller's etcd link stalls: it can still ask the leader
	// to yield, but not write the election.
	c.ctrlEtcd[active].Pause()
	defer c.ctrlEtcd[active].Resume()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := c.Admin().ElectLeaders(ctx, &adminv1.ElectLeadersRequest{
			ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
			Partitions:   []*commonv1.TopicPartition{{Topic: "stranded", Partition: 0}}})
		t.Logf("ElectLeaders through the stalled controller: %v", err)
	}()
	produce := func(acks int32, v string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.BrokerClient(leader).Produce(ctx, &brokerv1.ProduceRequest{Topic: "stranded", Partition: 0, Acks: acks, TimeoutMs: 1000,
			Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record(v)}}})
		if err != nil {
			return kerr.FromStatus(err)
		}
		return nil
	}
	c.WaitFor(10*time.Second, "the leader yielding (refusing writes)", func() bool {
		return kerr.CodeOf(produce(1, "probe")) == kerr.NotLeaderOrFollower
	})
	yielded := time.Now()
	c.WaitFor(20*time.Second, "another controller in office", func() bool {
		id, e := c.ActiveController()
		return id > 0 && id != active && e > epoch
	})
	c.WaitFor(10*time.Second, "the partition taking writes again", func() bool {
		l := c.Partition("stranded", 0).GetLeader()
		if l <= 0 {
			return false
		}
		leader = l
		return produce(1, "after") == nil
	})
	t.Logf("writes refused for %s (controller lost etcd; the standby took office and pushed its state)",
		time.Since(yielded).Round(time.Millisecond))
	// Nothing happens for a while; then the partition is whole and live.
	time.Sleep(2 * time.Second)
	if err := produce(-1, "after-quiet"); err != nil {
		t.Fatalf("acks=all write after the quiet spell: %v", err)
	}
	c.WaitFor(20*time.Second, "full ISR", func() bool { return len(c.Partition("stranded", 0).GetIsr()) == 3 })
	c.WaitHWAtLEO("stranded", 0, 1, 2, 3)
	log := c.SameLogs("stranded", 0, 1, 2, 3)
	for _, v := range []string{"before", "after", "after-quiet"} {
		if !slices.Contains(log, v) {
			t.Errorf("%s acknowledged and not in the log %v", v, log)
		}
	}
}

// topicLedOffItsPreferredReplica creates a topic of one partition on three
// brokers and moves its leadership off the preferred replica (a crash and
// a restart), which is back in the ISR; it returns both brokers.
func topicLedOffItsPreferredReplica(c *Cluster, topic string) (preferred, leader int32) {
	c.T.Helper()
	c.CreateTopic(topic, 1, 3, nil)
	preferred = c.Partition(topic, 0).GetReplicas()[0]
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition(topic, 0).GetIsr()) == 3 })
	c.CrashBroker(preferred)
	c.WaitFor(10*time.Second, "another leader", func() bool {
		leader = c.Partition(topic, 0).GetLeader()
		return leader > 0 && leader != preferred
	})
	c.StartBroker(preferred)
	c.WaitFor(20*time.Second, "the preferred replica back in the ISR", func() bool {
		return len(c.Partition(topic, 0).GetIsr()) == 3
	})
	return preferred, leader
}
