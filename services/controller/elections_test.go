package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// shrinkISR has the partition's leader commit a smaller ISR through
// AlterPartition, as its ISR expiration would.
func (c *cluster) shrinkISR(ctl *testController, topic string, p int32, isr ...int32) {
	c.t.Helper()
	c.alterISR(ctl, topic, p, kerr.None, isr...)
}

// alterISR sends the leader's AlterPartition for the current state and
// checks the partition's answer code.
func (c *cluster) alterISR(ctl *testController, topic string, p int32, want kerr.Code, isr ...int32) *controlv1.AlterPartitionResult {
	c.t.Helper()
	s := c.state(topic, p)
	item := &controlv1.AlterPartitionItem{Topic: topic, Partition: p, LeaderEpoch: s.LeaderEpoch, PartitionEpoch: s.PartitionEpoch}
	for _, id := range isr {
		item.NewIsr = append(item.NewIsr, &controlv1.IsrMember{BrokerId: id, BrokerEpoch: c.brokers[id].brokerEpoch()})
	}
	resp, err := c.control(ctl).AlterPartition(ctx(c.t), &controlv1.AlterPartitionRequest{
		BrokerId: s.Leader, BrokerEpoch: c.brokers[s.Leader].brokerEpoch(), Partitions: []*controlv1.AlterPartitionItem{item}})
	if err != nil {
		c.t.Fatalf("AlterPartition %s-%d: %v", topic, p, err)
	}
	r := resp.GetPartitions()[0]
	wantCode(c.t, r.GetErrorCode(), want, "AlterPartition "+topic)
	return r
}

func setConfig(typ adminv1.ConfigResourceType, name, key, value string) *adminv1.AlterConfigsRequest {
	return &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: typ, Name: name},
		Ops:      []*adminv1.ConfigOp{{Name: key, Value: value, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}},
	}}}
}

// TestUncleanLeaderElection: with no live ISR member a partition stays
// offline (leader -1, the ISR keeps its last member) unless
// unclean.leader.election.enable holds, by topic or as the dynamic broker
// default; then the first live out-of-sync replica leads alone. Turning the
// flag on at run time acts at once.
func TestUncleanLeaderElection(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	asg := [][]int32{{1, 3, 2}}
	c.createTopic(c1, "off", asg, nil)
	c.createTopic(c1, "on", asg, map[string]string{"unclean.leader.election.enable": "true"})
	c.createTopic(c1, "bydefault", asg, nil)
	for _, topic := range []string{"off", "on", "bydefault"} {
		c.shrinkISR(c1, topic, 0, 1)
	}

	c.brokers[1].deregister()
	on := c.waitState("on", 0, 3*time.Second, "unclean election at failure", func(s metastore.PartitionState) bool { return s.Leader != 1 })
	if on.Leader != 3 || !slices.Equal(on.ISR, []int32{3}) || on.LeaderEpoch != 1 {
		t.Fatalf("on-0 = %+v; want the first live assigned replica (3) leading alone", on)
	}
	for _, topic := range []string{"off", "bydefault"} {
		s := c.waitState(topic, 0, 3*time.Second, "offline", func(s metastore.PartitionState) bool { return s.Leader == -1 })
		if !slices.Equal(s.ISR, []int32{1}) || s.LeaderEpoch != 1 {
			t.Fatalf("%s-0 = %+v; want leader -1 with the ISR keeping [1]", topic, s)
		}
	}
	eventually(t, 10*time.Second, "replicas told the partition is offline", func() bool {
		r := c.brokers[3].role("off", 0)
		return r != nil && r.GetLeader() == -1 && r.GetLeaderEpoch() == 1
	})
	eventually(t, time.Second, "offline partitions counted", func() bool {
		return metric(t, c1, "tidemark_controller_offline_partitions_count") == 2
	})
	desc, err := c.admin(c1).DescribeTopics(ctx(t), &adminv1.DescribeTopicsRequest{Unavailable: true})
	if err != nil || len(desc.GetTopics()) != 2 || desc.GetTopics()[0].GetName() != "bydefault" || desc.GetTopics()[1].GetName() != "off" {
		t.Fatalf("unavailable partitions = %v, %v", desc, err)
	}
	if n := c.logs.count("Unclean leader election", "partition=on-0"); n != 1 {
		t.Fatalf("%d unclean election log lines for on-0", n)
	}

	// Turning it on for the topic acts at once.
	if resp, err := c.admin(c1).AlterConfigs(ctx(t), setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC,
		"off", "unclean.leader.election.enable", "true")); err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter: %v %v", resp, err)
	}
	off := c.waitState("off", 0, 2*time.Second, "unclean election after the flip", func(s metastore.PartitionState) bool { return s.Leader != -1 })
	if off.Leader != 3 || !slices.Equal(off.ISR, []int32{3}) || off.LeaderEpoch != 2 {
		t.Fatalf("off-0 after enabling = %+v", off)
	}
	if s := c.state("bydefault", 0); s.Leader != -1 {
		t.Fatalf("bydefault-0 elected by another topic's flag: %+v", s)
	}
	// And so does the cluster-wide dynamic default.
	if resp, err := c.admin(c1).AlterConfigs(ctx(t), setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER,
		"", "unclean.leader.election.enable", "true")); err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter default: %v %v", resp, err)
	}
	c.waitState("bydefault", 0, 2*time.Second, "unclean election by the broker default", func(s metastore.PartitionState) bool {
		return s.Leader == 3 && slices.Equal(s.ISR, []int32{3})
	})
	eventually(t, 10*time.Second, "replica 3 told it leads", func() bool {
		r := c.brokers[3].role("bydefault", 0)
		return r != nil && r.GetLeader() == 3
	})
	if n := c.logs.count("Unclean leader election"); n != 3 {
		t.Fatalf("%d unclean election log lines, want 3", n)
	}
	if v := metric(t, c1, "tidemark_controller_unclean_leader_elections_total"); v != 3 {
		t.Fatalf("unclean elections metric = %v, want 3", v)
	}
	// The broker that had everything comes back as a follower: the unclean
	// leader's log wins (F20).
	c.brokers[1].register()
	time.Sleep(200 * time.Millisecond)
	if s := c.state("off", 0); s.Leader != 3 {
		t.Fatalf("off-0 after broker 1 returned = %+v", s)
	}
}

