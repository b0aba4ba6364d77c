package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/services/topicconfig"
)

// Consumer groups in tests: the group API over gRPC and the Go client's
// group members.

// GroupSettings keep the group timings short for tests: sessions from
// 100ms, no initial rebalance delay.
var GroupSettings = map[string]string{
	"group.min.session.timeout.ms":     "100",
	"group.initial.rebalance.delay.ms": "0",
}

// OffsetsPartitions sets the controller's offsets.topic.num.partitions.
func OffsetsPartitions(n int32) func(*controller.Config) {
	return func(cfg *controller.Config) { cfg.OffsetsTopicNumPartitions = n }
}

// Groups is a test's handle on the group API: it finds the coordinator
// and goes to it, retrying while the coordinator moves or loads.
type Groups struct {
	C *Cluster
}

// On is the group API on broker id.
func (g Groups) On(id int32) groupv1.GroupServiceClient {
	return groupv1.NewGroupServiceClient(g.C.Conn(g.C.brokerCfg[id].Listen))
}

// Any returns the group API on some running broker.
func (g Groups) Any() groupv1.GroupServiceClient {
	for id := range g.C.brokerCfg {
		if g.C.Broker(id) != nil {
			return g.On(id)
		}
	}
	g.C.T.Fatal("no broker is running")
	return nil
}

// Coordinator finds the group's coordinator, retrying while there is none.
func (g Groups) Coordinator(group string) int32 {
	g.C.T.Helper()
	var id int32 = -1
	g.C.WaitFor(30*time.Second, "a coordinator for "+group, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := g.Any().FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: group})
		if err != nil {
			return false
		}
		id = resp.GetCoordinator().GetId()
		return g.C.Broker(id) != nil
	})
	return id
}

// Call runs fn against the group's coordinator until it answers something
// other than a coordinator-moving error.
func Call[T any](g Groups, group string, fn func(ctx context.Context, api groupv1.GroupServiceClient) (T, error)) (T, error) {
	g.C.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		id := g.Coordinator(group)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		v, err := fn(ctx, g.On(id))
		cancel()
		if err == nil {
			return v, nil
		}
		switch kerr.FromStatus(err).Code {
		case kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable, kerr.NetworkException:
			if time.Now().Before(deadline) {
				time.Sleep(25 * time.Millisecond)
				continue
			}
		}
		return v, kerr.FromStatus(err)
	}
}

// GroupClient is a client of its own (its connections die with it) that
// retries fast.
func (c *Cluster) GroupClient() *client.Client {
	c.T.Helper()
	return c.GroupClientVia("")
}

// GroupClientVia is GroupClient dialling through the network simulator
// as node name (so that a paused broker stalls it too); "" dials directly.
func (c *Cluster) GroupClientVia(name string) *client.Client {
	c.T.Helper()
	o := client.Options{RequestTimeout: 3 * time.Second,
		RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond, APITimeout: 20 * time.Second}
	if os.Getenv("TIDEMARK_CLIENT_DEBUG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if name != "" {
		o.Dialer = c.Net.Dialer(name)
	}
	return c.ClientWith(o)
}

// GroupOpts are the options of test members: short sessions, small
// fetches (one produced batch each), earliest.
func GroupOpts(group string, topics ...string) client.GroupOptions {
	return client.GroupOptions{
		GroupID: group, Topics: topics, ClientID: "clustertest",
		SessionTimeout: 1500 * time.Millisecond, HeartbeatInterval: 150 * time.Millisecond,
		RebalanceTimeout: 4 * time.Second, AutoOffsetReset: "earliest",
		MaxBytes: 1, MaxWait: 100 * time.Millisecond, AutoCommitInterval: 200 * time.Millisecond,
	}
}

// Member is a GroupConsumer polled on a goroutine, recording every offset
// it is handed per partition.
type Member struct {
	t    *testing.T
	gc   *client.GroupConsumer
	stop chan struct{}
	done chan struct{}
	// hold, while locked by a test, keeps the member from calling Poll (a
	// stuck record handler).
	hold sync.Mutex

	mu   sync.Mutex
	got  map[client.TopicPartition][]int64
	lost int
	err  error
}

