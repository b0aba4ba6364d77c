package groups

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

func startGroupCluster(t *testing.T) *clustertest.Cluster {
	t.Helper()
	return clustertest.Start(t, clustertest.Options{Brokers: 3, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3)})
}

func wantCode(t *testing.T, what string, err error, want kerr.Code) {
	t.Helper()
	if got := kerr.CodeOf(err); got != want {
		t.Fatalf("%s: got %v, want %s", what, err, want)
	}
}

// A commit is written with acks=all to the group's __consumer_offsets
// partition; killing the coordinator's broker moves the group to the new
// leader of that partition, which loads it: nothing committed is lost, and
// the member carries on in its generation (the group metadata was loaded
// too). Then the new coordinator is restarted twice in quick succession,
// with the same outcome.
func TestGroupCommitSurvivesCoordinatorCrash(t *testing.T) {
	c := startGroupCluster(t)
	c.CreateTopic("orders", 3, 3, nil)
	g := clustertest.Groups{C: c}
	j := g.Join("billing", "", 10*time.Second)
	if j.GetGenerationId() != 1 || j.GetLeader() != j.GetMemberId() || len(j.GetMembers()) != 1 {
		t.Fatalf("join answer %v", j)
	}
	g.SyncAlone("billing", j, "")
	want := map[int32]int64{0: 10, 1: 20, 2: 30}
	if err := g.Commit("billing", j.GetGenerationId(), j.GetMemberId(), "", want); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got := g.Fetch("billing"); !clustertest.SameOffsets(got, want) {
		t.Fatalf("fetched %v, want %v", got, want)
	}

	old := g.Coordinator("billing")
	c.CrashBroker(old)
	next := g.Coordinator("billing")
	if next == old {
		t.Fatalf("coordinator still %d after its crash", old)
	}
	if got := g.Fetch("billing"); !clustertest.SameOffsets(got, want) {
		t.Fatalf("after the coordinator's crash fetched %v, want %v", got, want)
	}
	if err := g.Heartbeat("billing", j.GetGenerationId(), j.GetMemberId(), ""); err != nil {
		t.Fatalf("the member's heartbeat on the new coordinator: %v", err)
	}
	want[1] = 21
	if err := g.Commit("billing", j.GetGenerationId(), j.GetMemberId(), "", want); err != nil {
		t.Fatalf("commit on the new coordinator: %v", err)
	}
	c.StartBroker(old)

	// Two restarts of the coordinator in quick succession.
	for i := 0; i < 2; i++ {
		id := g.Coordinator("billing")
		c.CrashBroker(id)
		c.StartBroker(id)
	}
	if got := g.Fetch("billing"); !clustertest.SameOffsets(got, want) {
		t.Fatalf("after two quick restarts fetched %v, want %v", got, want)
	}
	// The cluster is whole again: every offsets partition has a leader and
	// its full ISR. (A restarted follower once stayed out for good: an
	// AlterPartition retried beside its successor made the controller
	// refuse both, and the idle partition waited for metadata that never
	// came.)
	c.WaitFor(30*time.Second, "full ISRs of "+topicconfig.OffsetsTopic, func() bool {
		for p := int32(0); p < 3; p++ {
			if len(c.Partition(topicconfig.OffsetsTopic, p).GetIsr()) != 3 {
				return false
			}
		}
		return true
	})
}