// TestPreferredLeaderElection runs ElectLeaders PREFERRED and UNCLEAN on
// request, with Kafka's per-partition answers.
func TestPreferredLeaderElection(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) { cfg.AutoLeaderRebalance = false })
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "t", [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
	c.brokers[1].deregister()
	c.waitState("t", 0, 3*time.Second, "leader 2", func(s metastore.PartitionState) bool { return s.Leader == 2 })
	c.brokers[1].register()
	eventually(t, 10*time.Second, "broker 1 back", func() bool { return c.brokers[1].fullUpdates(1) > 1 })

	elect := func(typ adminv1.ElectionType, parts ...*commonv1.TopicPartition) []*adminv1.ElectLeadersResult {
		resp, err := c.admin(c1).ElectLeaders(ctx(t), &adminv1.ElectLeadersRequest{ElectionType: typ, Partitions: parts})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetResults()
	}
	t0 := &commonv1.TopicPartition{Topic: "t", Partition: 0}
	t1 := &commonv1.TopicPartition{Topic: "t", Partition: 1}
	// Broker 1 is back but not in the ISR yet.
	r := elect(adminv1.ElectionType_ELECTION_TYPE_PREFERRED, t0, t1, &commonv1.TopicPartition{Topic: "nope"})
	wantCode(t, r[0].GetErrorCode(), kerr.PreferredLeaderNotAvailable, "preferred replica out of the ISR")
	wantCode(t, r[1].GetErrorCode(), kerr.ElectionNotNeeded, "preferred replica leads")
	wantCode(t, r[2].GetErrorCode(), kerr.UnknownTopicOrPartition, "unknown partition")
	if r[0].GetLeader() != 2 {
		t.Fatalf("result names leader %d", r[0].GetLeader())
	}
	wantCode(t, elect(adminv1.ElectionType_ELECTION_TYPE_UNCLEAN, t0)[0].GetErrorCode(), kerr.ElectionNotNeeded, "unclean with a live leader")

	c.alterISR(c1, "t", 0, kerr.None, 2, 3, 1) // the leader lets it back in
	before := c.state("t", 0)
	r = elect(adminv1.ElectionType_ELECTION_TYPE_PREFERRED, t0)
	wantCode(t, r[0].GetErrorCode(), kerr.None, "preferred election")
	after := c.state("t", 0)
	if r[0].GetLeader() != 1 || after.Leader != 1 || after.LeaderEpoch != before.LeaderEpoch+1 || !slices.Equal(after.ISR, before.ISR) {
		t.Fatalf("after preferred election %+v (was %+v), result %v", after, before, r[0])
	}
	eventually(t, 10*time.Second, "brokers told", func() bool {
		for _, b := range c.brokers {
			if r := b.role("t", 0); r == nil || r.GetLeader() != 1 {
				return false
			}
		}
		return true
	})
	// All partitions: only those that needed an election are listed.
	resp, err := c.admin(c1).ElectLeaders(ctx(t), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED, AllPartitions: true})
	if err != nil || len(resp.GetResults()) != 0 {
		t.Fatalf("all partitions, all balanced = %v, %v", resp, err)
	}
	_, err = c.admin(c1).ElectLeaders(ctx(t), &adminv1.ElectLeadersRequest{Partitions: []*commonv1.TopicPartition{t0}})
	if d := detail(t, err); d.Code != kerr.InvalidRequest || d.Field != "election_type" {
		t.Fatalf("missing election type = %+v", d)
	}
}

