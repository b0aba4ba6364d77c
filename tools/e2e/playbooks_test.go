package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// Bounds of the playbooks' waits.
const (
	// electionBound: a crashed leader replaced. The controller declares a
	// broker dead at once only when its address refuses connections; a
	// killed container whose name Docker's DNS has already dropped is left
	// to its registration lease (sessionTimeoutMs), like a partitioned one,
	// so that no second leader is elected beside a live one (DESIGN.md,
	// "The leader fence").
	electionBound = 20 * time.Second // sessionTimeoutMs (15 s) and the election after it
	rejoinBound   = 60 * time.Second // a restarted or reconnected broker back in every ISR
	takeoverBound = 20 * time.Second // a standby controller active
	reportBound   = 30 * time.Second // a broker's session with a new controller open
)

// topicName makes a test's topic name unique to the run: topic deletion
// completes in the background, and a rerun must not meet the old one.
func topicName(base string) string {
	return fmt.Sprintf("%s-%d", base, time.Now().UnixMilli()%1000000)
}

// begin starts a playbook: the stack is made whole again whatever the test
// leaves behind, and the cluster must be ready.
func begin(t *testing.T, name string) (*stack, *cluster, *timeline) {
	s := need(t)
	tl := newTimeline(t, name)
	c := newCluster(t, s)
	t.Cleanup(func() { s.restore(t) })
	c.ready(tl)
	return s, c, tl
}

// settle stops a producer, then checks every acknowledged record against
// the log and puts the verdict on the timeline.
func settle(t *testing.T, c *cluster, tl *timeline, pr *producer, led *ledger, refusedAbsent bool) verdict {
	t.Helper()
	if err := pr.halt(60 * time.Second); err != nil {
		t.Errorf("stopping the producer: %v", err)
	}
	a, f := led.counts()
	tl.mark("producer stopped: %d acknowledged, %d failed (%s)", a, f, led.failureCodes())
	v, _ := verify(c, led, refusedAbsent)
	tl.mark("consumer: %s", v)
	if !v.ok() {
		t.Errorf("acknowledged records not in the log exactly once and in order: %s", v)
	}
	return v
}

// nextInISR is the replica Kafka's election picks when leader goes: the
// first replica in assignment order, other than leader, that is in the ISR.
func nextInISR(p *adminv1.PartitionDescription, leader int32) int32 {
	for _, r := range p.GetReplicas() {
		if r != leader && slices.Contains(p.GetIsr(), r) {
			return r
		}
	}
	return -1
}

// inEveryISR is the condition: broker id is in the ISR of every partition.
func inEveryISR(id int32) func([]*adminv1.PartitionDescription) bool {
	return func(parts []*adminv1.PartitionDescription) bool {
		for _, p := range parts {
			if !slices.Contains(p.GetIsr(), id) {
				return false
			}
		}
		return len(parts) > 0
	}
}