// A member is fenced by generation, member id and instance id; a static
// member that rejoins with its instance id gets a new member id without a
// rebalance, and its old id is fenced.
func TestGroupFencing(t *testing.T) {
	c := startGroupCluster(t)
	c.CreateTopic("orders", 1, 3, nil)
	g := clustertest.Groups{C: c}
	j := g.Join("fenced", "i-1", 10*time.Second)
	g.SyncAlone("fenced", j, "i-1")
	gen, member := j.GetGenerationId(), j.GetMemberId()

	wantCode(t, "commit with a stale generation", g.Commit("fenced", gen-1, member, "i-1", map[int32]int64{0: 1}), kerr.IllegalGeneration)
	wantCode(t, "commit from an unknown member", g.Commit("fenced", gen, "nobody", "", map[int32]int64{0: 1}), kerr.UnknownMemberID)
	wantCode(t, "commit from outside the group while it has members", g.Commit("fenced", -1, "", "", map[int32]int64{0: 1}), kerr.UnknownMemberID)
	wantCode(t, "heartbeat with a stale generation", g.Heartbeat("fenced", gen+1, member, "i-1"), kerr.IllegalGeneration)

	// The same instance restarts: no member id, same protocols.
	again := g.Join("fenced", "i-1", 10*time.Second)
	if again.GetMemberId() == member || again.GetGenerationId() != gen {
		t.Fatalf("static rejoin: member %q generation %d, want a new member id in generation %d", again.GetMemberId(), again.GetGenerationId(), gen)
	}
	if !again.GetSkipAssignment() {
		t.Fatal("the static leader rejoining a stable group must be told to skip the assignment")
	}
	d := g.Describe("fenced")
	if d.GetGroupState() != "Stable" || d.GetGenerationId() != gen || len(d.GetMembers()) != 1 {
		t.Fatalf("after the static rejoin: %v", d)
	}
	if m := d.GetMembers()[0]; m.GetMemberId() != again.GetMemberId() || m.GetGroupInstanceId() != "i-1" || m.GetClientId() != "test" ||
		m.GetClientHost() != "/127.0.0.1" || string(m.GetMemberAssignment()) != "all" || d.GetCoordinator().GetAddress() == "" {
		t.Fatalf("described member %v of %v", m, d)
	}
	wantCode(t, "the replaced member's commit", g.Commit("fenced", gen, member, "i-1", map[int32]int64{0: 1}), kerr.FencedInstanceID)
	wantCode(t, "the replaced member's heartbeat", g.Heartbeat("fenced", gen, member, "i-1"), kerr.FencedInstanceID)
	if err := g.Commit("fenced", gen, again.GetMemberId(), "i-1", map[int32]int64{0: 7}); err != nil {
		t.Fatalf("the new member's commit: %v", err)
	}

	// A broker that does not coordinate the group says so and names the
	// coordinator.
	coord := g.Coordinator("fenced")
	for id := int32(1); id <= 3; id++ {
		if id == coord {
			continue
		}
		_, err := g.On(id).OffsetFetch(context.Background(), &groupv1.OffsetFetchRequest{GroupId: "fenced"})
		e := kerr.FromStatus(err)
		if e.Code != kerr.NotCoordinator || e.Coordinator == nil || e.Coordinator.ID != coord {
			t.Fatalf("broker %d: %v (coordinator hint %+v), want NOT_COORDINATOR naming %d", id, err, e.Coordinator, coord)
		}
		break
	}
}