// TestElectLeadersTimeout: with timeout_ms, an election whose new leader
// does not confirm in time is answered REQUEST_TIMED_OUT, and stands.
func TestElectLeadersTimeout(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) { cfg.AutoLeaderRebalance = false })
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "t", [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
	c.brokers[1].deregister()
	c.waitState("t", 0, 3*time.Second, "leader 2", func(s metastore.PartitionState) bool { return s.Leader == 2 })
	c.brokers[1].register()
	eventually(t, 10*time.Second, "broker 1 back", func() bool { return c.brokers[1].fullUpdates(1) > 1 })
	c.alterISR(c1, "t", 0, kerr.None, 2, 3, 1)

	c.brokers[1].stalled.Store(true)
	resp, err := c.admin(c1).ElectLeaders(ctx(t), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED, TimeoutMs: 300,
		Partitions: []*commonv1.TopicPartition{{Topic: "t", Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResults()[0]
	wantCode(t, r.GetErrorCode(), kerr.RequestTimedOut, "new leader silent")
	if !strings.Contains(r.GetErrorMessage(), "broker 1") {
		t.Errorf("timeout message %q does not name the leader", r.GetErrorMessage())
	}
	if s := c.state("t", 0); s.Leader != 1 {
		t.Fatalf("the timed-out election did not stand: %+v", s)
	}

	// A confirmed election answers without error within the timeout.
	c.brokers[1].stalled.Store(false)
	c.brokers[2].deregister()
	c.waitState("t", 1, 3*time.Second, "leader 3", func(s metastore.PartitionState) bool { return s.Leader == 3 })
	c.brokers[2].register()
	eventually(t, 10*time.Second, "broker 2 back", func() bool { return c.brokers[2].fullUpdates(1) > 1 })
	c.alterISR(c1, "t", 1, kerr.None, 3, 1, 2)
	resp, err = c.admin(c1).ElectLeaders(ctx(t), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED, TimeoutMs: 5000,
		Partitions: []*commonv1.TopicPartition{{Topic: "t", Partition: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, resp.GetResults()[0].GetErrorCode(), kerr.None, "confirmed election")
}

// leaderOffItsPreferredReplica starts 3 brokers and leaves topic t's
// partition 0 led by broker 2 with broker 1, its preferred replica, back in
// the ISR: imbalanced, as a broker's restart leaves it.
func (c *cluster) leaderOffItsPreferredReplica(ctl *testController) {
	c.t.Helper()
	c.startBrokers(ctl, 3)
	c.createTopic(ctl, "t", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	c.brokers[1].deregister()
	c.waitState("t", 0, 3*time.Second, "leader 2", func(s metastore.PartitionState) bool { return s.Leader == 2 })
	c.brokers[1].register()
	eventually(c.t, 10*time.Second, "broker 1 back", func() bool { return c.brokers[1].fullUpdates(1) > 1 })
	c.alterISR(ctl, "t", 0, kerr.None, 2, 3, 1)
}

// TestAutoLeaderRebalance: leadership returns to the preferred replica on
// its own once the imbalance check runs (F21).
func TestAutoLeaderRebalance(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) { cfg.LeaderImbalanceCheckInterval = time.Second })
	c.waitActive(c1, 5*time.Second)
	c.leaderOffItsPreferredReplica(c1)
	s := c.waitState("t", 0, 3*time.Second, "rebalanced to the preferred replica", func(s metastore.PartitionState) bool { return s.Leader == 1 })
	if s.LeaderEpoch != 2 {
		t.Fatalf("t-0 after rebalance = %+v", s)
	}
	if c.logs.count("Leader imbalance over the threshold") == 0 {
		t.Fatal("no rebalance log line")
	}
}

// TestANewControllerChecksTheLeaderBalanceSoonAfterItTakesOver: a
// controller that takes over runs its first auto leader rebalance check 5 s
// later, as Kafka's onControllerFailover schedules it, not a whole
// leader.imbalance.check.interval.seconds (300 s) later: a cluster restarted
// whole came back led by the broker that registered first and stayed so for
// 5 minutes.
func TestANewControllerChecksTheLeaderBalanceSoonAfterItTakesOver(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) { cfg.AutoLeaderRebalance = false })
	c.waitActive(c1, 5*time.Second)
	c.leaderOffItsPreferredReplica(c1)

	// Controller 2 has Kafka's default interval, 300 s.
	c2 := c.startController(2)
	c1.kill()
	c.waitActive(c2, ctrlTTL+3*time.Second)
	took := time.Now()
	s := c.waitState("t", 0, 15*time.Second, "rebalanced to the preferred replica by the new controller",
		func(s metastore.PartitionState) bool { return s.Leader == 1 })
	t.Logf("the new controller's first check moved t-0 back to broker 1 %s after it took over", time.Since(took).Round(time.Millisecond))
	if s.ControllerEpoch != 2 {
		t.Fatalf("t-0 after the rebalance = %+v, want written by controller epoch 2", s)
	}
}

// TestControlledShutdown moves a stopping broker's leaderships to other ISR
// members, takes it out of the ISRs it follows in (with StopReplica), keeps
// it from rejoining, and reports what it still leads.
func TestControlledShutdown(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) { cfg.AutoLeaderRebalance = false })
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "t", [][]int32{{1, 3, 2}, {2, 1, 3}, {1, 2, 3}}, nil)
	c.createTopic(c1, "solo", [][]int32{{1}}, nil)
	c.shrinkISR(c1, "t", 2, 1) // t-2: nobody else in sync, it cannot move

	b1 := c.brokers[1]
	resp, err := c.control(c1).ControlledShutdown(ctx(t), &controlv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: b1.brokerEpoch()})
	if err != nil {
		t.Fatal(err)
	}
	if rem := resp.GetRemainingPartitions(); len(rem) != 1 || rem[0].GetTopic() != "t" || rem[0].GetPartition() != 2 {
		t.Fatalf("remaining = %v; want only t-2 (single-replica topics are not reported)", rem)
	}
	if s := c.state("t", 0); s.Leader != 3 || !slices.Equal(s.ISR, []int32{3, 2}) || s.LeaderEpoch != 1 {
		t.Fatalf("t-0 = %+v; want leader 3 (next live ISR member in assignment order), ISR without 1", s)
	}
	if s := c.state("t", 1); s.Leader != 2 || !slices.Equal(s.ISR, []int32{2, 3}) {
		t.Fatalf("t-1 = %+v; want broker 1 out of the ISR", s)
	}
	if s := c.state("solo", 0); s.Leader != 1 {
		t.Fatalf("solo-0 = %+v", s)
	}
	eventually(t, 10*time.Second, "stopping broker told", func() bool {
		r := b1.role("t", 0)
		var stopped bool
		for _, sr := range b1.stopReplicas() {
			for _, p := range sr.GetPartitions() {
				stopped = stopped || p.GetTopic() == "t" && p.GetPartition() == 1 && !p.GetDelete()
			}
		}
		return r != nil && r.GetLeader() == 3 && stopped
	})
	cl, err := c.admin(c1).DescribeCluster(ctx(t), &adminv1.DescribeClusterRequest{})
	if err != nil || !cl.GetBrokers()[0].GetShuttingDown() || cl.GetBrokers()[1].GetShuttingDown() {
		t.Fatalf("DescribeCluster = %v, %v", cl, err)
	}
	// The other brokers learn the mark, so their leaders do not propose it,
	// and the new leader of t-0 learns it before its leadership.
	eventually(t, 10*time.Second, "shutting-down mark sent to the other brokers", func() bool {
		return shuttingDownIn(c.brokers[2].lastUpdate(), 1)
	})
	// Each broker has its own queue: broker 3's LeaderAndIsr may still be on its way.
	eventually(t, 10*time.Second, "broker 3 told it leads t-0", func() bool {
		r := c.brokers[3].role("t", 0)
		return r != nil && r.GetLeader() == 3
	})
	if !c.brokers[3].markedBeforeLeading("t", 0, 1) {
		t.Fatal("broker 3 became leader of t-0 before it learnt that broker 1 is shutting down")
	}
	// It may not rejoin an ISR while shutting down (KIP-841).
	c.alterISR(c1, "t", 1, kerr.IneligibleReplica, 2, 3, 1)
	// A retry changes nothing more.
	resp, err = c.control(c1).ControlledShutdown(ctx(t), &controlv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: b1.brokerEpoch()})
	if err != nil || len(resp.GetRemainingPartitions()) != 1 {
		t.Fatalf("retry = %v, %v", resp, err)
	}
	// Coming back clears the mark.
	b1.deregister()
	b1.register()
	eventually(t, 10*time.Second, "shutting-down mark cleared", func() bool {
		cl, err := c.admin(c1).DescribeCluster(ctx(t), &adminv1.DescribeClusterRequest{})
		return err == nil && cl.GetBrokers()[0].GetAlive() && !cl.GetBrokers()[0].GetShuttingDown() &&
			!shuttingDownIn(c.brokers[2].lastUpdate(), 1)
	})
	c.alterISR(c1, "t", 1, kerr.None, 2, 3, 1)
}

