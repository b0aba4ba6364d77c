package clustertest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
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
	c.CreateTopic("moving", 1, 3, nil)
	preferred := c.Partition("moving", 0).GetReplicas()[0]
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("moving", 0).GetIsr()) == 3 })
	// Leadership off the preferred replica: it crashes and comes back.
	c.CrashBroker(preferred)
	var old int32
	c.WaitFor(10*time.Second, "another leader", func() bool {
		old = c.Partition("moving", 0).GetLeader()
		return old > 0 && old != preferred
	})
	c.StartBroker(preferred)
	c.WaitFor(20*time.Second, "the preferred replica back in the ISR", func() bool {
		return slices.Contains(c.Partition("moving", 0).GetIsr(), preferred)
	})
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