// A member that stops heartbeating is removed after its session timeout
// and the group rebalances; the member that stays, heartbeating through a
// quiet gap longer than its session, keeps its place.
func TestGroupSessionTimeoutRebalances(t *testing.T) {
	c := startGroupCluster(t)
	g := clustertest.Groups{C: c}
	const session = 1500 * time.Millisecond
	req := func(member string) *groupv1.JoinGroupRequest {
		return &groupv1.JoinGroupRequest{GroupId: "pair", SessionTimeoutMs: int32(session.Milliseconds()), MemberId: member,
			ProtocolType: "consumer", Protocols: clustertest.RangeProtocol, ClientId: "test"}
	}
	first := g.Join("pair", "", session)
	g.SyncAlone("pair", first, "")

	// A second member joins: the first learns of the rebalance from its
	// heartbeat and rejoins; both get generation 2.
	type joined struct {
		r   *groupv1.JoinGroupResponse
		err error
	}
	secondCh := make(chan joined, 1)
	go func() {
		api := g.On(g.Coordinator("pair"))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := api.JoinGroup(ctx, req(""))
		e := kerr.FromStatus(err)
		if e == nil || e.Code != kerr.MemberIDRequired {
			secondCh <- joined{nil, err}
			return
		}
		r, err := api.JoinGroup(ctx, req(e.MemberID))
		secondCh <- joined{r, err}
	}()
	c.WaitFor(10*time.Second, "the first member to see the rebalance", func() bool {
		return kerr.CodeOf(g.Heartbeat("pair", first.GetGenerationId(), first.GetMemberId(), "")) == kerr.RebalanceInProgress
	})
	rejoin, err := g.On(g.Coordinator("pair")).JoinGroup(context.Background(), req(first.GetMemberId()))
	if err != nil {
		t.Fatalf("first member's rejoin: %v", err)
	}
	second := <-secondCh
	if second.err != nil {
		t.Fatalf("second member's join: %v", second.err)
	}
	if rejoin.GetGenerationId() != 2 || second.r.GetGenerationId() != 2 || len(rejoin.GetMembers())+len(second.r.GetMembers()) != 2 {
		t.Fatalf("generation 2 answers: %v / %v", rejoin, second.r)
	}
	leader := rejoin
	if second.r.GetLeader() == second.r.GetMemberId() {
		leader = second.r
	}
	var assign []*groupv1.SyncGroupAssignment
	for _, m := range leader.GetMembers() {
		assign = append(assign, &groupv1.SyncGroupAssignment{MemberId: m.GetMemberId(), Assignment: []byte(m.GetMemberId())})
	}
	if _, err := g.On(g.Coordinator("pair")).SyncGroup(context.Background(), &groupv1.SyncGroupRequest{GroupId: "pair", GenerationId: 2,
		MemberId: leader.GetMemberId(), Assignments: assign}); err != nil {
		t.Fatalf("leader sync: %v", err)
	}

	// The second member falls silent; the first heartbeats through a gap
	// of three session timeouts.
	gapEnd := time.Now().Add(3 * session)
	sawRebalance := false
	for time.Now().Before(gapEnd) && !sawRebalance {
		err := g.Heartbeat("pair", 2, first.GetMemberId(), "")
		switch kerr.CodeOf(err) {
		case kerr.None:
		case kerr.RebalanceInProgress:
			sawRebalance = true
		default:
			t.Fatalf("heartbeat: %v", err)
		}
		time.Sleep(session / 5)
	}
	if !sawRebalance {
		t.Fatal("the silent member's session ended without a rebalance")
	}
	alone, err := g.On(g.Coordinator("pair")).JoinGroup(context.Background(), req(first.GetMemberId()))
	if err != nil {
		t.Fatalf("rejoin after the silent member left: %v", err)
	}
	if alone.GetGenerationId() != 3 || len(alone.GetMembers()) != 1 || alone.GetMembers()[0].GetMemberId() != first.GetMemberId() {
		t.Fatalf("generation 3: %v", alone)
	}
	g.SyncAlone("pair", alone, "")

	// Quiet: heartbeats only, for several sessions. Nothing expires, no
	// rebalance.
	quietEnd := time.Now().Add(3 * session)
	for time.Now().Before(quietEnd) {
		if err := g.Heartbeat("pair", 3, first.GetMemberId(), ""); err != nil {
			t.Fatalf("heartbeat in a quiet group: %v", err)
		}
		time.Sleep(session / 5)
	}
	if d := g.Describe("pair"); d.GetGroupState() != "Stable" || d.GetGenerationId() != 3 || len(d.GetMembers()) != 1 {
		t.Fatalf("after the quiet gap: %v", d)
	}
}