// truncationLines picks the lines of a broker's log that report a truncation.
func truncationLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "Truncat") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// TestLeaderCrash is playbook 1: the leader of a partition is killed while
// an idempotent acks=all producer writes. A new leader comes from the ISR in
// assignment order within electionBound; the killed broker restarts, rejoins
// the ISR, and a preferred election hands its leadership back. No
// acknowledged record is lost or duplicated.
func TestLeaderCrash(t *testing.T) {
	s, c, tl := begin(t, "1 leader crash")
	topic := topicName("e2e.leader-crash")
	parts := c.createTopic(tl, topic, nil)
	defer c.deleteTopic(topic)
	p0 := parts[0]
	leader := p0.GetLeader()
	if leader != p0.GetReplicas()[0] {
		t.Fatalf("p0 is led by %d, not its preferred replica %d", leader, p0.GetReplicas()[0])
	}
	want := nextInISR(p0, leader)

	led := newLedger(topic, 3)
	pr := newProducer(c, led, "crash", client.ProducerOptions{DeliveryTimeout: 60 * time.Second})
	pr.run(10 * time.Millisecond)
	if _, err := led.waitAcks(0, 0, 30, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	a, _ := led.counts()
	tl.mark("producer running (acks=all, idempotent): %d acknowledged", a)

	killedAt := time.Now()
	tl.mark("docker kill %s (leader of p0, leader epoch %d); expect %d next (first of %s in the ISR)",
		brokerSvc(leader), p0.GetLeaderEpoch(), want, ids(p0.GetReplicas()))
	s.kill(t, brokerSvc(leader))
	after, _ := c.waitTopic(tl, topic, "a new leader for p0", electionBound, func(ps []*adminv1.PartitionDescription) bool {
		return ps[0].GetLeader() >= 0 && ps[0].GetLeader() != leader
	})
	np := after[0]
	tl.mark("new leader of p0: broker %d, %s after docker kill was issued (leader epoch %d -> %d, ISR %s)",
		np.GetLeader(), secs(time.Since(killedAt)), p0.GetLeaderEpoch(), np.GetLeaderEpoch(), ids(np.GetIsr()))
	if np.GetLeader() != want {
		t.Errorf("new leader %d, want %d: the first replica of %s in the ISR %s", np.GetLeader(), want, ids(p0.GetReplicas()), ids(p0.GetIsr()))
	}
	if np.GetLeaderEpoch() <= p0.GetLeaderEpoch() {
		t.Errorf("leader epoch %d did not grow past %d", np.GetLeaderEpoch(), p0.GetLeaderEpoch())
	}
	if slices.Contains(np.GetIsr(), leader) {
		t.Errorf("the killed broker %d is still in the ISR %s", leader, ids(np.GetIsr()))
	}
	base := led.ackedOn(0)
	if d, err := led.waitAcks(0, base, 20, 20*time.Second); err != nil {
		t.Error(err)
	} else {
		tl.mark("writes to p0 go on: 20 more acknowledged %s later", secs(d))
	}
	// Stay down a little longer, so the new leader's log runs ahead.
	time.Sleep(time.Until(killedAt.Add(3 * time.Second)))

	restartAt := time.Now()
	tl.mark("docker start %s (down %s; %d records acknowledged on p0 so far)", brokerSvc(leader), secs(time.Since(killedAt)), led.ackedOn(0))
	s.startSvc(t, brokerSvc(leader))
	c.waitTopic(tl, topic, fmt.Sprintf("broker %d back in every ISR", leader), rejoinBound, inEveryISR(leader))
	tl.mark("broker %d caught up and back in every ISR %s after the start", leader, secs(time.Since(restartAt)))
	if lines := truncationLines(s.logsSince(brokerSvc(leader), restartAt)); len(lines) > 0 {
		tl.mark("broker %d truncated on its way back (%d log lines), e.g. %s", leader, len(lines), lines[0])
	} else {
		tl.mark("broker %d logged no truncation on its way back", leader)
	}

	tl.mark("preferred leader election for %s", topic)
	c.electPreferred(topic, 3)
	back, took := c.waitTopic(tl, topic, fmt.Sprintf("broker %d leading p0 again", leader), 15*time.Second,
		func(ps []*adminv1.PartitionDescription) bool { return ps[0].GetLeader() == leader })
	tl.mark("broker %d leads p0 again after %s (leader epoch %d)", leader, secs(took), back[0].GetLeaderEpoch())

	settle(t, c, tl, pr, led, false)
}

// TestFollowerCutOff is playbook 2: a follower is cut off the network
// (`docker network disconnect`). It leaves the ISR once it has not caught
// up for replica.lag.time.max.ms, writes go on with the other two replicas,
// and once reconnected it catches up and rejoins.
func TestFollowerCutOff(t *testing.T) {
	s, c, tl := begin(t, "2 follower cut off")
	topic := topicName("e2e.follower-cut")
	// Broker 3 follows every partition and leads none: cutting it off is
	// the pure follower case of the playbook.
	const follower = int32(3)
	c.createTopic(tl, topic, [][]int32{{1, 2, 3}, {2, 1, 3}, {1, 2, 3}})
	defer c.deleteTopic(topic)
	dc, err := c.describeCluster()
	if err != nil {
		t.Fatal(err)
	}
	epochBefore := brokerEpoch(dc, follower)

	led := newLedger(topic, 3)
	pr := newProducer(c, led, "cut", client.ProducerOptions{DeliveryTimeout: 60 * time.Second})
	pr.run(10 * time.Millisecond)
	if _, err := led.waitAcks(0, 0, 30, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	a, _ := led.counts()
	tl.mark("producer running: %d acknowledged; replica.lag.time.max.ms=%d", a, lagTime.Milliseconds())

	tl.mark("docker network disconnect %s %s", s.network, brokerSvc(follower))
	cutAt := time.Now()
	s.disconnect(t, brokerSvc(follower))
	// The leader checks every lagTime/2 for followers that have not caught up
	// for lagTime: the follower is out between lagTime and 1.5 × lagTime
	// after its last fetch (plus the AlterPartition round trip).
	left := make([]time.Duration, 3)
	parts, _ := c.waitTopic(tl, topic, fmt.Sprintf("broker %d out of every ISR", follower), 2*lagTime+10*time.Second,
		func(ps []*adminv1.PartitionDescription) bool {
			out := true
			for i, p := range ps {
				if slices.Contains(p.GetIsr(), follower) {
					out = false
				} else if left[i] == 0 {
					left[i] = time.Since(cutAt)
				}
			}
			return out
		})
	for i, p := range parts {
		tl.mark("p%d: broker %d left the ISR %s after the cut (ISR now %s, leader %d)", i, follower, secs(left[i]), ids(p.GetIsr()), p.GetLeader())
		if left[i] < lagTime-time.Second {
			t.Errorf("p%d: broker %d left the ISR %s after the cut, before replica.lag.time.max.ms %v", i, follower, secs(left[i]), lagTime)
		}
	}
	for p := range int32(3) {
		base := led.ackedOn(p)
		if d, err := led.waitAcks(p, base, 10, 15*time.Second); err != nil {
			t.Error(err)
		} else {
			tl.mark("p%d: writes go on without broker %d: 10 more acknowledged in %s", p, follower, secs(d))
		}
	}

	tl.mark("docker network connect %s %s (cut for %s)", s.network, brokerSvc(follower), secs(time.Since(cutAt)))
	reconnectAt := time.Now()
	s.connect(t, brokerSvc(follower))
	c.waitTopic(tl, topic, fmt.Sprintf("broker %d back in every ISR", follower), rejoinBound, inEveryISR(follower))
	tl.mark("broker %d caught up and rejoined every ISR %s after the reconnect", follower, secs(time.Since(reconnectAt)))
	if dc, err := c.describeCluster(); err == nil {
		if e := brokerEpoch(dc, follower); e != epochBefore {
			tl.mark("broker %d registered again while cut off (broker epoch %d -> %d)", follower, epochBefore, e)
		} else {
			tl.mark("broker %d kept its registration (broker epoch %d)", follower, e)
		}
	}

	settle(t, c, tl, pr, led, false)
}

// TestMinISR is playbook 3 (min_isr_demo): with two of three brokers
// stopped the ISR shrinks to the leader alone, below min.insync.replicas 2,
// and acks=all writes fail with NOT_ENOUGH_REPLICAS without writing
// anything; once the brokers are back, writes succeed.
func TestMinISR(t *testing.T) {
	s, c, tl := begin(t, "3 min.insync.replicas")
	topic := topicName("e2e.min-isr")
	parts := c.createTopic(tl, topic, nil)
	defer c.deleteTopic(topic)
	survivor := parts[0].GetLeader()
	var stopped []int32
	for _, r := range parts[0].GetReplicas() {
		if r != survivor {
			stopped = append(stopped, r)
		}
	}

	led := newLedger(topic, 3)
	steady := newProducer(c, led, "steady", client.ProducerOptions{DeliveryTimeout: 30 * time.Second})
	if err := steady.burst(30, 40*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := steady.halt(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if a, f := led.counts(); a != 30 || f != 0 {
		t.Fatalf("steady state: %d acknowledged, %d failed (%s), want 30 and 0: %s", a, f, led.failureCodes(), led.failureSamples())
	}
	tl.mark("steady state (ISR of 3): 30 of 30 acknowledged")
	endBefore := lastAckedOffsets(led)

	tl.mark("docker stop %s %s (broker %d stays)", brokerSvc(stopped[0]), brokerSvc(stopped[1]), survivor)
	stopAt := time.Now()
	errs := make(chan error, 2)
	for _, id := range stopped {
		go func() {
			_, err := s.docker(60*time.Second, "stop", "-t", "30", s.id(brokerSvc(id)))
			errs <- err
		}()
	}
	for range stopped {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	tl.mark("both stopped after %s", secs(time.Since(stopAt)))
	c.waitTopic(tl, topic, fmt.Sprintf("ISR of every partition = [%d]", survivor), 30*time.Second,
		func(ps []*adminv1.PartitionDescription) bool {
			for _, p := range ps {
				if p.GetLeader() != survivor || len(p.GetIsr()) != 1 {
					return false
				}
			}
			return true
		})
	tl.mark("every partition: leader %d, ISR [%d] (%s after the stops began), below min.insync.replicas 2", survivor, survivor, secs(time.Since(stopAt)))

	refused := newLedger(topic, 3)
	pr := newProducer(c, refused, "refused", client.ProducerOptions{Retries: 3, DeliveryTimeout: 20 * time.Second, RequestTimeout: 5 * time.Second})
	if err := pr.burst(30, 45*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = pr.halt(10 * time.Second)
	a, f := refused.counts()
	tl.mark("acks=all with ISR [%d]: %d acknowledged, %d failed (%s)", survivor, a, f, refused.failureCodes())
	if a != 0 || f != 30 || refused.codes[kerr.NotEnoughReplicas] != 30 {
		t.Errorf("want all 30 refused with NOT_ENOUGH_REPLICAS, got %d acknowledged, failures %s", a, refused.failureCodes())
	}

	tl.mark("docker start %s %s", brokerSvc(stopped[0]), brokerSvc(stopped[1]))
	restartAt := time.Now()
	s.startSvc(t, brokerSvc(stopped[0]))
	s.startSvc(t, brokerSvc(stopped[1]))
	c.waitTopic(tl, topic, "full ISRs again", rejoinBound, fullISR)
	tl.mark("full ISRs again %s after the start", secs(time.Since(restartAt)))

	again := newProducer(c, led, "recovered", client.ProducerOptions{DeliveryTimeout: 30 * time.Second})
	if err := again.burst(30, 40*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = again.halt(20 * time.Second)
	if a, f := led.counts(); a != 60 || f != 0 {
		t.Errorf("after recovery: %d acknowledged in all, %d failed (%s), want 60 and 0", a, f, led.failureCodes())
	}
	tl.mark("after recovery: 30 of 30 acknowledged")

	// Nothing refused was written: no refused value is in the log, and each
	// partition's first record after recovery sits right after its last
	// record from before the stop.
	for value, code := range refused.failed {
		led.failed[value] = code
	}
	v, logs := verify(c, led, true)
	tl.mark("consumer: %s", v)
	if !v.ok() {
		t.Errorf("records: %s", v)
	}
	for p, recs := range logs {
		var firstAfter int64 = -1
		for _, r := range recs {
			if strings.HasPrefix(r.value, "recovered-") {
				firstAfter = r.offset
				break
			}
		}
		if firstAfter != endBefore[p]+1 {
			t.Errorf("p%d: first record after recovery at offset %d, want %d: something was written in between", p, firstAfter, endBefore[p]+1)
		} else {
			tl.mark("p%d: log %d..%d before the stop, next record at %d: nothing written while refused", p, 0, endBefore[p], firstAfter)
		}
	}
}

// lastAckedOffsets is the highest acknowledged offset per partition.
func lastAckedOffsets(led *ledger) []int64 {
	led.mu.Lock()
	defer led.mu.Unlock()
	out := make([]int64, led.partitions)
	for i := range out {
		out[i] = -1
	}
	for _, a := range led.acked {
		out[a.partition] = max(out[a.partition], a.offset)
	}
	return out
}

// brokerReported are the event kinds only a broker reports, over its session.
var brokerReported = map[controlv1.EventKind]bool{
	controlv1.EventKind_EVENT_KIND_HW_ADVANCE: true, controlv1.EventKind_EVENT_KIND_ISR_SHRINK: true,
	controlv1.EventKind_EVENT_KIND_ISR_EXPAND: true, controlv1.EventKind_EVENT_KIND_TRUNCATION: true,
	controlv1.EventKind_EVENT_KIND_FENCED: true,
}

// waitReport waits until the active controller of the given epoch relays an
// event reported by broker id: its session with that controller is open.
func (c *cluster) waitReport(id int32, epoch int32, timeout time.Duration) time.Duration {
	c.t.Helper()
	begin := time.Now()
	ctx, cancel := ctxFor(timeout)
	defer cancel()
	since := begin.Add(-time.Second).UnixMilli()
	for resp, err := range c.admin.WatchCluster(ctx, &adminv1.WatchClusterRequest{IntervalMs: 200}) {
		if err != nil {
			c.t.Fatalf("no report from broker %d to controller epoch %d within %v: %v", id, epoch, timeout, err)
		}
		if resp.GetCluster().GetControllerEpoch() != epoch {
			continue
		}
		for _, ev := range resp.GetEvents() {
			if brokerReported[ev.GetKind()] && ev.GetNodeId() == id && ev.GetTime() >= since {
				return time.Since(begin)
			}
		}
	}
	c.t.Fatalf("watch ended before broker %d reported", id)
	return 0
}

// partitionState is the leader/ISR record of a partition in etcd.
type partitionState struct {
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
	ControllerEpoch int32   `json:"controller_epoch"`
	PartitionEpoch  int32   `json:"partition_epoch"`
}

// TestControllerFailover is playbook 4: the active controller is killed.
// The standby takes over with a higher controller_epoch, and a leader
// election still happens afterwards: the new controller replaces a killed
// partition leader and writes the decision under its own epoch.
func TestControllerFailover(t *testing.T) {
	s, c, tl := begin(t, "4 controller failover")
	topic := topicName("e2e.controller-failover")
	parts := c.createTopic(tl, topic, nil)
	defer c.deleteTopic(topic)

	led := newLedger(topic, 3)
	pr := newProducer(c, led, "ctl", client.ProducerOptions{DeliveryTimeout: 60 * time.Second})
	pr.run(10 * time.Millisecond)
	if _, err := led.waitAcks(0, 0, 30, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	dc, err := c.describeCluster()
	if err != nil {
		t.Fatal(err)
	}
	active, epoch := dc.GetController().GetId(), dc.GetControllerEpoch()
	var standby []int32
	for _, ci := range dc.GetControllers() {
		if !ci.GetActive() {
			standby = append(standby, ci.GetNode().GetId())
		}
	}
	tl.mark("active controller %d, controller_epoch %d, standby %s", active, epoch, ids(standby))
	if len(standby) != 1 {
		t.Fatalf("want one standby controller, have %s", ids(standby))
	}

	tl.mark("docker kill %s", controllerSvc(active))
	ctlKilled := time.Now()
	s.kill(t, controllerSvc(active))
	dc2, _ := c.waitCluster("a standby taking over", takeoverBound, func(d *adminv1.DescribeClusterResponse) bool {
		return d.GetController().GetId() > 0 && d.GetController().GetId() != active && d.GetControllerEpoch() > epoch
	})
	newEpoch := dc2.GetControllerEpoch()
	tl.mark("controller %d active %s after docker kill was issued (its lease: controller.session.ttl.ms 3000), controller_epoch %d -> %d",
		dc2.GetController().GetId(), secs(time.Since(ctlKilled)), epoch, newEpoch)
	if dc2.GetController().GetId() != standby[0] {
		t.Errorf("controller %d took over, want the standby %d", dc2.GetController().GetId(), standby[0])
	}

	p0 := parts[0]
	cur, err := c.describe(topic)
	if err == nil {
		p0 = cur[0]
	}
	victim := p0.GetLeader()
	// Brokers reopen their sessions with the new controller when they see
	// it; a broker that dies before its session is open is only noticed when
	// its lease runs out. Wait for the victim's first report. (A broker still
	// dialing the dead controller can take gRPC's 20 s connect timeout.)
	took := c.waitReport(victim, dc2.GetControllerEpoch(), reportBound)
	note := ""
	if took > 3*time.Second {
		note = " (slow: its session was still on its way to the old controller)"
	}
	tl.mark("broker %d reports to the new controller (session open) %s later%s", victim, secs(took), note)
	want := nextInISR(p0, victim)
	tl.mark("docker kill %s (leader of p0, leader epoch %d): an election for the new controller", brokerSvc(victim), p0.GetLeaderEpoch())
	victimKilled := time.Now()
	s.kill(t, brokerSvc(victim))
	after, _ := c.waitTopic(tl, topic, "a new leader for p0", electionBound, func(ps []*adminv1.PartitionDescription) bool {
		return ps[0].GetLeader() >= 0 && ps[0].GetLeader() != victim
	})
	tl.mark("new leader of p0: broker %d, %s after docker kill was issued (leader epoch %d)", after[0].GetLeader(), secs(time.Since(victimKilled)), after[0].GetLeaderEpoch())
	if after[0].GetLeader() != want {
		t.Errorf("new leader %d, want %d", after[0].GetLeader(), want)
	}
	raw, err := s.etcdGet("/tidemark/brokers/topics/" + topic + "/partitions/0/state")
	if err != nil {
		t.Fatal(err)
	}
	var state partitionState
	if err := json.Unmarshal([]byte(raw), &state); err != nil {
		t.Fatalf("partition state %q: %v", raw, err)
	}
	tl.mark("etcd: p0 state leader=%d leader_epoch=%d isr=%s controller_epoch=%d", state.Leader, state.LeaderEpoch, ids(state.ISR), state.ControllerEpoch)
	if state.ControllerEpoch != newEpoch {
		t.Errorf("p0 state written under controller_epoch %d, want the new controller's %d", state.ControllerEpoch, newEpoch)
	}

	tl.mark("docker start %s %s", brokerSvc(victim), controllerSvc(active))
	restartAt := time.Now()
	s.startSvc(t, brokerSvc(victim))
	s.startSvc(t, controllerSvc(active))
	c.waitTopic(tl, topic, fmt.Sprintf("broker %d back in every ISR", victim), rejoinBound, inEveryISR(victim))
	tl.mark("broker %d back in every ISR %s after the start", victim, secs(time.Since(restartAt)))
	dc3, _ := c.waitCluster(fmt.Sprintf("controller %d back as a standby", active), 30*time.Second, func(d *adminv1.DescribeClusterResponse) bool {
		for _, ci := range d.GetControllers() {
			if ci.GetNode().GetId() == active && !ci.GetActive() {
				return true
			}
		}
		return false
	})
	tl.mark("controller %d back as a standby %s after the start; active %d, controller_epoch %d", active, secs(time.Since(restartAt)), dc3.GetController().GetId(), dc3.GetControllerEpoch())
	c.electPreferred(topic, 3)
	_, took = c.waitTopic(tl, topic, "preferred leaders back", 15*time.Second, func(ps []*adminv1.PartitionDescription) bool {
		for _, p := range ps {
			if p.GetLeader() != p.GetReplicas()[0] {
				return false
			}
		}
		return true
	})
	tl.mark("preferred leaders restored in %s", secs(took))

	settle(t, c, tl, pr, led, false)
}

// TestEtcdRestart stops etcd's container (SIGTERM) for longer than the
// brokers' session timeout (6 s) and starts it again, while an idempotent
// acks=all producer writes. Every leader fences itself while etcd is away;
// once it is back the brokers keep their registrations (etcd kept their
// leases: the brokers renewed them on an open stream while it drained, and
// its restart gave each a whole TTL), so the same leaders lead again in the
// same leader epochs, a controller is elected, and no acknowledged write is
// lost or duplicated.
func TestEtcdRestart(t *testing.T) {
	s, c, tl := begin(t, "etcd restart")
	topic := topicName("e2e.etcd-restart")
	parts := c.createTopic(tl, topic, nil)
	defer c.deleteTopic(topic)

	led := newLedger(topic, 3)
	pr := newProducer(c, led, "etcd", client.ProducerOptions{DeliveryTimeout: 120 * time.Second})
	pr.run(10 * time.Millisecond)
	if _, err := led.waitAcks(0, 0, 30, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	dc, err := c.describeCluster()
	if err != nil {
		t.Fatal(err)
	}
	epochs := map[int32]int64{}
	for _, id := range aliveBrokers(dc) {
		epochs[id] = brokerEpoch(dc, id)
	}
	tl.mark("brokers %s alive, controller %d (controller_epoch %d)", ids(aliveBrokers(dc)), dc.GetController().GetId(), dc.GetControllerEpoch())

	tl.mark("docker stop etcd")
	stopAt := time.Now()
	s.stop(t, "etcd")
	tl.mark("etcd stopped %s after docker stop was issued", secs(time.Since(stopAt)))
	time.Sleep(time.Until(stopAt.Add(20 * time.Second))) // past the session timeout after its drain (up to 7 s)
	tl.mark("docker start etcd (down %s)", secs(time.Since(stopAt)))
	startAt := time.Now()
	s.startSvc(t, "etcd")
	dc2, took := c.waitCluster("a controller and every broker back", 60*time.Second, func(d *adminv1.DescribeClusterResponse) bool {
		return d.GetController().GetId() > 0 && d.GetControllerEpoch() > dc.GetControllerEpoch() && len(aliveBrokers(d)) == len(epochs)
	})
	tl.mark("controller %d active (controller_epoch %d) with brokers %s %s after docker start", dc2.GetController().GetId(),
		dc2.GetControllerEpoch(), ids(aliveBrokers(dc2)), secs(took))
	for id, e := range epochs {
		if got := brokerEpoch(dc2, id); got != e {
			t.Errorf("broker %d has epoch %d after the restart, want %d: it registered anew", id, got, e)
		}
	}
	after, err := c.describe(topic)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range after {
		if p.GetLeader() != parts[i].GetLeader() || p.GetLeaderEpoch() != parts[i].GetLeaderEpoch() {
			t.Errorf("p%d after the restart: leader %d epoch %d, want leader %d epoch %d (nothing elected)",
				i, p.GetLeader(), p.GetLeaderEpoch(), parts[i].GetLeader(), parts[i].GetLeaderEpoch())
		}
	}
	base := led.ackedOn(0)
	if d, err := led.waitAcks(0, base, 20, 30*time.Second); err != nil {
		t.Error(err)
	} else {
		tl.mark("writes to p0 go on: 20 more acknowledged %s later (%s after docker start)", secs(d), secs(time.Since(startAt)))
	}
	c.waitTopic(tl, topic, "every ISR full", rejoinBound, fullISR)
	settle(t, c, tl, pr, led, false)
	// Refused while every broker was fenced, the writes wait within their
	// delivery timeout (120 s) and go through once etcd is back.
	if _, f := led.counts(); f > 0 {
		t.Errorf("%d writes failed (%s) while etcd was away: the producer gave them up before its delivery timeout", f, led.failureCodes())
	}
}