// StartMember starts a member polling with options o on a client of its
// own; it is killed when the test ends.
func (c *Cluster) StartMember(o client.GroupOptions) *Member {
	c.T.Helper()
	return c.StartMemberOn(c.GroupClient(), o)
}

// StartMemberOn is StartMember on a client of the test's own.
func (c *Cluster) StartMemberOn(cl *client.Client, o client.GroupOptions) *Member {
	c.T.Helper()
	m := &Member{t: c.T.(*testing.T), stop: make(chan struct{}), done: make(chan struct{}), got: map[client.TopicPartition][]int64{}}
	o.OnPartitionsLost = func(context.Context, []client.TopicPartition) {
		m.mu.Lock()
		m.lost++
		m.mu.Unlock()
	}
	gc, err := client.NewGroupConsumer(cl, o)
	if err != nil {
		c.T.Fatal(err)
	}
	m.gc = gc
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			m.hold.Lock()
			m.hold.Unlock() //nolint:staticcheck // a gate, not a critical section
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			recs, err := gc.Poll(ctx)
			cancel()
			m.mu.Lock()
			for _, r := range recs {
				tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
				m.got[tp] = append(m.got[tp], r.Offset)
			}
			if err != nil {
				m.err = err
			}
			m.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	c.T.Cleanup(m.Kill)
	return m
}

// Consumer is the member's group consumer.
func (m *Member) Consumer() *client.GroupConsumer { return m.gc }

// Kill stops the member as kill -9 would: no commit, no LeaveGroup.
func (m *Member) Kill() {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	<-m.done
	m.gc.Abandon()
}

// Offsets are the offsets of tp the member was handed, in order.
func (m *Member) Offsets(tp client.TopicPartition) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got[tp])
}

// Close stops polling and closes the member cleanly (its final commit
// and LeaveGroup).
func (m *Member) Close() {
	close(m.stop)
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.gc.Close(ctx); err != nil {
		m.t.Errorf("close: %v", err)
	}
}

// Total is how many records the member was handed.
func (m *Member) Total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.got {
		n += len(o)
	}
	return n
}

// Hold keeps the member from calling Poll (a stuck record handler) until
// Release.
func (m *Member) Hold() { m.hold.Lock() }

// Release lets a held member poll again.
func (m *Member) Release() { m.hold.Unlock() }

// Lost is how many times the member was told it lost its partitions.
func (m *Member) Lost() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lost
}

// Failure is the error that ended the member's polling, if any.
func (m *Member) Failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// CoordinatorOf is the coordinator of group and a GroupService client on it.
func (c *Cluster) CoordinatorOf(group string) (int32, groupv1.GroupServiceClient) {
	c.T.Helper()
	var id int32 = -1
	c.WaitFor(20*time.Second, "the coordinator of "+group, func() bool {
		for bid := range c.brokerCfg {
			if c.Broker(bid) == nil {
				continue
			}
			resp, err := groupv1.NewGroupServiceClient(c.Conn(c.brokerCfg[bid].Listen)).FindCoordinator(context.Background(),
				&groupv1.FindCoordinatorRequest{Key: group})
			if err == nil && c.Broker(resp.GetCoordinator().GetId()) != nil {
				id = resp.GetCoordinator().GetId()
				return true
			}
		}
		return false
	})
	return id, groupv1.NewGroupServiceClient(c.Conn(c.brokerCfg[id].Listen))
}

// WaitOffsetsWhole waits until every partition of the offsets topic has a
// leader serving it and its full ISR.
func (c *Cluster) WaitOffsetsWhole(partitions int32) {
	c.T.Helper()
	c.WaitFor(time.Minute, "every offsets partition led with its full ISR", func() bool {
		for p := range partitions {
			pd := c.Partition(topicconfig.OffsetsTopic, p)
			if len(pd.GetIsr()) != 3 || !c.Leads(pd.GetLeader(), topicconfig.OffsetsTopic, p) {
				return false
			}
		}
		return true
	})
}

// StartConsumerCluster starts a cluster whose coordinators accept the
// short sessions these tests use and start a group's first rebalance at
// once.
func StartConsumerCluster(t *testing.T) *Cluster {
	t.Helper()
	if testing.Short() {
		testenv.Skip(t, "-short: consumer group tests start a cluster")
	}
	return Start(t, Options{Brokers: 3, BrokerSettings: GroupSettings, AdjustController: OffsetsPartitions(3)})
}