// __consumer_offsets is created on first use, compacted, with
// min.insync.replicas 2; clients can neither produce to it nor delete or
// create it.
func TestOffsetsTopicIsProtected(t *testing.T) {
	c := startGroupCluster(t)
	g := clustertest.Groups{C: c}
	g.Coordinator("any")
	ctx := context.Background()
	resp, err := c.Admin().DescribeConfigs(ctx, &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{{
		Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: topicconfig.OffsetsTopic}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]string{}
	for _, e := range resp.GetResults()[0].GetEntries() {
		cfg[e.GetName()] = e.GetValue()
	}
	if cfg["cleanup.policy"] != "compact" || cfg["min.insync.replicas"] != "2" {
		t.Fatalf("%s configs %v", topicconfig.OffsetsTopic, cfg)
	}
	if n := len(c.Partition(topicconfig.OffsetsTopic, 0).GetReplicas()); n != 3 {
		t.Fatalf("replication factor %d, want 3", n)
	}
	if p := c.Partition(topicconfig.OffsetsTopic, 2); p.GetLeader() < 0 || c.Partition(topicconfig.OffsetsTopic, 3).GetLeader() >= 0 {
		t.Fatalf("%s should have exactly the 3 partitions offsets.topic.num.partitions asks for", topicconfig.OffsetsTopic)
	}

	_, err = c.BrokerClient(1).Produce(ctx, &brokerv1.ProduceRequest{Topic: topicconfig.OffsetsTopic, Partition: 0, Acks: -1,
		Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: []*commonv1.Record{{Key: []byte("k"), Value: []byte("v")}}}}})
	wantCode(t, "produce to "+topicconfig.OffsetsTopic, kerr.FromStatus(err), kerr.InvalidTopicException)

	del, err := c.Admin().DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{topicconfig.OffsetsTopic}})
	if err != nil {
		t.Fatal(err)
	}
	if got := kerr.Code(del.GetResults()[0].GetErrorCode()); got != kerr.InvalidTopicException {
		t.Fatalf("delete %s: %s", topicconfig.OffsetsTopic, got)
	}
	cr, err := c.Admin().CreateTopics(ctx, &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{{Name: topicconfig.OffsetsTopic, NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := kerr.Code(cr.GetResults()[0].GetErrorCode()); got != kerr.InvalidTopicException {
		t.Fatalf("create %s: %s", topicconfig.OffsetsTopic, got)
	}
}

// DeleteGroups refuses a group with members, then writes tombstones for
// the group and its offsets; the cleaner removes them from the log.
func TestDeleteGroupTombstonesAreCompacted(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, AdjustController: clustertest.OffsetsPartitions(1), BrokerSettings: map[string]string{
		"group.min.session.timeout.ms": "100", "group.initial.rebalance.delay.ms": "0", "log.cleaner.backoff.ms": "100"}})
	c.CreateTopic("orders", 2, 3, nil)
	g := clustertest.Groups{C: c}
	j := g.Join("doomed", "", 10*time.Second)
	g.SyncAlone("doomed", j, "")
	for i := int64(1); i <= 20; i++ {
		if err := g.Commit("doomed", j.GetGenerationId(), j.GetMemberId(), "", map[int32]int64{0: i, 1: i}); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	del := func() kerr.Code {
		r, err := clustertest.Call(g, "doomed", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.DeleteGroupsResponse, error) {
			return api.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{"doomed"}})
		})
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
		return kerr.Code(r.GetResults()[0].GetErrorCode())
	}
	if code := del(); code != kerr.NonEmptyGroup {
		t.Fatalf("delete with a member: %s", code)
	}
	if _, err := clustertest.Call(g, "doomed", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.LeaveGroupResponse, error) {
		return api.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: "doomed", Members: []*groupv1.MemberIdentity{{MemberId: j.GetMemberId()}}})
	}); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if code := del(); code != kerr.None {
		t.Fatalf("delete: %s", code)
	}
	if code := del(); code != kerr.GroupIDNotFound {
		t.Fatalf("second delete: %s", code)
	}
	if got := g.Fetch("doomed"); len(got) != 0 {
		t.Fatalf("offsets after delete: %v", got)
	}

	coord := g.Coordinator("doomed")
	if n := countGroupRecords(t, c, coord, "doomed"); n < 40+3 {
		t.Fatalf("the log holds %d records of the deleted group, want its 40 commits and 3 tombstones", n)
	}

	// Compact now: small segments, tombstones kept for no time.
	ar, err := c.Admin().AlterConfigs(context.Background(), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: topicconfig.OffsetsTopic},
		Ops: []*adminv1.ConfigOp{
			{Name: "segment.bytes", Value: "1024", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET},
			{Name: "delete.retention.ms", Value: "0", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET},
			{Name: "min.cleanable.dirty.ratio", Value: "0.01", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ar.GetResults() {
		if r.GetErrorCode() != 0 {
			t.Fatalf("alter configs: %s", r.GetErrorMessage())
		}
	}
	// Roll the active segment past the tombstones with another group's
	// commits (the cleaner never touches the active segment).
	other := g.Join("filler", "", 10*time.Second)
	g.SyncAlone("filler", other, "")
	c.WaitFor(60*time.Second, "the cleaner to remove the deleted group's records", func() bool {
		_ = g.Commit("filler", other.GetGenerationId(), other.GetMemberId(), "", map[int32]int64{0: time.Now().UnixNano()})
		for _, id := range []int32{coord} {
			if n := countGroupRecords(t, c, id, "doomed"); n != 0 {
				return false
			}
		}
		return true
	})
	if n := countGroupRecords(t, c, coord, "filler"); n == 0 {
		t.Fatal("compaction removed the live group's latest records too")
	}
}

// countGroupRecords counts the records of a group in broker id's replica
// of __consumer_offsets-0, tombstones included.
func countGroupRecords(t *testing.T, c *clustertest.Cluster, id int32, group string) int {
	keys, err := c.Broker(id).ReadLogKeys(topicconfig.OffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if containsGroup(k, group) {
			n++
		}
	}
	return n
}

func containsGroup(key []byte, group string) bool {
	// Both key layouts start with int16 version, then the group as an
	// int16-length string.
	if len(key) < 4 {
		return false
	}
	l := int(key[2])<<8 | int(key[3])
	return len(key) >= 4+l && string(key[4:4+l]) == group
}

// The coordinator's /metrics shows each group's lag per partition (high
// watermark minus committed offset), its members and the groups by state.
func TestGroupMetrics(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, AdjustController: clustertest.OffsetsPartitions(3), BrokerSettings: clustertest.GroupSettings,
		Adjust: func(cfg *broker.Config) { cfg.Telemetry.MetricsListen = "127.0.0.1:0" }})
	c.CreateTopic("orders", 1, 3, map[string]string{"min.insync.replicas": "2"})
	for i := 0; i < 5; i++ {
		if _, err := c.Produce(context.Background(), "orders", 0, -1, "v"); err != nil {
			t.Fatal(err)
		}
	}
	g := clustertest.Groups{C: c}
	if err := g.Commit("lagging", -1, "", "", map[int32]int64{0: 2}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	j := g.Join("busy", "", 10*time.Second)
	g.SyncAlone("busy", j, "")
	metric := func(id int32, series string) (float64, bool) {
		resp, err := http.Get("http://" + c.Broker(id).MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				return f, err == nil
			}
		}
		return 0, false
	}
	lagging := g.Coordinator("lagging")
	c.WaitFor(10*time.Second, "the lag metric", func() bool {
		v, ok := metric(lagging, `tidemark_group_lag{group="lagging",partition="0",topic="orders"}`)
		return ok && v == 3
	})
	if v, ok := metric(g.Coordinator("busy"), `tidemark_group_members{group="busy"}`); !ok || v != 1 {
		t.Fatalf("members of busy: %v %v", v, ok)
	}
	if v, ok := metric(lagging, `tidemark_groups{state="Empty"}`); !ok || v < 1 {
		t.Fatalf("empty groups on the coordinator of lagging: %v %v", v, ok)
	}
}

