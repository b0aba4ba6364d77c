package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// produced is the outcome of one produce to a fixed broker.
type produced struct {
	value      string
	sent, done time.Time
	offset     int64
	err        error
}

// loopProgress counts a produceLoop's records as they go, so a test can
// wait for traffic instead of sleeping.
type loopProgress struct{ sent, acked atomic.Int64 }

// waitFor waits until at least n more records than at its call were sent
// (or, with acked, acknowledged).
func (lp *loopProgress) waitFor(c *Cluster, n int64, acked bool, what string) {
	c.T.Helper()
	count := &lp.sent
	if acked {
		count = &lp.acked
	}
	want := count.Load() + n
	c.WaitFor(30*time.Second, what, func() bool { return count.Load() >= want })
}

// produceLoop sends acks=1 records to broker id, one at a time, until stop
// closes or max records were sent, and returns every outcome; lp, if not
// nil, counts them as they go.
func produceLoop(c *Cluster, id int32, topic, prefix string, stop <-chan struct{}, max int, lp *loopProgress) []produced {
	if lp == nil {
		lp = &loopProgress{}
	}
	var out []produced
	cl := c.BrokerClient(id)
	for i := 0; i < max; i++ {
		select {
		case <-stop:
			return out
		default:
		}
		a := produced{value: fmt.Sprintf("%s-%d", prefix, i), sent: time.Now()}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := cl.Produce(ctx, &brokerv1.ProduceRequest{Topic: topic, Partition: 0, Acks: 1, TimeoutMs: 1000,
			Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record(a.value)}}})
		cancel()
		a.done = time.Now()
		if err != nil {
			a.err = kerr.FromStatus(err)
		} else {
			a.offset = resp.GetBaseOffset()
			lp.acked.Add(1)
		}
		out = append(out, a)
		lp.sent.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
	return out
}

