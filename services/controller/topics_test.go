package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// TestCreateTopicValidation checks every refusal of CreateTopics over gRPC,
// and that nothing is written for them or for validate_only.
func TestCreateTopicValidation(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "a.b", [][]int32{{1}}, nil)
	spec := func(name string, n, rf int32, cfg map[string]string) *adminv1.TopicSpec {
		return &adminv1.TopicSpec{Name: name, NumPartitions: n, ReplicationFactor: rf, Configs: cfg}
	}
	cases := []struct {
		spec *adminv1.TopicSpec
		want kerr.Code
		text string
	}{
		{spec("", 1, 1, nil), kerr.InvalidTopicException, "empty"},
		{spec("..", 1, 1, nil), kerr.InvalidTopicException, ".."},
		{spec("a/b", 1, 1, nil), kerr.InvalidTopicException, "a/b"},
		{spec(strings.Repeat("x", 250), 1, 1, nil), kerr.InvalidTopicException, "249"},
		{spec("a_b", 1, 1, nil), kerr.InvalidTopicException, "a.b"},
		{spec("a.b", 1, 1, nil), kerr.TopicAlreadyExists, "already exists"},
		{spec("rf", 3, 4, nil), kerr.InvalidReplicationFactor, "4"},
		{spec("parts", -2, 1, nil), kerr.InvalidPartitions, "partitions"},
		{spec("cfg1", 1, 1, map[string]string{"min.insync.replicas": "0"}), kerr.InvalidConfig, "min.insync.replicas"},
		{spec("cfg2", 1, 1, map[string]string{"no.such.key": "1"}), kerr.InvalidConfig, "no.such.key"},
		{spec("cfg3", 1, 1, map[string]string{"log.retention.ms": "1"}), kerr.InvalidConfig, "retention.ms"},
		{spec("cfg4", 1, 1, map[string]string{"segment.ms": "0"}), kerr.InvalidConfig, "segment.ms: value 0 is out of range [1, ...]"},
		{spec("cfg5", 1, 1, map[string]string{"segment.bytes": "100"}), kerr.InvalidConfig, "segment.bytes: value 100 is out of range [1024, ...]"},
		{spec("cfg6", 1, 1, map[string]string{"index.interval.bytes": "-1"}), kerr.InvalidConfig, "index.interval.bytes: value -1 is out of range [0, ...]"},
		{spec("cfg7", 1, 1, map[string]string{"message.timestamp.after.max.ms": "-5"}), kerr.InvalidConfig, "message.timestamp.after.max.ms: value -5 is out of range [0, ...]"},
		{spec("cfg8", 1, 1, map[string]string{"cleanup.policy": "shred"}), kerr.InvalidConfig, `cleanup.policy: value "shred" is not one of delete, compact`},
		{spec("cfg9", 1, 1, map[string]string{"min.cleanable.dirty.ratio": "2"}), kerr.InvalidConfig, "min.cleanable.dirty.ratio: value 2 is out of range [0, 1]"},
		{&adminv1.TopicSpec{Name: "asg", Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: []int32{1, 9}}}},
			kerr.InvalidReplicaAssignment, "9"},
		{spec("dup", 1, 1, nil), kerr.InvalidRequest, "more than once"},
		{spec("dup", 1, 1, nil), kerr.InvalidRequest, "more than once"},
	}
	req := &adminv1.CreateTopicsRequest{}
	for _, tc := range cases {
		req.Topics = append(req.Topics, tc.spec)
	}
	resp, err := c.admin(c1).CreateTopics(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		r := resp.GetResults()[i]
		if kerr.Code(r.GetErrorCode()) != tc.want || !strings.Contains(r.GetErrorMessage(), tc.text) {
			t.Errorf("topic %.20q: %v %q; want %v mentioning %q", tc.spec.GetName(), kerr.Code(r.GetErrorCode()), r.GetErrorMessage(), tc.want, tc.text)
		}
	}
	// validate_only answers with the placement and the effective configs.
	resp, err = c.admin(c1).CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{ValidateOnly: true,
		Topics: []*adminv1.TopicSpec{spec("v", 4, 3, map[string]string{"min.insync.replicas": "2"})}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResults()[0]; r.GetErrorCode() != 0 || r.GetNumPartitions() != 4 || r.GetReplicationFactor() != 3 ||
		len(r.GetAssignments()) != 4 || r.GetConfigs()["min.insync.replicas"] != "2" || r.GetConfigs()["retention.ms"] == "" {
		t.Fatalf("validate_only = %v", r)
	}
	// timeout_ms is bounded before anything is done.
	for ms, says := range map[int32]string{-1: "must not be negative, got -1", 300_001: "300001 is above request.timeout.max.ms 300000"} {
		_, err = c.admin(c1).CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{TimeoutMs: ms, Topics: []*adminv1.TopicSpec{spec("late", 1, 1, nil)}})
		if e := kerr.FromStatus(err); e == nil || e.Code != kerr.InvalidRequest || e.Field != "timeout_ms" || !strings.Contains(e.Message, says) {
			t.Fatalf("timeout_ms %d: %v, want INVALID_REQUEST on timeout_ms saying %q", ms, err, says)
		}
	}
	topics, _, err := c.store.Topics(ctx(t))
	if err != nil || len(topics) != 1 {
		t.Fatalf("topics in etcd = %v, %v; want only a.b", topics, err)
	}
	// Resources are answered one by one too.
	dc, err := c.admin(c1).DescribeConfigs(ctx(t), &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{
		{}, {Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "nope"}}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, dc.GetResults()[0].GetErrorCode(), kerr.InvalidRequest, "resource without a type")
	wantCode(t, dc.GetResults()[1].GetErrorCode(), kerr.UnknownTopicOrPartition, "unknown topic")
}