// On a one-broker cluster __consumer_offsets gets one replica and
// min.insync.replicas 1: commits still work.
func TestOffsetsTopicReplicationIsCappedAtLiveBrokers(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, AdjustController: clustertest.OffsetsPartitions(2), BrokerSettings: clustertest.GroupSettings})
	c.CreateTopic("orders", 1, 1, nil)
	g := clustertest.Groups{C: c}
	if err := g.Commit("solo", -1, "", "", map[int32]int64{0: 1}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got := g.Fetch("solo"); !clustertest.SameOffsets(got, map[int32]int64{0: 1}) {
		t.Fatalf("fetched %v", got)
	}
	resp, err := c.Admin().DescribeConfigs(context.Background(), &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{{
		Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: topicconfig.OffsetsTopic}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range resp.GetResults()[0].GetEntries() {
		if e.GetName() == "min.insync.replicas" && e.GetValue() != "1" {
			t.Fatalf("min.insync.replicas %s on one broker", e.GetValue())
		}
	}
	if n := len(c.Partition(topicconfig.OffsetsTopic, 1).GetReplicas()); n != 1 {
		t.Fatalf("replication factor %d on one broker", n)
	}
}

// Commits keep coming while the coordinator's broker is killed: every
// acknowledged commit survives (the offset fetched at the end is at least
// the last acknowledged one and at most the last attempted), and commits
// go on at the new coordinator.
func TestAcknowledgedCommitsSurviveCoordinatorCrashUnderLoad(t *testing.T) {
	c := startGroupCluster(t)
	c.CreateTopic("orders", 1, 3, nil)
	g := clustertest.Groups{C: c}
	g.Coordinator("steady")
	var acked, attempted atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	// commitOnce finds the coordinator and commits once; it never ends
	// the test from this goroutine.
	commitOnce := func(off int64) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		found, err := g.Any().FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: "steady"})
		if err != nil {
			return kerr.FromStatus(err)
		}
		api := groupv1.NewGroupServiceClient(c.Conn(found.GetCoordinator().GetAddress()))
		resp, err := api.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "steady", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: off}}}}})
		if err != nil {
			return kerr.FromStatus(err)
		}
		// A partition refused (its topic not yet in the coordinator's
		// metadata) stored nothing: not acknowledged.
		if code := kerr.Code(resp.GetTopics()[0].GetPartitions()[0].GetErrorCode()); code != kerr.None {
			return kerr.New(code, "commit of orders-0")
		}
		return nil
	}
	go func() {
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			attempted.Store(i)
			if err := commitOnce(i); err != nil {
				if e := kerr.As(err); !e.Code.Retriable() {
					done <- err
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			acked.Store(i)
		}
	}()
	c.WaitFor(10*time.Second, "some commits", func() bool { return acked.Load() >= 20 })
	victim := g.Coordinator("steady")
	c.CrashBroker(victim)
	before := acked.Load()
	c.WaitFor(30*time.Second, "commits at the new coordinator", func() bool { return acked.Load() >= before+20 })
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("committer: %v", err)
	}
	got := g.Fetch("steady")[0]
	if got < acked.Load() || got > attempted.Load() {
		t.Fatalf("fetched offset %d; acknowledged up to %d, attempted up to %d", got, acked.Load(), attempted.Load())
	}
	if next := g.Coordinator("steady"); next == victim {
		t.Fatalf("the crashed broker %d still coordinates", victim)
	}
	c.StartBroker(victim)
}