// ProduceEach writes n records to every partition of topic, one batch each.
func (c *Cluster) ProduceEach(topic string, partitions int32, from, n int) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for p := range partitions {
		for i := from; i < from+n; i++ {
			for {
				_, err := c.Produce(ctx, topic, p, -1, fmt.Sprintf("%s-%d-%d", topic, p, i))
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					c.T.Fatalf("produce to %s-%d: %v", topic, p, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// TopicPartitions lists topic's partitions 0..n-1.
func TopicPartitions(topic string, n int32) []client.TopicPartition {
	var out []client.TopicPartition
	for p := range n {
		out = append(out, client.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

// Balanced reports whether the members' assignments split all of want
// between them, each holding between min and max partitions.
func Balanced(want []client.TopicPartition, lo, hi int, ms ...*Member) bool {
	seen := map[client.TopicPartition]int{}
	for _, m := range ms {
		a := m.gc.Assignment()
		if len(a) < lo || len(a) > hi {
			return false
		}
		for _, tp := range a {
			seen[tp]++
		}
	}
	if len(seen) != len(want) {
		return false
	}
	for _, tp := range want {
		if seen[tp] != 1 {
			return false
		}
	}
	return true
}

// Contiguous checks offsets are exactly from, from+1, ..., to-1.
func Contiguous(t *testing.T, what string, offsets []int64, from, to int64) {
	t.Helper()
	if int64(len(offsets)) != to-from {
		t.Fatalf("%s: got %d offsets %v, want %d..%d", what, len(offsets), offsets, from, to-1)
	}
	for i, o := range offsets {
		if o != from+int64(i) {
			t.Fatalf("%s: offset %d at position %d, want %d..%d in order: %v", what, o, i, from, to-1, offsets)
		}
	}
}

// DescribeGroup is the coordinator's DescribeGroups answer for group.
func (c *Cluster) DescribeGroup(group string) *groupv1.DescribedGroup {
	c.T.Helper()
	var out *groupv1.DescribedGroup
	c.WaitFor(20*time.Second, "a description of "+group, func() bool {
		_, gs := c.CoordinatorOf(group)
		resp, err := gs.DescribeGroups(context.Background(), &groupv1.DescribeGroupsRequest{GroupIds: []string{group}})
		if err != nil || len(resp.GetGroups()) != 1 || resp.GetGroups()[0].GetErrorCode() != 0 {
			return false
		}
		out = resp.GetGroups()[0]
		return true
	})
	return out
}

// RangeProtocol is the one assignment protocol the hand-built joins offer.
var RangeProtocol = []*groupv1.JoinGroupProtocol{{Name: "range", Metadata: []byte("sub")}}

// Join joins as a new member (both KIP-394 round trips) and returns the
// join answer.
func (g Groups) Join(group, instance string, session time.Duration) *groupv1.JoinGroupResponse {
	g.C.T.Helper()
	req := &groupv1.JoinGroupRequest{GroupId: group, SessionTimeoutMs: int32(session.Milliseconds()), GroupInstanceId: instance,
		ProtocolType: "consumer", Protocols: RangeProtocol, ClientId: "test"}
	resp, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.JoinGroupResponse, error) {
		return api.JoinGroup(ctx, req)
	})
	if e := kerr.As(err); e != nil && e.Code == kerr.MemberIDRequired {
		if e.MemberID == "" {
			g.C.T.Fatal("MEMBER_ID_REQUIRED without a member id")
		}
		req.MemberId = e.MemberID
		resp, err = Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.JoinGroupResponse, error) {
			return api.JoinGroup(ctx, req)
		})
	}
	if err != nil {
		g.C.T.Fatalf("join %s: %v", group, err)
	}
	return resp
}

// SyncAlone syncs a one-member group whose leader assigns itself.
func (g Groups) SyncAlone(group string, j *groupv1.JoinGroupResponse, instance string) {
	g.C.T.Helper()
	_, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.SyncGroupResponse, error) {
		return api.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: group, GenerationId: j.GetGenerationId(), MemberId: j.GetMemberId(),
			GroupInstanceId: instance, Assignments: []*groupv1.SyncGroupAssignment{{MemberId: j.GetMemberId(), Assignment: []byte("all")}}})
	})
	if err != nil {
		g.C.T.Fatalf("sync %s: %v", group, err)
	}
}