// within polls cond for up to d and reports whether it came to hold.
func within(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// TestIsolatedLeaderFencesItself cuts a partition leader off from etcd and
// from both controllers, while its followers and the test's client still
// reach it, and keeps producing acks=1 to it. Its lease expires and the
// controller elects another leader. The old leader must have stopped
// accepting writes before that: no write is acknowledged by it once the new
// leader is elected, and every write sent after one lease TTL is refused.
// After healing it registers again, follows, rejoins the ISR, and every
// replica has HW = LEO.
func TestIsolatedLeaderFencesItself(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2})
	c.CreateTopic("fence", 1, 3, nil)
	old := c.Leader("fence", 0)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("fence", 0).GetIsr()) == 3 })
	ttl := c.BrokerConfig(old).SessionTimeout

	stop := make(chan struct{})
	var acks []produced
	var wg sync.WaitGroup
	wg.Add(1)
	var lp loopProgress
	go func() { defer wg.Done(); acks = produceLoop(c, old, "fence", "r", stop, 5000, &lp) }()
	lp.waitFor(c, 10, true, "some writes acknowledged while healthy")

	isolated := time.Now()
	c.EtcdLink(old).Pause()
	for ctl := int32(1); ctl <= 2; ctl++ {
		c.Net.Partition(BrokerName(old), ControllerName(ctl))
	}
	var elected time.Time
	var newLeader int32
	c.WaitFor(4*ttl, "another leader elected", func() bool {
		if l := c.Partition("fence", 0).GetLeader(); l > 0 && l != old {
			elected, newLeader = time.Now(), l
			return true
		}
		return false
	})
	if !within(time.Second, func() bool { return c.Broker(old).Fenced() }) {
		t.Errorf("broker %d does not report itself fenced (tidemark_broker_fenced) once another leader is elected", old)
	}
	// Once its followers follow the new leader (they stop fetching from
	// it, and the fence's vouch window, replica.fetch.wait.max.ms + 1 s,
	// runs out), a consumer is refused too: the new leader may already
	// have written.
	var ferr, merr error
	if !within(5*time.Second, func() bool {
		fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, ferr = c.BrokerClient(old).Fetch(fctx, &brokerv1.FetchRequest{Topic: "fence", Partition: 0, Offset: 0, CurrentLeaderEpoch: -1})
		return ferr != nil
	}) || kerr.CodeOf(kerr.FromStatus(ferr)) != kerr.NotLeaderOrFollower {
		t.Errorf("consumer fetch from the fenced leader its followers left: %v, want NOT_LEADER_OR_FOLLOWER", ferr)
	}
	// Its metadata is stale (it hears from no controller), so it refuses
	// Metadata rather than name itself leader: a client whose bootstrap
	// list starts with it moves on and finds the new leader.
	mctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, merr = c.BrokerClient(old).Metadata(mctx, &brokerv1.MetadataRequest{Topics: []string{"fence"}})
	cancel()
	if merr == nil || kerr.CodeOf(kerr.FromStatus(merr)) != kerr.BrokerNotAvailable || !strings.Contains(merr.Error(), "fenced") {
		t.Errorf("metadata from the fenced leader: %v, want BROKER_NOT_AVAILABLE naming the fence", merr)
	}
	// The controller's answer runs ahead of the brokers': the new leader
	// answers Metadata with itself once it has applied its election.
	c.WaitFor(10*time.Second, "the new leader applying its election", func() bool { return c.Leads(newLeader, "fence", 0) })
	c.mu.Lock()
	boot := []string{c.brokerCfg[old].Listen, c.brokerCfg[newLeader].Listen}
	c.mu.Unlock()
	tc, err := c.tls.ClientOrNil()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(boot, client.Options{TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	mctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	md, err := cl.Metadata(mctx, "fence")
	cancel()
	if err != nil {
		t.Errorf("a client bootstrapping from the fenced leader first: %v", err)
	} else if l := md.GetTopics()[0].GetPartitions()[0].GetLeader(); l != newLeader {
		t.Errorf("a client bootstrapping from the fenced leader first sees leader %d, want %d", l, newLeader)
	}
	lp.waitFor(c, 20, false, "more writes sent to the old leader after the election")
	close(stop)
	wg.Wait()

	var before, refused, afterTTL, afterElection int
	var lastAck time.Time
	for _, a := range acks {
		switch {
		case a.err == nil && a.done.After(elected):
			afterElection++
			t.Errorf("%s acknowledged at offset %d by the old leader %s after the new leader was elected", a.value, a.offset, a.done.Sub(elected))
		case a.err == nil && a.sent.After(isolated.Add(ttl)):
			afterTTL++
			t.Errorf("%s sent %s after the isolation (lease %s) was acknowledged", a.value, a.sent.Sub(isolated), ttl)
		case a.err == nil:
			before++
			lastAck = a.done
		case kerr.CodeOf(a.err) == kerr.NotLeaderOrFollower:
			refused++
		}
	}
	t.Logf("isolated at 0: last ack from the old leader at %s, new leader %d elected by %s; %d acked, %d refused (NOT_LEADER_OR_FOLLOWER), %d sent in all",
		lastAck.Sub(isolated).Round(time.Millisecond), newLeader, elected.Sub(isolated).Round(time.Millisecond), before, refused, len(acks))
	if refused == 0 {
		t.Error("the old leader refused nothing")
	}

	c.EtcdLink(old).Resume()
	for ctl := int32(1); ctl <= 2; ctl++ {
		c.Net.Heal(BrokerName(old), ControllerName(ctl))
	}
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return slices.Contains(c.Partition("fence", 0).GetIsr(), old)
	})
	c.WaitFor(time.Second, "the old leader to report itself unfenced", func() bool { return !c.Broker(old).Fenced() })
	if _, err := c.Produce(context.Background(), "fence", 0, -1, "after-heal"); err != nil {
		t.Fatalf("acks=all produce after healing: %v", err)
	}
	c.WaitHWAtLEO("fence", 0, 1, 2, 3)
	final := c.SameLogs("fence", 0, 1, 2, 3)
	lost, lostLate := 0, 0
	for _, a := range acks {
		if a.err == nil && !slices.Contains(final, a.value) {
			lost++ // acks=1 before the election: losing the leader may take these
			if a.done.After(elected) {
				lostLate++
			}
		}
	}
	t.Logf("final log: %d records; %d acknowledged records are not in it, %d of them acknowledged after the election",
		len(final), lost, lostLate)
}

// TestControllerFailoverDoesNotFenceLeaders: the fence rests on the
// registration lease in etcd, not on the controller session, so stopping
// the active controller refuses no write on a healthy leader.
func TestControllerFailoverDoesNotFenceLeaders(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2})
	c.CreateTopic("steady", 1, 3, nil)
	leader := c.Leader("steady", 0)

	stop := make(chan struct{})
	var acks []produced
	var wg sync.WaitGroup
	wg.Add(1)
	var lp loopProgress
	go func() { defer wg.Done(); acks = produceLoop(c, leader, "steady", "s", stop, 5000, &lp) }()
	lp.waitFor(c, 10, true, "writes acknowledged before the controller stops")

	active, epoch := c.ActiveController()
	c.StopController(active)
	c.WaitFor(15*time.Second, "a new active controller", func() bool {
		id, e := c.ActiveController()
		return id > 0 && e > epoch
	})
	// Past the broker lease: a fence tied to the controller would show now.
	time.Sleep(c.BrokerConfig(leader).SessionTimeout + 500*time.Millisecond)
	close(stop)
	wg.Wait()

	for _, a := range acks {
		if a.err != nil {
			t.Errorf("%s refused during the controller failover: %v", a.value, a.err)
		}
	}
	for id := int32(1); id <= 3; id++ {
		if c.Broker(id).Fenced() {
			t.Errorf("broker %d fenced after a controller failover", id)
		}
	}
	t.Logf("%d acks=1 writes to leader %d across the controller failover, none refused", len(acks), leader)
}