// A follower of the offsets partition dying leaves the same coordinator
// leading it, in a new leader epoch (the controller shrank the ISR). That
// must not throw away a rebalance in progress, as Kafka keeps its groups
// for a leadership it already holds. Before, the coordinator reloaded the
// partition's groups from the log: the parked join was answered
// NOT_COORDINATOR and the group went back to its last written generation.
func TestARebalanceSurvivesAnIsrShrinkOfItsOffsetsPartition(t *testing.T) {
	c := startGroupCluster(t)
	g := clustertest.Groups{C: c}
	const session = 20 * time.Second
	first := g.Join("busy", "", session)
	g.SyncAlone("busy", first, "")
	coord := g.Coordinator("busy")
	api := g.On(coord)
	type joined struct {
		r   *groupv1.JoinGroupResponse
		err error
	}
	second := make(chan joined, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := &groupv1.JoinGroupRequest{GroupId: "busy", SessionTimeoutMs: int32(session.Milliseconds()), RebalanceTimeoutMs: 30000,
			ProtocolType: "consumer", Protocols: clustertest.RangeProtocol, ClientId: "test"}
		_, err := api.JoinGroup(ctx, req)
		if e := kerr.FromStatus(err); e == nil || e.Code != kerr.MemberIDRequired {
			second <- joined{nil, err}
			return
		}
		req.MemberId = kerr.FromStatus(err).MemberID
		r, err := api.JoinGroup(ctx, req)
		second <- joined{r, err}
	}()
	c.WaitFor(10*time.Second, "the first member to see the rebalance", func() bool {
		return kerr.CodeOf(g.Heartbeat("busy", first.GetGenerationId(), first.GetMemberId(), "")) == kerr.RebalanceInProgress
	})

	// Every offsets partition has three replicas: the coordinator's lose a
	// follower and get a new leader epoch, under the same leader.
	epochs := map[int32]int32{}
	for p := int32(0); p < 3; p++ {
		if pd := c.Partition(topicconfig.OffsetsTopic, p); pd.GetLeader() == coord {
			epochs[p] = pd.GetLeaderEpoch()
		}
	}
	victim := coord%3 + 1
	c.CrashBroker(victim)
	c.WaitFor(15*time.Second, "the coordinator's partitions in a new epoch, without the dead follower", func() bool {
		moved := 0
		for _, r := range c.Broker(coord).Replicas().Replicas() {
			tp := r.TP()
			epoch, ok := epochs[tp.Partition]
			if tp.Topic != topicconfig.OffsetsTopic || !ok {
				continue
			}
			s := r.Snapshot(time.Now())
			if s.Leader != coord || s.LeaderEpoch == epoch || slices.Contains(s.ISR, victim) {
				return false
			}
			moved++
		}
		return moved == len(epochs)
	})
	time.Sleep(300 * time.Millisecond) // several coordinator ticks
	select {
	case j := <-second:
		t.Fatalf("the parked join ended after the ISR shrink: %v, %v", j.r, j.err)
	default:
	}
	if err := g.Heartbeat("busy", first.GetGenerationId(), first.GetMemberId(), ""); kerr.CodeOf(err) != kerr.RebalanceInProgress {
		t.Fatalf("the first member's heartbeat after the ISR shrink: %v, want REBALANCE_IN_PROGRESS (the rebalance goes on)", err)
	}
	rejoin, err := api.JoinGroup(context.Background(), &groupv1.JoinGroupRequest{GroupId: "busy", SessionTimeoutMs: int32(session.Milliseconds()),
		MemberId: first.GetMemberId(), ProtocolType: "consumer", Protocols: clustertest.RangeProtocol, ClientId: "test"})
	if err != nil || rejoin.GetGenerationId() != 2 {
		t.Fatalf("the first member's rejoin: %v, %v; want generation 2", rejoin, err)
	}
	if j := <-second; j.err != nil || j.r.GetGenerationId() != 2 {
		t.Fatalf("the second member's join: %v, %v; want generation 2", j.r, j.err)
	}
}