// Commit commits offsets of topic "orders" for a member of group in
// generation gen, returning the call's error or the first partition refused.
func (g Groups) Commit(group string, gen int32, member, instance string, offsets map[int32]int64) error {
	t := &groupv1.OffsetCommitTopic{Name: "orders"}
	for p, o := range offsets {
		t.Partitions = append(t.Partitions, &groupv1.OffsetCommitPartition{Partition: p, CommittedOffset: o, CommittedLeaderEpoch: -1, Metadata: "m"})
	}
	resp, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
		return api.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: gen, MemberId: member, GroupInstanceId: instance,
			Topics: []*groupv1.OffsetCommitTopic{t}})
	})
	if err != nil {
		return err
	}
	return CommitRefused(resp)
}

// CommitRefused returns the first partition an OffsetCommit answer
// refused, as an error with its code: a commit can fail partition by
// partition with the call itself succeeding.
func CommitRefused(resp *groupv1.OffsetCommitResponse) error {
	for _, rt := range resp.GetTopics() {
		for _, p := range rt.GetPartitions() {
			if code := kerr.Code(p.GetErrorCode()); code != kerr.None {
				return kerr.New(code, "commit of %s-%d", rt.GetName(), p.GetPartition())
			}
		}
	}
	return nil
}

// Fetch is group's committed offsets by partition (OffsetFetch).
func (g Groups) Fetch(group string) map[int32]int64 {
	g.C.T.Helper()
	resp, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetFetchResponse, error) {
		return api.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: group})
	})
	if err != nil {
		g.C.T.Fatalf("offset fetch %s: %v", group, err)
	}
	out := map[int32]int64{}
	for _, t := range resp.GetTopics() {
		for _, p := range t.GetPartitions() {
			if p.GetCommittedOffset() >= 0 {
				out[p.GetPartition()] = p.GetCommittedOffset()
			}
		}
	}
	return out
}

// Heartbeat sends one heartbeat of member in generation gen.
func (g Groups) Heartbeat(group string, gen int32, member, instance string) error {
	_, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.HeartbeatResponse, error) {
		return api.Heartbeat(ctx, &groupv1.HeartbeatRequest{GroupId: group, GenerationId: gen, MemberId: member, GroupInstanceId: instance})
	})
	return err
}

// Describe is the coordinator's DescribeGroups answer for group; it
// fails the test on an error.
func (g Groups) Describe(group string) *groupv1.DescribedGroup {
	g.C.T.Helper()
	resp, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.DescribeGroupsResponse, error) {
		r, err := api.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{group}})
		if err == nil && r.GetGroups()[0].GetErrorCode() != 0 {
			return r, kerr.New(kerr.Code(r.GetGroups()[0].GetErrorCode()), "describe")
		}
		return r, err
	})
	if err != nil {
		g.C.T.Fatalf("describe %s: %v", group, err)
	}
	return resp.GetGroups()[0]
}

// SameOffsets reports whether two committed-offset maps are equal.
func SameOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// CommitOffset commits topic's partition 0 for group from outside (no
// member, generation -1) and fails the test unless it is stored. A
// partition answered UNKNOWN_TOPIC_OR_PARTITION is committed again: the
// coordinator's metadata learns a topic just created with the controller's
// next UpdateMetadata, and refuses offsets of a topic it does not know.
func (g Groups) CommitOffset(group, topic string, offset int64) {
	g.C.T.Helper()
	req := &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: -1,
		Topics: []*groupv1.OffsetCommitTopic{{Name: topic, Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: offset}}}}}
	g.C.WaitFor(15*time.Second, "the commit of "+topic+" stored", func() bool {
		resp, err := Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
			return api.OffsetCommit(ctx, req)
		})
		if err != nil {
			g.C.T.Fatalf("commit of %s for %s: %v", topic, group, err)
		}
		code := kerr.Code(resp.GetTopics()[0].GetPartitions()[0].GetErrorCode())
		if code != kerr.None && code != kerr.UnknownTopicOrPartition {
			g.C.T.Fatalf("commit of %s for %s: %v", topic, group, code)
		}
		return code == kerr.None
	})
}