// shuttingDownIn reports whether an UpdateMetadata lists broker id as
// registered and in controlled shutdown.
func shuttingDownIn(um *controlv1.UpdateMetadataRequest, id int32) bool {
	for _, b := range um.GetBrokers() {
		if b.GetNode().GetId() == id {
			return b.GetShuttingDown()
		}
	}
	return false
}

// TestPreferredElectionWaitsForTheLeaderToYield: a preferred election first
// asks the current leader to yield; a leader that does not answer within
// the request timeout (stalled here; cut off, in life) keeps the
// partition, the answer says so, and once it answers again it gets the
// yield and then the resume, in that order. A leader that answers yields
// and the election is written.
func TestPreferredElectionWaitsForTheLeaderToYield(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) { cfg.AutoLeaderRebalance = false })
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "t", [][]int32{{1, 2, 3}}, nil)
	c.brokers[1].deregister()
	c.waitState("t", 0, 3*time.Second, "leader 2", func(s metastore.PartitionState) bool { return s.Leader == 2 })
	c.brokers[1].register()
	eventually(t, 10*time.Second, "broker 1 back", func() bool { return c.brokers[1].fullUpdates(1) > 1 })
	c.alterISR(c1, "t", 0, kerr.None, 2, 3, 1)
	before := c.state("t", 0)
	preferred := []*commonv1.TopicPartition{{Topic: "t", Partition: 0}}

	c.brokers[2].stalled.Store(true)
	start := time.Now()
	resp, err := c.admin(c1).ElectLeaders(ctx(t), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED, Partitions: preferred})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResults()[0]
	wantCode(t, r.GetErrorCode(), kerr.RequestTimedOut, "leader silent")
	if !strings.Contains(r.GetErrorMessage(), "broker 2") || r.GetLeader() != 2 {
		t.Errorf("answer %v does not name broker 2 as the leader that did not yield", r)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("answered after %s, before the 2s request timeout", took)
	}
	if s := c.state("t", 0); s.Leader != 2 || s.LeaderEpoch != before.LeaderEpoch {
		t.Fatalf("the partition moved although its leader did not yield: %+v (was %+v)", s, before)
	}
	if v := labelled(t, c1, "tidemark_controller_leader_yields_total", "outcome", "timed_out"); v != 1 {
		t.Errorf("timed-out yields metric = %v, want 1", v)
	}
	c.brokers[2].stalled.Store(false)
	eventually(t, 10*time.Second, "the queued yield and resume delivered", func() bool { return len(c.brokers[2].yieldRequests()) >= 2 })
	ys := c.brokers[2].yieldRequests()
	if ys[0].GetResume() || !ys[1].GetResume() || ys[1].GetPartitions()[0].GetLeaderEpoch() != before.LeaderEpoch {
		t.Fatalf("yield requests %v: want the yield, then its resume at leader epoch %d", ys, before.LeaderEpoch)
	}

	resp, err = c.admin(c1).ElectLeaders(ctx(t), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED, Partitions: preferred})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, resp.GetResults()[0].GetErrorCode(), kerr.None, "leader answering")
	if s := c.state("t", 0); s.Leader != 1 || s.LeaderEpoch != before.LeaderEpoch+1 {
		t.Fatalf("after the yield: %+v, want leader 1 at leader epoch %d", s, before.LeaderEpoch+1)
	}
	if v := labelled(t, c1, "tidemark_controller_leader_yields_total", "outcome", "yielded"); v != 1 {
		t.Errorf("yielded metric = %v, want 1", v)
	}
}