// TestPausedLeaderRefusesWritesWhenItResumes plays a leader process stopped
// past its lease (SIGSTOP): every link of it stalls, etcd's included. Another
// leader is elected meanwhile. When it resumes it still believes it leads
// until the controller tells its new incarnation otherwise; every write it
// is sent from the moment it resumes must be refused, none acknowledged and
// then truncated.
func TestPausedLeaderRefusesWritesWhenItResumes(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2})
	c.CreateTopic("pause", 1, 3, nil)
	old := c.Leader("pause", 0)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("pause", 0).GetIsr()) == 3 })
	if _, err := c.Produce(context.Background(), "pause", 0, -1, "before"); err != nil {
		t.Fatal(err)
	}

	c.EtcdLink(old).Pause()
	c.Net.Pause(BrokerName(old))
	c.WaitFor(4*c.BrokerConfig(old).SessionTimeout, "another leader elected", func() bool {
		l := c.Partition("pause", 0).GetLeader()
		return l > 0 && l != old
	})
	if !c.Leads(old, "pause", 0) {
		t.Fatal("the paused broker heard of the election: the pause leaks")
	}
	resumed := time.Now()
	c.Net.Resume(BrokerName(old))
	c.EtcdLink(old).Resume()
	stop := make(chan struct{})
	time.AfterFunc(2*time.Second, func() { close(stop) })
	acks := produceLoop(c, old, "pause", "p", stop, 2000, nil)
	accepted := 0
	for _, a := range acks {
		if a.err == nil {
			accepted++
			t.Errorf("%s acknowledged at offset %d by the resumed old leader %s after it resumed", a.value, a.offset, a.done.Sub(resumed))
		}
	}
	t.Logf("%d writes sent to the resumed old leader, %d acknowledged; it leads: %v", len(acks), accepted, c.Leads(old, "pause", 0))
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return slices.Contains(c.Partition("pause", 0).GetIsr(), old)
	})
	c.SameLogs("pause", 0, 1, 2, 3)
}

// An acks=all write parked at a leader that is then cut off from etcd and
// both controllers: its followers follow the leader the controller elects
// once the lease expires, and never fetch the write. The fence lets a
// lease-silent leader's in-sync followers vouch for it; once they stopped
// fetching, the parked write must be answered NOT_LEADER_OR_FOLLOWER
// (retriable: the client finds the new leader), not wait for its 20 s
// timeout.
func TestParkedWriteEndsWhenTheFencedLeadersFollowersLeave(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Controllers: 2, Adjust: func(cfg *broker.Config) { cfg.FaultInjection = true }})
	c.CreateTopic("gone", 1, 3, map[string]string{"min.insync.replicas": "2"})
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("gone", 0).GetIsr()) == 3 })
	old := c.Leader("gone", 0)
	ctx := context.Background()
	for id := int32(1); id <= 3; id++ {
		if id == old {
			continue
		}
		fc := faultv1.NewFaultInjectionServiceClient(c.Conn(c.Broker(id).Addr()))
		if _, err := fc.SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{Fault: &faultv1.FetchFault{Topic: "gone", Partition: -1, Stall: true}}); err != nil {
			t.Fatal(err)
		}
	}
	sent := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := c.BrokerClient(old).Produce(ctx, &brokerv1.ProduceRequest{Topic: "gone", Partition: 0, Acks: -1, TimeoutMs: 20000,
			Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record("parked")}}})
		done <- err
	}()
	c.WaitFor(5*time.Second, "the write in the leader's log", func() bool { return len(c.Values(old, "gone", 0)) == 1 })
	c.EtcdLink(old).Pause()
	for ctl := int32(1); ctl <= 2; ctl++ {
		c.Net.Partition(BrokerName(old), ControllerName(ctl))
	}
	defer func() {
		c.EtcdLink(old).Resume()
		for ctl := int32(1); ctl <= 2; ctl++ {
			c.Net.Heal(BrokerName(old), ControllerName(ctl))
		}
	}()
	select {
	case err := <-done:
		if kerr.CodeOf(kerr.FromStatus(err)) != kerr.NotLeaderOrFollower || !strings.Contains(err.Error(), "fenced") {
			t.Fatalf("parked write answered %v after %s, want NOT_LEADER_OR_FOLLOWER naming the fence", err, time.Since(sent).Round(time.Millisecond))
		}
		t.Logf("parked write answered %s after it was sent: %v", time.Since(sent).Round(time.Millisecond), err)
	case <-time.After(15 * time.Second):
		t.Fatal("the parked write was not answered within 15 s of its leader's isolation: it waits for its timeout")
	}
}