// TestTopicsConfigsAndWatch covers placement, DescribeTopics filters,
// configs and their push to brokers, deletion, and WatchCluster.
func TestTopicsConfigsAndWatch(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) { cfg.DefaultReplicationFactor = 3; cfg.NumPartitions = 6 })
	c.waitActive(c1, 5*time.Second)
	for id, rack := range map[int32]string{1: "r1", 2: "r2", 3: "r3", 4: "r1"} {
		c.startBroker(id, rack)
	}
	eventually(t, 5*time.Second, "4 brokers", func() bool {
		resp, err := c.admin(c1).DescribeCluster(ctx(t), &adminv1.DescribeClusterRequest{})
		return err == nil && len(resp.GetBrokers()) == 4
	})
	admin := c.admin(c1)
	watch, err := admin.WatchCluster(ctx(t), &adminv1.WatchClusterRequest{IntervalMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	first, err := watch.Recv()
	if err != nil || first.GetCluster().GetController().GetId() != 1 {
		t.Fatalf("first watch message = %v, %v", first, err)
	}

	// Defaults from the controller's flags; rack-aware placement.
	resp, err := admin.CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{TimeoutMs: 5000,
		Topics: []*adminv1.TopicSpec{{Name: "t", Configs: map[string]string{"min.insync.replicas": "2"}}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create = %v, %v", resp, err)
	}
	rackOf := map[int32]string{1: "r1", 2: "r2", 3: "r3", 4: "r1"}
	leaders := map[int32]int{}
	for _, a := range resp.GetResults()[0].GetAssignments() {
		racks := map[string]bool{}
		for _, r := range a.GetReplicas() {
			racks[rackOf[r]] = true
		}
		if len(a.GetReplicas()) != 3 || len(racks) != 3 {
			t.Fatalf("partition %d on %v spans racks %v", a.GetPartition(), a.GetReplicas(), racks)
		}
		leaders[a.GetReplicas()[0]]++
	}
	if len(resp.GetResults()[0].GetAssignments()) != 6 || len(leaders) < 3 {
		t.Fatalf("assignments %v, leaders %v", resp.GetResults()[0].GetAssignments(), leaders)
	}

	// Shrink p0 to its leader: under-replicated and under min ISR; p1 to
	// two: at min ISR.
	a0 := resp.GetResults()[0].GetAssignments()[0].GetReplicas()
	a1 := resp.GetResults()[0].GetAssignments()[1].GetReplicas()
	c.shrinkISR(c1, "t", 0, a0[0])
	c.shrinkISR(c1, "t", 1, a1[0], a1[1])
	describe := func(req *adminv1.DescribeTopicsRequest) []int32 {
		t.Helper()
		d, err := admin.DescribeTopics(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		var ps []int32
		for _, td := range d.GetTopics() {
			for _, p := range td.GetPartitions() {
				ps = append(ps, p.GetPartition())
			}
		}
		return ps
	}
	if got := describe(&adminv1.DescribeTopicsRequest{UnderReplicated: true}); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("under-replicated = %v", got)
	}
	if got := describe(&adminv1.DescribeTopicsRequest{UnderMinIsr: true}); !slices.Equal(got, []int32{0}) {
		t.Fatalf("under-min-isr = %v", got)
	}
	if got := describe(&adminv1.DescribeTopicsRequest{AtMinIsr: true}); !slices.Equal(got, []int32{1}) {
		t.Fatalf("at-min-isr = %v", got)
	}
	if got := describe(&adminv1.DescribeTopicsRequest{Unavailable: true}); len(got) != 0 {
		t.Fatalf("unavailable = %v", got)
	}
	d, err := admin.DescribeTopics(ctx(t), &adminv1.DescribeTopicsRequest{Topics: []string{"t", "nope"}, IncludeConfigs: true})
	if err != nil || d.GetTopics()[0].GetConfigs()["min.insync.replicas"] != "2" || d.GetTopics()[0].GetReplicationFactor() != 3 ||
		kerr.Code(d.GetTopics()[1].GetErrorCode()) != kerr.UnknownTopicOrPartition {
		t.Fatalf("describe with configs = %v, %v", d, err)
	}

	// Configs: sources, and dynamic changes reach the brokers at once.
	if r, err := admin.AlterConfigs(ctx(t), setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, "", "log.retention.ms", "5000")); err != nil || r.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter broker default = %v, %v", r, err)
	}
	if r, err := admin.AlterConfigs(ctx(t), setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "t", "min.insync.replicas", "3")); err != nil || r.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter topic = %v, %v", r, err)
	}
	for _, bad := range []*adminv1.AlterConfigsRequest{
		setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, "", "auto.leader.rebalance.enable", "false"),
		setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "t", "min.insync.replicas", "x"),
		setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, "x", "log.retention.ms", "1"),
	} {
		r, err := admin.AlterConfigs(ctx(t), bad)
		if err != nil || r.GetResults()[0].GetErrorCode() == 0 {
			t.Fatalf("bad alter accepted: %v, %v", r, err)
		}
	}
	// A resource named twice is refused in every copy, and a key named twice
	// in one resource refuses it, as Kafka's ConfigAdminManager does.
	dup := setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "t", "retention.ms", "1000")
	dup.Resources = append(dup.Resources, setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, "t", "retention.ms", "2000").GetResources()...)
	twice := setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, "", "log.retention.ms", "1000")
	twice.Resources[0].Ops = append(twice.Resources[0].Ops, twice.Resources[0].Ops[0])
	dup.Resources = append(dup.Resources, twice.GetResources()...)
	if r, err := admin.AlterConfigs(ctx(t), dup); err != nil || len(r.GetResults()) != 3 {
		t.Fatalf("alter with duplicates: %v, %v", r, err)
	} else {
		for i, res := range r.GetResults() {
			wantCode(t, res.GetErrorCode(), kerr.InvalidRequest, "more than once")
			if !strings.Contains(res.GetErrorMessage(), "more than once") {
				t.Fatalf("result %d: %q", i, res.GetErrorMessage())
			}
		}
	}
	// Limits and quotas are bounded like every other key, naming key, value and bound.
	for _, tc := range []struct{ key, value, says string }{
		{"fetch.max.bytes", "10", "fetch.max.bytes: value 10 is out of range [1024, ...]"},
		{"quota.producer.overrides", "alice", `quota.producer.overrides: "alice" is not principal:bytesPerSecond`},
		{"quota.window.num", "5", "quota.window.num: cannot be changed at runtime"},
	} {
		r, err := admin.AlterConfigs(ctx(t), setConfig(adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, "", tc.key, tc.value))
		if err != nil || len(r.GetResults()) != 1 {
			t.Fatalf("alter %s: %v, %v", tc.key, r, err)
		}
		wantCode(t, r.GetResults()[0].GetErrorCode(), kerr.InvalidConfig, tc.says)
		if msg := r.GetResults()[0].GetErrorMessage(); !strings.Contains(msg, tc.says) {
			t.Fatalf("alter %s=%s: message %q does not say %q", tc.key, tc.value, msg, tc.says)
		}
	}
	dc, err := admin.DescribeConfigs(ctx(t), &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{
		{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"},
		{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: "2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]adminv1.ConfigSource{}
	values := map[string]string{}
	for _, res := range dc.GetResults() {
		for _, e := range res.GetEntries() {
			sources[res.GetResource().GetName()+"/"+e.GetName()] = e.GetSource()
			values[res.GetResource().GetName()+"/"+e.GetName()] = e.GetValue()
		}
	}
	if sources["t/min.insync.replicas"] != adminv1.ConfigSource_CONFIG_SOURCE_TOPIC || values["t/min.insync.replicas"] != "3" ||
		sources["t/retention.ms"] != adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER || values["t/retention.ms"] != "5000" ||
		sources["t/segment.bytes"] != adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT ||
		sources["2/log.retention.ms"] != adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER ||
		values["2/num.partitions"] != "6" {
		t.Fatalf("config sources = %v values = %v", sources, values)
	}
	eventually(t, 10*time.Second, "brokers got the new configs", func() bool {
		for _, b := range c.brokers {
			um := b.lastUpdate()
			if um == nil || um.GetBrokerConfigs()["log.retention.ms"] != "5000" {
				return false
			}
			var ok bool
			for _, tc := range um.GetTopicConfigs() {
				ok = ok || tc.GetTopic() == "t" && tc.GetConfigs()["min.insync.replicas"] == "3" && tc.GetConfigs()["retention.ms"] == "5000"
			}
			if !ok {
				return false
			}
		}
		return true
	})

	// WatchCluster: replica positions as brokers reported them, and events.
	kinds := map[controlv1.EventKind]bool{}
	for _, ev := range first.GetEvents() {
		kinds[ev.GetKind()] = true
	}
	deadline := time.Now().Add(5 * time.Second)
	var view *adminv1.PartitionView
	for time.Now().Before(deadline) {
		msg, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range msg.GetEvents() {
			kinds[ev.GetKind()] = true
		}
		for _, p := range msg.GetPartitions() {
			if p.GetTopic() == "t" && p.GetPartition() == 1 {
				view = p
			}
		}
		if kinds[controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED] && view != nil && view.GetHighWatermark() == 100 &&
			view.GetReplicaViews()[1].GetLagMs() == 7 && view.GetMinInsyncReplicas() == 3 {
			break
		}
	}
	for _, k := range []controlv1.EventKind{controlv1.EventKind_EVENT_KIND_CONTROLLER_CHANGE, controlv1.EventKind_EVENT_KIND_BROKER_UP,
		controlv1.EventKind_EVENT_KIND_TOPIC_CREATED, controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED,
		controlv1.EventKind_EVENT_KIND_HW_ADVANCE /* sent by the brokers */} {
		if !kinds[k] {
			t.Errorf("watch never reported %v (saw %v)", k, kinds)
		}
	}
	if view == nil || !view.GetUnderReplicated() || !view.GetUnderMinIsr() || view.GetMinInsyncReplicas() != 3 ||
		view.GetHighWatermark() != 100 || !view.GetHighWatermarkKnown() || !view.GetReplicaViews()[0].GetReported() ||
		view.GetReplicaViews()[0].GetLogEndOffset() != 100+int64(a1[0]) ||
		!view.GetReplicaViews()[0].GetLeader() || view.GetReplicaViews()[2].GetInIsr() || view.GetReplicaViews()[1].GetLagMs() != 7 {
		t.Fatalf("watch view of t-1 = %v", view)
	}
	// A follower's LEO twice: as it reports it, and as its leader knows it
	// (the fake leader reports follower r at 100+r); the leader has no such view.
	if f := view.GetReplicaViews()[1]; f.LeaderKnownLogEndOffset == nil || f.GetLeaderKnownLogEndOffset() != 100+int64(f.GetBrokerId()) ||
		view.GetReplicaViews()[0].LeaderKnownLogEndOffset != nil {
		t.Fatalf("leader-known LEOs of t-1: follower %v, leader %v; want the follower's from its leader's report, none for the leader",
			f, view.GetReplicaViews()[0])
	}

	// Deletion stops and deletes the replicas, then the metadata.
	del, err := admin.DeleteTopics(ctx(t), &adminv1.DeleteTopicsRequest{Topics: []string{"t", "nope"}, TimeoutMs: 5000})
	if err != nil || del.GetResults()[0].GetErrorCode() != 0 || kerr.Code(del.GetResults()[1].GetErrorCode()) != kerr.UnknownTopicOrPartition {
		t.Fatalf("delete = %v, %v", del, err)
	}
	if topics, _, err := c.store.Topics(ctx(t)); err != nil || len(topics) != 0 {
		t.Fatalf("topics after delete = %v, %v", topics, err)
	}
	for id, b := range c.brokers {
		var deleted int
		for _, sr := range b.stopReplicas() {
			for _, p := range sr.GetPartitions() {
				if p.GetDelete() && p.GetLeaderEpoch() == -1 {
					deleted++
				}
			}
		}
		if want := b.hosted(resp.GetResults()[0].GetAssignments()); deleted != want {
			t.Errorf("broker %d deleted %d replicas, hosts %d", id, deleted, want)
		}
	}
	eventually(t, 10*time.Second, "brokers told the topic is gone", func() bool {
		for _, b := range c.brokers {
			if um := b.lastUpdate(); um == nil || !slices.Contains(um.GetDeletedTopics(), "t") {
				return false
			}
		}
		return true
	})
}

// hosted counts the partitions of an assignment with a replica on b.
func (b *fakeBroker) hosted(asg []*adminv1.ReplicaAssignment) int {
	n := 0
	for _, a := range asg {
		if slices.Contains(a.GetReplicas(), b.id) {
			n++
		}
	}
	return n
}

// Every topic of a request whose leaders do not confirm within timeout_ms
// is answered REQUEST_TIMED_OUT at that deadline. The deadline was a timer,
// whose one tick went to the first topic's wait: the second waited for
// its caller's own deadline (10 s here), which failed the whole call.
func TestCreateTopicsTimeoutHoldsForEveryTopic(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	for _, b := range c.brokers {
		b.stalled.Store(true)
	}
	resp, err := c.admin(c1).CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{TimeoutMs: 300,
		Topics: []*adminv1.TopicSpec{{Name: "slow1", NumPartitions: 1, ReplicationFactor: 3}, {Name: "slow2", NumPartitions: 1, ReplicationFactor: 3}}})
	if err != nil {
		t.Fatalf("a create of two topics whose leaders are silent: %v, want each answered REQUEST_TIMED_OUT", err)
	}
	for _, r := range resp.GetResults() {
		wantCode(t, r.GetErrorCode(), kerr.RequestTimedOut, r.GetName()+"'s leaders silent")
	}
}

// TestCreateTopicsTimeout: with timeout_ms, a topic whose leaders do not
// confirm in time is answered REQUEST_TIMED_OUT; the topic is created all
// the same (Kafka's semantics), and a second create finds it.
func TestCreateTopicsTimeout(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	for _, b := range c.brokers {
		b.stalled.Store(true)
	}
	admin := c.admin(c1)
	resp, err := admin.CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{TimeoutMs: 300,
		Topics: []*adminv1.TopicSpec{{Name: "slow", NumPartitions: 1, ReplicationFactor: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, resp.GetResults()[0].GetErrorCode(), kerr.RequestTimedOut, "leaders silent")
	for _, b := range c.brokers {
		b.stalled.Store(false)
	}
	resp, err = admin.CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{
		Topics: []*adminv1.TopicSpec{{Name: "slow", NumPartitions: 1, ReplicationFactor: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, resp.GetResults()[0].GetErrorCode(), kerr.TopicAlreadyExists, "the timed-out create stood")
}

// A topic named twice in one CreatePartitions is refused in every copy and
// not grown, as Kafka does. The first copy grew it while the second was
// refused.
func TestCreatePartitionsOfATopicNamedTwiceChangesNothing(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	admin := c.admin(c1)
	if _, err := admin.CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{
		Topics: []*adminv1.TopicSpec{{Name: "twice", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := admin.CreatePartitions(ctx(t), &adminv1.CreatePartitionsRequest{
		Topics: []*adminv1.CreatePartitionsTopic{{Name: "twice", Count: 3}, {Name: "twice", Count: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.GetResults() {
		wantCode(t, r.GetErrorCode(), kerr.InvalidRequest, "a topic named twice")
	}
	d, err := admin.DescribeTopics(ctx(t), &adminv1.DescribeTopicsRequest{Topics: []string{"twice"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.GetTopics()[0].GetPartitions()); n != 1 {
		t.Fatalf("the topic has %d partitions after the refused request, want 1", n)
	}
}

// A CreateTopics naming both counts and an assignment is refused, as
// Kafka refuses it, and creates nothing. The counts were silently ignored:
// three partitions asked, one assigned, a topic of one partition created.
func TestCreateTopicsWithCountsAndAnAssignmentIsRefused(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	resp, err := c.admin(c1).CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{{Name: "both", NumPartitions: 3,
		Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, resp.GetResults()[0].GetErrorCode(), kerr.InvalidRequest, "counts and an assignment")
	d, err := c.admin(c1).DescribeTopics(ctx(t), &adminv1.DescribeTopicsRequest{Topics: []string{"both"}})
	if err == nil && len(d.GetTopics()) > 0 && len(d.GetTopics()[0].GetPartitions()) > 0 {
		t.Fatalf("the refused topic was created: %v", d.GetTopics()[0])
	}
}

// A negative interval_ms is refused INVALID_REQUEST naming the field; it
// was taken as the default, so a caller's sign error went unnoticed.
func TestWatchClusterRefusesANegativeInterval(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	watch, err := c.admin(c1).WatchCluster(ctx(t), &adminv1.WatchClusterRequest{IntervalMs: -5})
	if err == nil {
		_, err = watch.Recv()
	}
	if e := kerr.FromStatus(err); e.Code != kerr.InvalidRequest || !strings.Contains(e.Message, "interval_ms") {
		t.Fatalf("watch with interval_ms -5: %v; want INVALID_REQUEST naming interval_ms", err)
	}
}