// A topic deleted and created again under its name starts with no
// committed offsets, as in Kafka: a group's offset of the old topic would
// have made its consumers skip the new topic's first records.
func TestOffsetsOfADeletedTopicGoWithIt(t *testing.T) {
	c := startGroupCluster(t)
	g := clustertest.Groups{C: c}
	c.CreateTopic("recreated", 1, 3, nil)
	commit := func(topic string, offset int64) { g.CommitOffset("reader", topic, offset) }
	commit("recreated", 5)
	c.CreateTopic("kept", 1, 3, nil)
	commit("kept", 7) // another topic: left alone
	resp, err := c.Admin().DeleteTopics(context.Background(), &adminv1.DeleteTopicsRequest{Topics: []string{"recreated"}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	c.CreateTopic("recreated", 1, 3, nil)
	topics := func() map[string]int64 { return committedOffsets(t, g, "reader") }
	c.WaitFor(10*time.Second, "the deleted topic's offset gone", func() bool { _, ok := topics()["recreated"]; return !ok })
	if got := topics(); got["kept"] != 7 {
		t.Fatalf("offsets %v: the offset of a topic that was not deleted went too", got)
	}
}

// A topic deleted and created again while the coordinator of a group's
// offsets was down: the restarted coordinator loads the group's offset of
// the old topic, whose record names the old topic's id, and drops it; a
// member of the group then reads the new topic from its start, as its
// reset policy says. The loaded offset had no id, the first sweep gave it
// the new topic's, and the member resumed at it, skipping the new topic's
// first records.
func TestAnOffsetOfATopicCreatedAgainWhileItsCoordinatorWasDownGoes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 2, BrokerSettings: clustertest.GroupSettings, AdjustController: func(cfg *controller.Config) {
		cfg.OffsetsTopicNumPartitions, cfg.OffsetsTopicReplicationFactor = 1, 1 // nobody else can load it
	}})
	g := clustertest.Groups{C: c}
	coord := g.Coordinator("reader")
	other := int32(3) - coord
	// The topics live on the other broker, which stays up.
	create := func(name string) {
		t.Helper()
		resp, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{{Name: name,
			Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: []int32{other}}}}}})
		if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
			t.Fatalf("create %s: %v %v", name, resp, err)
		}
		c.WaitFor(10*time.Second, "a leader for "+name, func() bool { return c.Leads(other, name, 0) })
		c.WaitAnnounced(name, 1)
	}
	produce := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if _, err := c.Produce(context.Background(), "reborn", 0, -1, prefix+"-"+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	create("reborn")
	create("kept")
	produce("old", 6)
	g.CommitOffset("reader", "reborn", 5)
	g.CommitOffset("reader", "kept", 7)

	if err := c.StopBroker(coord); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Admin().DeleteTopics(context.Background(), &adminv1.DeleteTopicsRequest{Topics: []string{"reborn"}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	create("reborn")
	produce("new", 8)
	c.StartBroker(coord)

	offsets := func() map[string]int64 { return committedOffsets(t, g, "reader") }
	c.WaitFor(15*time.Second, "the old topic's offset gone", func() bool { _, ok := offsets()["reborn"]; return !ok })
	if got := offsets(); got["kept"] != 7 {
		t.Fatalf("offsets %v: the offset of a topic that was not deleted went too", got)
	}
	m := c.StartMember(clustertest.GroupOpts("reader", "reborn"))
	tp := client.TopicPartition{Topic: "reborn", Partition: 0}
	c.WaitFor(30*time.Second, "the member reading the new topic", func() bool { return len(m.Offsets(tp)) > 0 || m.Failure() != nil })
	if got := m.Offsets(tp); len(got) == 0 || got[0] != 0 {
		t.Fatalf("the member read offsets %v (failure %v), want the new topic from 0", got, m.Failure())
	}
}

// A commit that reaches the coordinator before the controller's
// UpdateMetadata of a topic just created is refused for that partition
// (UNKNOWN_TOPIC_OR_PARTITION, which a client retries, as Kafka answers for
// a topic its metadata cache does not hold) and stores nothing; committed
// again once the metadata arrives, it is kept. A caller that took the
// refusal for a stored commit saw its offset missing, as if an
// acknowledged commit had been lost.
func TestACommitAheadOfTheCoordinatorsMetadataIsRefusedThenStored(t *testing.T) {
	c := startGroupCluster(t)
	g := clustertest.Groups{C: c}
	// The coordinator must have loaded its __consumer_offsets partition
	// before its controller link is cut, or it never learns it leads one.
	g.Fetch("reader")
	coord := g.Coordinator("reader")
	ctrl, _ := c.ActiveController()
	// The coordinator hears nothing of the new topic, which lives on the
	// other two brokers, until the link heals.
	c.Net.Cut(clustertest.ControllerName(ctrl), clustertest.BrokerName(coord))
	var replicas []int32
	for _, id := range c.BrokerIDs() {
		if id != coord {
			replicas = append(replicas, id)
		}
	}
	resp, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{{Name: "kept",
		Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: replicas}}}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "a leader for kept", func() bool { return c.Leads(c.Partition("kept", 0).GetLeader(), "kept", 0) })
	refused, err := clustertest.Call(g, "reader", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
		return api.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "reader", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "kept", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 7}}}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if code := kerr.Code(refused.GetTopics()[0].GetPartitions()[0].GetErrorCode()); code != kerr.UnknownTopicOrPartition {
		t.Fatalf("a commit of a topic the coordinator does not know yet: %v, want UNKNOWN_TOPIC_OR_PARTITION", code)
	}
	if got := g.Fetch("reader"); len(got) != 0 {
		t.Fatalf("offsets %v after a refused commit, want none", got)
	}
	heal := time.AfterFunc(300*time.Millisecond, func() { c.Net.Heal(clustertest.ControllerName(ctrl), clustertest.BrokerName(coord)) })
	defer heal.Stop()
	g.CommitOffset("reader", "kept", 7)
	if got := g.Fetch("reader"); got[0] != 7 {
		t.Fatalf("offsets %v, want kept's 7", got)
	}
}

// committedOffsets is group's committed offset of each topic's partitions
// (the last partition's, for a topic of several), as OffsetFetch answers.
func committedOffsets(t *testing.T, g clustertest.Groups, group string) map[string]int64 {
	t.Helper()
	r, err := clustertest.Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetFetchResponse, error) {
		return api.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: group})
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, tp := range r.GetTopics() {
		for _, p := range tp.GetPartitions() {
			out[tp.GetName()] = p.GetCommittedOffset()
		}
	}
	return out
}
