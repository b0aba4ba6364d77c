package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
	"tidemark.io/services/topicconfig"
)

// fakeHost is one broker's view for the coordinator's own tests: an
// in-memory log per offsets partition whose high watermark the test
// moves, and leadership the test sets. Appends behave as acks=all on a
// healthy ISR: the high watermark covers them when they return.
type fakeHost struct {
	mu      sync.Mutex
	n       int32
	leads   map[int32]int32 // partition -> the leader epoch its leadership began in
	logs    map[int32][]recordbatch.Record
	hw      map[int32]int64
	holdHW  bool
	appends int
	// readGate, when set, holds every Read until it is closed (a slow
	// disk: the coordinator is still loading).
	readGate chan struct{}
	// appendGate, when set, holds the next Append until it is closed (a
	// slow write); appendHeld is closed once that Append is held.
	appendGate, appendHeld chan struct{}
	// appendErr, when set, refuses the next Append, writing nothing;
	// appendTimesOut has the next Append written but not acknowledged in
	// time (REQUEST_TIMED_OUT: a follower is dead and still in the ISR).
	appendErr      error
	appendTimesOut bool
	// topicIDs are the topics' ids in the metadata ("" for any other).
	topicIDs map[string]string
	// absent are topics the metadata does not hold (every other topic
	// has one partition).
	absent map[string]bool
	// noMetadata is a broker that has had no full UpdateMetadata yet (one
	// just restarted): TopicID cannot tell.
	noMetadata bool
	// afterTopicID, when set, runs once, after the next TopicID has read
	// its answer and before it returns it (the metadata moves on while a
	// reader holds what it read).
	afterTopicID func()
	// retentionMinutes overrides offsets.retention.minutes when set.
	retentionMinutes int64
	// maxSize overrides group.max.size when set.
	maxSize int32
	// cleanupEvery is offsets.retention.check.interval.ms; 0 means 1 ms,
	// so a test that moves the clock between ticks has the cleanup run at
	// each, unless it tests the interval itself.
	cleanupEvery time.Duration
	// latest is what ListOffsets answers for a partition's latest offset
	// (the high watermark its leader reports).
	latest map[TP]int64
}

func newFakeHost(n int32) *fakeHost {
	return &fakeHost{n: n, leads: map[int32]int32{}, logs: map[int32][]recordbatch.Record{}, hw: map[int32]int64{}}
}

func (h *fakeHost) BrokerID() int32 { return 1 }
func (h *fakeHost) Self() Node      { return Node{1, "b1:9092"} }
func (h *fakeHost) Config() topicconfig.BrokerConfig {
	c := topicconfig.DefaultBroker()
	c.GroupMinSessionTimeoutMs, c.GroupInitialRebalanceDelayMs = 10, 0
	h.mu.Lock()
	if h.retentionMinutes > 0 {
		c.OffsetsRetentionMinutes = h.retentionMinutes
	}
	if h.maxSize > 0 {
		c.GroupMaxSize = h.maxSize
	}
	c.OffsetsRetentionCheckIntervalMs = 1
	if h.cleanupEvery > 0 {
		c.OffsetsRetentionCheckIntervalMs = h.cleanupEvery.Milliseconds()
	}
	h.mu.Unlock()
	return c
}
func (h *fakeHost) PartitionCount(topic string) int32 {
	if topic == OffsetsTopic {
		return h.n
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.absent[topic] {
		return 0
	}
	return 1
}
func (h *fakeHost) TopicID(topic string) (string, bool) {
	h.mu.Lock()
	id, ok := h.topicIDs[topic], !h.noMetadata
	after := h.afterTopicID
	h.afterTopicID = nil
	h.mu.Unlock()
	if after != nil {
		after()
	}
	if !ok {
		return "", false
	}
	return id, true
}
func (h *fakeHost) PartitionLeader(tp TP) (Node, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.leads[tp.Partition]; ok {
		return Node{1, "b1:9092"}, true
	}
	return Node{2, "b2:9092"}, true
}
func (h *fakeHost) CreateOffsetsTopic(context.Context) error { return nil }
func (h *fakeHost) Leads(tp TP) (int32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.leads[tp.Partition]
	return e, ok
}
func (h *fakeHost) LocalOffsets(tp TP) (PartitionOffsets, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if tp.Topic != OffsetsTopic {
		return PartitionOffsets{}, false
	}
	return PartitionOffsets{LogStart: 0, HighWatermark: h.hw[tp.Partition], LogEnd: int64(len(h.logs[tp.Partition]))}, true
}
func (h *fakeHost) Read(tp TP, offset, upTo int64) ([]byte, int64, error) {
	h.mu.Lock()
	gate := h.readGate
	h.mu.Unlock()
	if gate != nil {
		<-gate
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var b recordbatch.Builder
	recs := h.logs[tp.Partition]
	for i := offset; i < upTo && i < int64(len(recs)); i++ {
		b.Append(recs[i])
	}
	if b.Count() == 0 {
		return nil, offset, nil
	}
	batch := b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
	batch.SetBaseOffset(offset)
	return append([]byte(nil), batch...), offset + int64(b.Count()), nil
}
func (h *fakeHost) Append(_ context.Context, tp TP, since int32, batch []byte) (int64, error) {
	h.mu.Lock()
	gate, held, refuse, timesOut := h.appendGate, h.appendHeld, h.appendErr, h.appendTimesOut
	h.appendGate, h.appendHeld, h.appendErr, h.appendTimesOut = nil, nil, nil, false
	h.mu.Unlock()
	if refuse != nil {
		return 0, refuse
	}
	if gate != nil {
		close(held)
		<-gate
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.leads[tp.Partition]; !ok || e != since {
		return 0, kerr.New(kerr.NotLeaderOrFollower, "not the leader")
	}
	for rec, err := range recordbatch.Batch(batch).Records() {
		if err != nil {
			return 0, err
		}
		h.logs[tp.Partition] = append(h.logs[tp.Partition], recordbatch.Record{Timestamp: rec.Timestamp, Key: rec.Key, Value: rec.Value, Headers: rec.Headers})
	}
	h.appends++
	if timesOut {
		return 0, kerr.New(kerr.RequestTimedOut, "the high watermark did not reach the write in time")
	}
	if !h.holdHW {
		h.hw[tp.Partition] = int64(len(h.logs[tp.Partition]))
	}
	return int64(len(h.logs[tp.Partition])) - 1, nil
}
func (h *fakeHost) ListOffsets(_ context.Context, tp TP, spec OffsetSpec, _ int64) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if spec == Latest {
		return h.latest[tp], nil
	}
	return 0, nil
}

func (h *fakeHost) set(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func fetchErr(s *Service, group string) (*groupv1.OffsetFetchResponse, kerr.Code) {
	resp, err := s.OffsetFetch(context.Background(), &groupv1.OffsetFetchRequest{GroupId: group})
	return resp, kerr.CodeOf(err)
}

// A new leader answers COORDINATOR_LOAD_IN_PROGRESS until it has replayed
// its log to the end it had when it became leader, then serves what the
// log holds, even above the high watermark (a commit there is stable only
// once the high watermark covers it); a broker that does not lead the group's partition
// answers NOT_COORDINATOR naming the leader; losing leadership unloads and
// answers a parked JoinGroup with NOT_COORDINATOR.
func TestCoordinatorLoadsAndUnloads(t *testing.T) {
	h := newFakeHost(2)
	group := "hello" // PartitionFor("hello", 2) = 0
	if PartitionFor(group, 2) != 0 {
		t.Fatal("the test's group moved partitions")
	}
	// The log already holds a commit from a previous coordinator, not yet
	// covered by the high watermark.
	h.logs[0] = []recordbatch.Record{{Key: OffsetKey(group, "orders", 0), Value: EncodeOffset(OffsetValue{Offset: 5, LeaderEpoch: -1, CommitTimestamp: time.Now().UnixMilli()})}}
	h.leads[0] = 3
	h.readGate = make(chan struct{})
	c := New(Options{Host: h, Tick: 2 * time.Millisecond})
	defer c.Close()
	s := &Service{C: c}

	waitUntil(t, "the coordinator to start loading", func() bool {
		_, code := fetchErr(s, group)
		return code == kerr.CoordinatorLoadInProgress
	})
	// Still loading however often it is asked while the log is read.
	for i := 0; i < 20; i++ {
		if _, code := fetchErr(s, group); code != kerr.CoordinatorLoadInProgress {
			t.Fatalf("answer %s while loading", code)
		}
	}
	h.set(func() { close(h.readGate); h.readGate = nil })
	var resp *groupv1.OffsetFetchResponse
	waitUntil(t, "the load", func() bool {
		var code kerr.Code
		resp, code = fetchErr(s, group)
		return code == kerr.None
	})
	if ts := resp.GetTopics(); len(ts) != 1 || ts[0].GetPartitions()[0].GetCommittedOffset() != 5 {
		t.Fatalf("loaded offsets %v", resp)
	}
	stable := func() *groupv1.OffsetFetchPartition {
		r, err := s.OffsetFetch(context.Background(), &groupv1.OffsetFetchRequest{GroupId: group, RequireStable: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetTopics()[0].GetPartitions()[0]
	}
	if p := stable(); p.GetErrorCode().String() != "ERROR_CODE_UNSTABLE_OFFSET_COMMIT" {
		t.Fatalf("require_stable above the high watermark: %v", p)
	}
	h.set(func() { h.hw[0] = 1 })
	if p := stable(); p.GetErrorCode() != 0 || p.GetCommittedOffset() != 5 {
		t.Fatalf("require_stable below the high watermark: %v", p)
	}

	// Partition 1 is led elsewhere.
	var other string
	for _, g := range []string{"a", "b", "c", "d", "e"} {
		if PartitionFor(g, 2) == 1 {
			other = g
			break
		}
	}
	_, err := s.OffsetFetch(context.Background(), &groupv1.OffsetFetchRequest{GroupId: other})
	if e := kerr.As(err); e.Code != kerr.NotCoordinator || e.Coordinator == nil || e.Coordinator.ID != 2 {
		t.Fatalf("group on a partition led elsewhere: %v (hint %+v)", err, e.Coordinator)
	}

	// A member's JoinGroup parks: a second handed-out member id (KIP-394)
	// keeps the join phase open.
	_, err = s.JoinGroup(context.Background(), &groupv1.JoinGroupRequest{GroupId: group, SessionTimeoutMs: 1000, ProtocolType: "consumer",
		Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
	first := kerr.As(err)
	_, err = s.JoinGroup(context.Background(), &groupv1.JoinGroupRequest{GroupId: group, SessionTimeoutMs: 1000, ProtocolType: "consumer",
		Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
	second := kerr.As(err)
	if first.Code != kerr.MemberIDRequired || second.Code != kerr.MemberIDRequired {
		t.Fatalf("first joins: %v / %v", first, second)
	}
	parked := make(chan error, 1)
	go func() {
		_, err := s.JoinGroup(context.Background(), &groupv1.JoinGroupRequest{GroupId: group, MemberId: first.MemberID, SessionTimeoutMs: 1000,
			ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
		parked <- err
	}()
	waitUntil(t, "the join to park", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		sh := c.shards[0]
		return sh != nil && len(sh.joins) == 1
	})
	h.set(func() { delete(h.leads, 0) })
	if err := <-parked; kerr.CodeOf(err) != kerr.NotCoordinator {
		t.Fatalf("parked join after losing leadership: %v", err)
	}
	waitUntil(t, "the unload", func() bool {
		_, code := fetchErr(s, group)
		return code == kerr.NotCoordinator
	})
}

// A commit answers only once its write returned (acks=all), is fenced
// first, and a new leadership in a new epoch reloads what was written.
func TestCoordinatorCommitsThroughTheLog(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: 2 * time.Millisecond})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })

	commit := func(gen int32, member string, off int64) error {
		_, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: gen, MemberId: member,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: off}}}}})
		return err
	}
	if err := commit(-1, "", 7); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if h.appends != 1 {
		t.Fatalf("%d appends for one commit", h.appends)
	}
	if err := commit(3, "ghost", 8); kerr.CodeOf(err) != kerr.UnknownMemberID {
		t.Fatalf("commit from an unknown member: %v", err)
	}
	if h.appends != 1 {
		t.Fatal("a fenced commit was written")
	}
	// New leader epoch: the coordinator reloads from the log.
	reloadAt(t, h, c, 2)
	resp, code := fetchErr(s, "g")
	if code != kerr.None || resp.GetTopics()[0].GetPartitions()[0].GetCommittedOffset() != 7 {
		t.Fatalf("after reload: %v %s", resp, code)
	}
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (m *manualClock) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *manualClock) advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
}

// Offsets of a group without members expire offsets.retention.minutes
// after their commit, with a tombstone in the log; a group with a member
// keeps its offsets however old they are, and nothing expires early.
func TestOffsetsExpireOnlyForGroupsWithoutMembers(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.retentionMinutes = 10
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: 2 * time.Millisecond, Now: clock.Now})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "idle"); return code == kerr.None })
	commit := func(group string, gen int32, member string) {
		t.Helper()
		_, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: gen, MemberId: member,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 9}}}}})
		if err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	commit("idle", -1, "")
	// A member of "busy" commits and stays (its session is long).
	_, err := s.JoinGroup(context.Background(), &groupv1.JoinGroupRequest{GroupId: "busy", SessionTimeoutMs: 1_800_000, GroupInstanceId: "i",
		ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := s.DescribeGroups(context.Background(), &groupv1.DescribeGroupsRequest{GroupIds: []string{"busy"}})
	m := d.GetGroups()[0]
	if _, err := s.SyncGroup(context.Background(), &groupv1.SyncGroupRequest{GroupId: "busy", GenerationId: m.GetGenerationId(),
		MemberId: m.GetMembers()[0].GetMemberId(), GroupInstanceId: "i"}); err != nil {
		t.Fatal(err)
	}
	commit("busy", m.GetGenerationId(), m.GetMembers()[0].GetMemberId())
	has := func(group string) bool {
		r, code := fetchErr(s, group)
		return code == kerr.None && len(r.GetTopics()) == 1
	}
	clock.advance(9 * time.Minute)
	c.expire() // a tick at the new time, run here so nothing races it
	if !has("idle") || !has("busy") {
		t.Fatal("offsets expired before offsets.retention.minutes")
	}
	clock.advance(2 * time.Minute)
	c.expire()
	if has("idle") {
		t.Fatal("the idle group's offsets outlived offsets.retention.minutes")
	}
	if !has("busy") {
		t.Fatal("a group with a member lost its offsets")
	}
	waitUntil(t, "the idle group's tombstone", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, rec := range h.logs[0] {
			if k, err := DecodeKey(rec.Key); err == nil && k.Group == "idle" && k.IsOffset && rec.Value == nil {
				return true
			}
		}
		return false
	})
}

// A consumer group's offsets expire offsets.retention.minutes after the
// group became Empty (KIP-211), not after their commit: a consumer of an
// idle topic commits nothing new for days, and its offsets went the moment
// it restarted. The moment it became Empty survives a coordinator move.
func TestOffsetsExpireRetentionAfterTheGroupBecameEmpty(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.retentionMinutes = 10
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: 2 * time.Millisecond, Now: clock.Now})
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	gen, member := joinAloneAndCommit(t, s, 9)
	// The topic is idle: the member heartbeats for 11 minutes and
	// commits nothing new.
	for range 11 {
		clock.advance(time.Minute)
		if _, err := s.Heartbeat(ctx, &groupv1.HeartbeatRequest{GroupId: "g", GenerationId: gen, MemberId: member, GroupInstanceId: "i"}); err != nil {
			t.Fatal(err)
		}
		c.expire()
	}
	has := func(s *Service) bool {
		r, code := fetchErr(s, "g")
		return code == kerr.None && len(r.GetTopics()) == 1
	}
	// It restarts: it leaves, and the group is Empty.
	appends := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.appends }
	before := appends()
	if _, err := s.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: "g", Members: []*groupv1.MemberIdentity{{GroupInstanceId: "i"}}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the Empty group written", func() bool { return appends() > before })
	clock.advance(time.Second)
	c.expire()
	if !has(s) {
		t.Fatal("a group Empty for a second lost its offsets, committed 11 minutes ago (retention 10 minutes)")
	}

	// The coordinator moves 5 minutes later; the next one counts from
	// when the group became Empty, not from its load.
	clock.advance(5 * time.Minute)
	c.Close()
	c2 := New(Options{Host: h, Tick: 2 * time.Millisecond, Now: clock.Now})
	defer c2.Close()
	s2 := &Service{C: c2}
	waitUntil(t, "the second load", func() bool { _, code := fetchErr(s2, "g"); return code == kerr.None })
	c2.expire()
	if !has(s2) {
		t.Fatal("the offsets expired at the next coordinator's load, 5 minutes after the group became Empty")
	}
	clock.advance(5 * time.Minute)
	c2.expire()
	if has(s2) {
		t.Fatal("the offsets outlived retention counted from when the group became Empty")
	}
}

// A commit of an offset whose expiry tombstone is still being written lands
// after the tombstone. The tombstone goes through the shard's writer, the
// commit was written at once: while the tombstone's write was slow (an
// acks=all wait), a consumer that came back and committed was
// acknowledged, its commit landed first, and the next coordinator's load
// (or the log cleaner) replayed the tombstone over it.
func TestACommitLandsAfterTheTombstoneOfItsExpiredOffset(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.retentionMinutes = 10
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: time.Hour, Now: clock.Now})
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { c.reconcile(); _, code := fetchErr(s, "g"); return code == kerr.None })
	commit := func(ctx context.Context, off int64) error {
		_, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: off}}}}})
		return err
	}
	if err := commit(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	clock.advance(11 * time.Minute)
	gate, held := make(chan struct{}), make(chan struct{})
	h.set(func() { h.appendGate, h.appendHeld = gate, held })
	c.expire()
	<-held // the tombstone's write is slow

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err := commit(ctx, 7)
	cancel()
	close(gate)
	if err != nil {
		// Not acknowledged: it waited for the tombstone. Once that is
		// written, the commit goes through.
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("commit while the tombstone is written: %v", err)
		}
		if err := commit(context.Background(), 7); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the writes", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return !c.shards[0].writing })
	c.Close()

	c2 := New(Options{Host: h, Tick: time.Hour, Now: clock.Now})
	defer c2.Close()
	s2 := &Service{C: c2}
	var resp *groupv1.OffsetFetchResponse
	waitUntil(t, "the next load", func() bool {
		c2.reconcile()
		var code kerr.Code
		resp, code = fetchErr(s2, "g")
		return code == kerr.None
	})
	if ts := resp.GetTopics(); len(ts) != 1 || ts[0].GetPartitions()[0].GetCommittedOffset() != 7 {
		t.Fatalf("the next coordinator loaded %v, want the acknowledged commit of 7", resp)
	}
}

// A group loaded with more members than group.max.size allows (the limit
// was lowered while its coordinator moved, on a restart) rebalances at
// once, and the member that rejoins past the limit is refused
// GROUP_MAX_SIZE_REACHED while the others form the next generation
// (KIP-389, Kafka's onGroupLoaded). Loaded Stable and left so, a quiet
// group kept every member for good.
func TestALoadedGroupOverItsMaxSizeShedsMembers(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.maxSize = 2
	sub := (&kmsg.ConsumerMemberMetadata{Topics: []string{"orders"}}).AppendTo(nil)
	v := GroupValue{ProtocolType: "consumer", Generation: 4, Protocol: "range", Leader: "m1", StateTimestamp: time.Now().UnixMilli()}
	for _, id := range []string{"m1", "m2", "m3"} {
		v.Members = append(v.Members, MemberValue{MemberID: id, ClientID: "c", SessionTimeout: 30000, RebalanceTimeout: 30000, Subscription: sub})
	}
	h.logs[0] = []recordbatch.Record{{Key: GroupKey("g"), Value: EncodeGroup(v)}}
	c := New(Options{Host: h, Tick: 2 * time.Millisecond})
	defer c.Close()
	s := &Service{C: c}
	ctx := context.Background()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })

	for _, id := range []string{"m1", "m2", "m3"} {
		_, err := s.Heartbeat(ctx, &groupv1.HeartbeatRequest{GroupId: "g", GenerationId: 4, MemberId: id})
		if kerr.CodeOf(err) != kerr.RebalanceInProgress {
			t.Fatalf("heartbeat of %s in a loaded group of 3 with group.max.size 2: %v, want REBALANCE_IN_PROGRESS", id, err)
		}
	}
	join := func(id string) (*groupv1.JoinGroupResponse, error) {
		return s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "g", MemberId: id, SessionTimeoutMs: 30000, RebalanceTimeoutMs: 30000,
			ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range", Metadata: sub}}})
	}
	type answer struct {
		j   *groupv1.JoinGroupResponse
		err error
	}
	answers := make(chan answer, 2)
	for _, id := range []string{"m1", "m2"} {
		go func() { j, err := join(id); answers <- answer{j, err} }()
	}
	waitUntil(t, "two joins parked", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.shards[0].joins) == 2 })
	if _, err := join("m3"); kerr.CodeOf(err) != kerr.GroupMaxSizeReached {
		t.Fatalf("the third member rejoining: %v, want GROUP_MAX_SIZE_REACHED", err)
	}
	for range 2 {
		a := <-answers
		if a.err != nil || a.j.GetGenerationId() != 5 {
			t.Fatalf("a member within the limit rejoining: %v %v, want generation 5", a.j, a.err)
		}
	}
	d, _ := s.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"g"}})
	if g := d.GetGroups()[0]; len(g.GetMembers()) != 2 {
		t.Fatalf("after the rebalance: %d members, want 2", len(g.GetMembers()))
	}
}

// A consumer group with members keeps the offsets of the topics it
// subscribes to however long it idles, but while it is Stable the offset of
// a topic none of its members subscribes to expires retention after its
// commit, as in Kafka; kept, it outlived the topic's use for ever and was
// handed back, however stale, if the group subscribed to the topic again.
// The coordinator that loads the group applies the same rule.
func TestOffsetsOfATopicTheGroupNoLongerReadsExpire(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.retentionMinutes = 10
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: time.Hour, Now: clock.Now})
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { c.reconcile(); _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	sub := (&kmsg.ConsumerMemberMetadata{Topics: []string{"orders"}}).AppendTo(nil)
	j, err := s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "g", SessionTimeoutMs: 1_800_000, GroupInstanceId: "i",
		ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range", Metadata: sub}}})
	if err != nil {
		t.Fatal(err)
	}
	gen, member := j.GetGenerationId(), j.GetMemberId()
	if _, err := s.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: "g", GenerationId: gen, MemberId: member, GroupInstanceId: "i"}); err != nil {
		t.Fatal(err)
	}
	commit := func(s *Service, topics ...string) {
		t.Helper()
		req := &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: gen, MemberId: member, GroupInstanceId: "i"}
		for _, topic := range topics {
			req.Topics = append(req.Topics, &groupv1.OffsetCommitTopic{Name: topic, Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 9}}})
		}
		if _, err := s.OffsetCommit(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	topics := func(s *Service) []string {
		t.Helper()
		r, err := s.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "g"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tr := range r.GetTopics() {
			out = append(out, tr.GetName())
		}
		return out
	}
	// The member heartbeats through 11 idle minutes, a tick each.
	idle := func(c *Coordinator, s *Service) {
		t.Helper()
		for range 11 {
			clock.advance(time.Minute)
			if _, err := s.Heartbeat(ctx, &groupv1.HeartbeatRequest{GroupId: "g", GenerationId: gen, MemberId: member, GroupInstanceId: "i"}); err != nil {
				t.Fatal(err)
			}
			c.expire()
		}
	}
	commit(s, "orders", "legacy")
	idle(c, s)
	if got := topics(s); !slices.Equal(got, []string{"orders"}) {
		t.Fatalf("offsets after 11 idle minutes of a Stable group subscribed to orders: %v, want [orders]", got)
	}

	commit(s, "legacy")
	appends := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.appends }
	waitUntil(t, "the group's records written", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return !c.shards[0].writing })
	before := appends()
	c.Close()
	if appends() != before {
		t.Fatal("writes after the wait")
	}
	c2 := New(Options{Host: h, Tick: time.Hour, Now: clock.Now})
	defer c2.Close()
	s2 := &Service{C: c2}
	waitUntil(t, "the second load", func() bool { c2.reconcile(); _, code := fetchErr(s2, "g"); return code == kerr.None })
	if got := topics(s2); !slices.Equal(got, []string{"legacy", "orders"}) {
		t.Fatalf("loaded offsets %v, want [legacy orders]", got)
	}
	idle(c2, s2)
	if got := topics(s2); !slices.Equal(got, []string{"orders"}) {
		t.Fatalf("offsets after 11 idle minutes under the next coordinator: %v, want [orders]", got)
	}
}

// A group's records land in the order of its changes, however long one
// write takes: here the record of a member's sync is slow and the record of
// its leave is written right after. Appended concurrently, the leave's
// record landed first and a reload brought back the member that had left.
func TestGroupRecordsLandInTheOrderOfTheChanges(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: 2 * time.Millisecond})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	j, err := s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "g", SessionTimeoutMs: 30000, GroupInstanceId: "i",
		ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
	if err != nil {
		t.Fatal(err)
	}
	gate, held := make(chan struct{}), make(chan struct{})
	h.set(func() { h.appendGate, h.appendHeld = gate, held })
	if _, err := s.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: "g", GenerationId: j.GetGenerationId(), MemberId: j.GetMemberId(), GroupInstanceId: "i"}); err != nil {
		t.Fatal(err)
	}
	<-held // the sync's record is being written, slowly
	if _, err := s.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: "g", Members: []*groupv1.MemberIdentity{{GroupInstanceId: "i"}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // an unordered write of the leave would land now
	close(gate)
	var last GroupValue
	waitUntil(t, "both records", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, rec := range h.logs[0] {
			if k, err := DecodeKey(rec.Key); err == nil && !k.IsOffset && rec.Value != nil {
				last, _ = DecodeGroup(rec.Value)
				n++
			}
		}
		return n >= 2
	})
	if len(last.Members) != 0 {
		t.Fatalf("the group's last record is %+v: the sync's record landed after the leave's", last)
	}
}

// Members restored from the log get their sessions from when the load
// ends: they cannot heartbeat while it runs (LOAD_IN_PROGRESS). A load
// longer than a session expired every restored member on the first tick.
func TestRestoredSessionsStartWhenTheLoadEnds(t *testing.T) {
	hh := newHarness(t) // a Stable group with one member, session 1 s
	a := hh.newMember(0)
	hh.wantJoined(a, 1)
	hh.syncLeader(0, a, 1)
	h := newFakeHost(1)
	h.leads[0] = 1
	if _, err := h.Append(context.Background(), TP{OffsetsTopic, 0}, 1, groupBatch(hh.g, t0)); err != nil {
		t.Fatal(err)
	}
	h.readGate = make(chan struct{}) // a slow disk
	clock := &manualClock{now: t0}
	c := New(Options{Host: h, Tick: 2 * time.Millisecond, Now: clock.Now})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load to start", func() bool { _, code := fetchErr(s, "g"); return code == kerr.CoordinatorLoadInProgress })
	clock.advance(2 * time.Second)
	h.set(func() { close(h.readGate); h.readGate = nil })
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	c.expire()
	if _, err := s.Heartbeat(context.Background(), &groupv1.HeartbeatRequest{GroupId: "g", GenerationId: 1, MemberId: a}); err != nil {
		t.Fatalf("the first heartbeat after a 2 s load (session 1 s): %v", err)
	}
}

// TestLagCoversPartitionsThisBrokerDoesNotHost: tidemark_group_lag of a
// committed partition another broker leads comes from the high watermark
// its leader reports (ListOffsets), refreshed in the background; before the
// first answer the partition has no lag sample rather than a wrong one.
func TestLagCoversPartitionsThisBrokerDoesNotHost(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.latest = map[TP]int64{{Topic: "orders", Partition: 0}: 42}
	reg := prometheus.NewRegistry()
	c := New(Options{Host: h, Tick: 2 * time.Millisecond, Registry: reg})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	if _, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
		Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 7}}}}}); err != nil {
		t.Fatal(err)
	}
	lag := func() (float64, bool) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "tidemark_group_lag" {
				continue
			}
			for _, m := range mf.GetMetric() {
				return m.GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	if v, ok := lag(); ok {
		t.Fatalf("lag %v before the leader was asked: want no sample", v)
	}
	c.refreshRemoteHWsOnce(context.Background())
	if v, ok := lag(); !ok || v != 35 {
		t.Fatalf("lag %v (sampled %v), want 42 - 7 = 35", v, ok)
	}
}

// A topic deleted, or deleted and created again, takes its committed
// offsets with it, as Kafka's coordinator removes them on deletion: a
// consumer of the new topic starts at auto.offset.reset, not at an offset
// of records it never had (it skipped them). Offsets of a topic that did
// not exist when committed are left alone.
func TestOffsetsOfADeletedTopicGo(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.topicIDs = map[string]string{"orders": "id-1", "payments": "id-p"}
	c := New(Options{Host: h, Tick: time.Hour}) // the test runs the sweeps
	defer c.Close()
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	commit := func(topic string, offset int64) {
		t.Helper()
		if _, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: topic, Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: offset}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	commit("orders", 5)
	commit("payments", 7)
	commit("ghost", 9) // no such topic
	committed := func() map[string]int64 {
		r, code := fetchErr(s, "g")
		if code != kerr.None {
			t.Fatal(code)
		}
		out := map[string]int64{}
		for _, tp := range r.GetTopics() {
			for _, p := range tp.GetPartitions() {
				out[tp.GetName()] = p.GetCommittedOffset()
			}
		}
		return out
	}
	c.dropOffsetsOfDeletedTopics()
	if got := committed(); len(got) != 3 {
		t.Fatalf("offsets %v before any deletion", got)
	}
	h.set(func() { h.topicIDs["orders"] = "id-2" }) // deleted and created again
	c.dropOffsetsOfDeletedTopics()
	if got := committed(); len(got) != 2 || got["payments"] != 7 || got["ghost"] != 9 {
		t.Fatalf("after orders was created again: %v, want payments and ghost only", got)
	}
	h.set(func() { delete(h.topicIDs, "payments") }) // deleted
	c.dropOffsetsOfDeletedTopics()
	if got := committed(); len(got) != 1 || got["ghost"] != 9 {
		t.Fatalf("after payments was deleted: %v, want ghost only", got)
	}
	waitUntil(t, "the tombstones", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, rec := range h.logs[0] {
			if k, err := DecodeKey(rec.Key); err == nil && k.IsOffset && rec.Value == nil {
				n++
			}
		}
		return n == 2
	})
	// A commit to the new orders is kept.
	commit("orders", 1)
	c.dropOffsetsOfDeletedTopics()
	if got := committed(); got["orders"] != 1 {
		t.Fatalf("a commit to the new orders: %v", got)
	}
}

// A sweep reads the metadata with the coordinator's lock released: a topic
// created again, and committed to under its new id, between that read and
// the sweep taking the lock, keeps its new offset. The sweep compared it
// with the old id it had read and dropped it as the offset of a deleted
// topic; it judges only offsets applied before its read, and the next
// sweep, reading the new id, keeps it.
func TestACommitUnderANewerIDDuringASweepIsKept(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.topicIDs = map[string]string{"orders": "id-1"}
	c := New(Options{Host: h, Tick: time.Hour}) // the test runs the sweeps
	defer c.Close()
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	commit := func(offset int64) {
		t.Helper()
		if _, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: offset}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	orders := func() (int64, bool) {
		t.Helper()
		r, code := fetchErr(s, "g")
		if code != kerr.None {
			t.Fatal(code)
		}
		for _, tp := range r.GetTopics() {
			if tp.GetName() == "orders" && len(tp.GetPartitions()) == 1 {
				return tp.GetPartitions()[0].GetCommittedOffset(), true
			}
		}
		return 0, false
	}
	commit(5)
	// The sweep reads id-1; before it locks, orders is deleted, created
	// again as id-2 and committed to.
	h.set(func() {
		h.afterTopicID = func() {
			h.set(func() { h.topicIDs["orders"] = "id-2" })
			commit(1)
		}
	})
	c.dropOffsetsOfDeletedTopics()
	if off, ok := orders(); !ok || off != 1 {
		t.Fatalf("after the sweep that read the old id: orders %d (committed %v), want the new commit, 1", off, ok)
	}
	c.dropOffsetsOfDeletedTopics()
	if off, ok := orders(); !ok || off != 1 {
		t.Fatalf("after a sweep that read the new id: orders %d (committed %v), want 1", off, ok)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rec := range h.logs[0] {
		if k, err := DecodeKey(rec.Key); err == nil && k.IsOffset && rec.Value == nil {
			t.Fatalf("a tombstone of %s-%d was written: the new commit goes at the next load", k.Topic, k.Partition)
		}
	}
}

// The same race with a load: an offsets partition whose load ends between
// a sweep's read of the metadata and its lock was checked by the load
// against newer metadata than the sweep's; its offset of a topic created
// again, under the new id, was dropped by the sweep as stale.
func TestAnOffsetLoadedDuringASweepUnderANewerIDIsKept(t *testing.T) {
	h := newFakeHost(2)
	h.leads[0] = 1
	h.topicIDs = map[string]string{"orders": "id-1"}
	c := New(Options{Host: h, Tick: time.Hour}) // the test runs the sweeps
	defer c.Close()
	s := &Service{C: c}
	groupOf := func(p int32) string {
		for i := 0; ; i++ {
			if g := fmt.Sprintf("g%d", i); PartitionFor(g, 2) == p {
				return g
			}
		}
	}
	old, loaded := groupOf(0), groupOf(1)
	c.reconcile()
	waitUntil(t, "the load of partition 0", func() bool { _, code := fetchErr(s, old); return code == kerr.None })
	if _, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: old, GenerationId: -1,
		Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 5}}}}}); err != nil {
		t.Fatal(err)
	}
	// Partition 1 holds a commit to orders created again (id-2), written
	// by its previous coordinator; its load waits on a slow disk.
	h.set(func() {
		var b recordbatch.Builder
		appendOffset(&b, loaded, TP{"orders", 0}, OffsetValue{Offset: 1, LeaderEpoch: -1}, "id-2")
		for rec, err := range recordbatch.Batch(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)).Records() {
			if err != nil {
				t.Fatal(err)
			}
			h.logs[1] = append(h.logs[1], recordbatch.Record{Key: rec.Key, Value: rec.Value, Headers: rec.Headers})
		}
		h.readGate, h.leads[1] = make(chan struct{}), 1
	})
	c.reconcile()
	// The sweep reads id-1; before it locks, this broker learns of id-2
	// and the load ends.
	h.set(func() {
		h.afterTopicID = func() {
			h.set(func() { h.topicIDs["orders"] = "id-2"; close(h.readGate); h.readGate = nil })
			waitUntil(t, "the load of partition 1", func() bool { _, code := fetchErr(s, loaded); return code == kerr.None })
		}
	})
	committed := func(group string) (int64, bool) {
		t.Helper()
		r, code := fetchErr(s, group)
		if code != kerr.None {
			t.Fatal(code)
		}
		for _, tp := range r.GetTopics() {
			if tp.GetName() == "orders" && len(tp.GetPartitions()) == 1 {
				return tp.GetPartitions()[0].GetCommittedOffset(), true
			}
		}
		return 0, false
	}
	c.dropOffsetsOfDeletedTopics()
	if off, ok := committed(loaded); !ok || off != 1 {
		t.Fatalf("after the sweep that read the old id: the loaded offset %d (kept %v), want 1", off, ok)
	}
	c.dropOffsetsOfDeletedTopics()
	if off, ok := committed(loaded); !ok || off != 1 {
		t.Fatalf("after a sweep that read the new id: the loaded offset %d (kept %v), want 1", off, ok)
	}
	if off, ok := committed(old); ok {
		t.Fatalf("after a sweep that read the new id: the offset committed under id-1 is still there (%d)", off)
	}
}

// The coordinator's broker restarts and loads its offsets before its
// first UpdateMetadata: sweeps then, when no topic id can be told from a
// missing one, drop nothing, and once the metadata arrives the offsets of
// the live topic stay (a topic created again still takes its own).
func TestOffsetsSurviveSweepsBeforeTheFirstMetadata(t *testing.T) {
	h, c, s := withOrdersAndPaymentsCommitted(t)
	c.dropOffsetsOfDeletedTopics()
	c.Close()

	// Restarted: the same log, a metadata cache not filled yet.
	h.set(func() { h.noMetadata, h.topicIDs = true, map[string]string{} })
	c = New(Options{Host: h, Tick: time.Hour})
	defer c.Close()
	s = &Service{C: c}
	c.reconcile()
	waitUntil(t, "the reload", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	committed := func() map[string]int64 {
		t.Helper()
		r, code := fetchErr(s, "g")
		if code != kerr.None {
			t.Fatal(code)
		}
		out := map[string]int64{}
		for _, tp := range r.GetTopics() {
			for _, p := range tp.GetPartitions() {
				out[tp.GetName()] = p.GetCommittedOffset()
			}
		}
		return out
	}
	for range 3 {
		c.dropOffsetsOfDeletedTopics()
	}
	if got := committed(); len(got) != 2 || got["orders"] != 5 || got["payments"] != 7 {
		t.Fatalf("after sweeps with no metadata yet: %v, want orders 5 and payments 7", got)
	}
	// The first UpdateMetadata: orders as it was, payments created again
	// (its commit's record names the id it was committed under).
	h.set(func() { h.noMetadata, h.topicIDs = false, map[string]string{"orders": "id-1", "payments": "id-p2"} })
	c.dropOffsetsOfDeletedTopics()
	if got := committed(); len(got) != 1 || got["orders"] != 5 {
		t.Fatalf("after the first sweep with metadata: %v, want orders 5 only", got)
	}
}

// A topic deleted and created again while its offsets' coordinator was
// down, or while they moved to another coordinator: the reloaded offset
// knows the id its topic had when it was committed (its record says), so
// it goes as it is loaded (with a tombstone), before any member can fetch
// it, rather than being stamped by the next sweep with the new topic's id
// and kept: the consumers of the new topic resumed at the old offset and
// skipped its first records. The offset of a topic that is still the one
// committed to stays, and so does one whose record has no id (written
// before records carried it): nothing tells its incarnation.
func TestAnOffsetReloadedAfterItsTopicWasCreatedAgainGoes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reload func(h *fakeHost, c *Coordinator) *Coordinator
	}{
		{"restart", func(h *fakeHost, c *Coordinator) *Coordinator {
			c.Close()
			h.set(func() { h.topicIDs["orders"] = "id-2" })
			c = New(Options{Host: h, Tick: time.Hour})
			c.reconcile()
			return c
		}},
		{"move", func(h *fakeHost, c *Coordinator) *Coordinator {
			h.set(func() { delete(h.leads, 0) }) // moved away
			c.reconcile()
			h.set(func() { h.topicIDs["orders"], h.leads[0] = "id-2", 2 }) // and back in a new leadership
			c.reconcile()
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, c, s := withOrdersAndPaymentsCommitted(t)
			h.set(func() {
				h.logs[0] = append(h.logs[0], recordbatch.Record{Key: OffsetKey("old", "orders", 0),
					Value: EncodeOffset(OffsetValue{Offset: 3, LeaderEpoch: -1})})
			})
			c = tc.reload(h, c)
			defer c.Close()
			s = &Service{C: c}
			waitUntil(t, "the reload", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
			for _, sweep := range []string{"before any sweep", "after a sweep"} {
				if sweep == "after a sweep" {
					c.dropOffsetsOfDeletedTopics()
				}
				r, _ := fetchErr(s, "g")
				got := map[string]int64{}
				for _, tp := range r.GetTopics() {
					for _, p := range tp.GetPartitions() {
						got[tp.GetName()] = p.GetCommittedOffset()
					}
				}
				if len(got) != 1 || got["payments"] != 7 {
					t.Fatalf("reloaded, %s: %v, want payments 7 only (orders was created again)", sweep, got)
				}
				if r, _ := fetchErr(s, "old"); len(r.GetTopics()) != 1 || r.GetTopics()[0].GetPartitions()[0].GetCommittedOffset() != 3 {
					t.Fatalf("reloaded, %s: the offset whose record has no topic id: %v, want orders 3 kept", sweep, r)
				}
			}
			waitUntil(t, "the tombstone of orders", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				for _, rec := range h.logs[0] {
					if k, err := DecodeKey(rec.Key); err == nil && k.IsOffset && k.Group == "g" && k.Topic == "orders" && rec.Value == nil {
						return true
					}
				}
				return false
			})
		})
	}
}

// A commit from outside the group (generation -1) while DeleteGroups
// writes the group's tombstones is refused COORDINATOR_NOT_AVAILABLE, as
// Kafka refuses commits to a Dead group: acknowledged, it was lost with
// the group, or brought the group back at the next load.
func TestACommitWhileTheGroupIsDeletedIsRefused(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: 2 * time.Millisecond})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	commit := func(topic string) error {
		_, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: topic, Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 7}}}}})
		return err
	}
	if err := commit("orders"); err != nil {
		t.Fatal(err)
	}
	gate, held := make(chan struct{}), make(chan struct{})
	h.set(func() { h.appendGate, h.appendHeld = gate, held })
	deleted := make(chan *groupv1.DeleteGroupsResponse, 1)
	go func() {
		r, _ := s.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{"g"}})
		deleted <- r
	}()
	<-held // the tombstones are being written
	err := commit("payments")
	close(gate)
	if r := <-deleted; r.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("DeleteGroups: %v", r)
	}
	if kerr.CodeOf(err) != kerr.CoordinatorNotAvailable {
		t.Fatalf("a commit while the group was being deleted: %v, want COORDINATOR_NOT_AVAILABLE", err)
	}
	reloadAt(t, h, c, 2) // a new leadership: the next coordinator loads the log
	if r, _ := fetchErr(s, "g"); len(r.GetTopics()) != 0 {
		t.Fatalf("the deleted group came back at the load with %v", r.GetTopics())
	}
}

// A DeleteGroups whose caller stops waiting while the tombstones are
// written still takes effect once they are: the outcome follows the
// write, not the caller's wait. Reverting when the caller gave up left
// the tombstones queued; a commit acknowledged meanwhile landed ahead of
// them and was gone at the next load, and memory kept serving offsets
// the log had deleted.
func TestADeleteWhoseCallerStopsWaitingFollowsItsWrite(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: 2 * time.Millisecond})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	commit := func(offset int64) error {
		_, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: offset}}}}})
		return err
	}
	if err := commit(7); err != nil {
		t.Fatal(err)
	}
	gate, held := make(chan struct{}), make(chan struct{})
	h.set(func() { h.appendGate, h.appendHeld = gate, held })
	ctx, cancel := context.WithCancel(context.Background())
	deleted := make(chan *groupv1.DeleteGroupsResponse, 1)
	go func() {
		r, _ := s.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{"g"}})
		deleted <- r
	}()
	<-held // the tombstones' acks=all write is slow
	cancel()
	if code := kerr.Code((<-deleted).GetResults()[0].GetErrorCode()); code == kerr.None {
		t.Fatal("DeleteGroups answered success before its tombstones were written")
	}
	// An offset reset meanwhile: refused (retriable), or acknowledged
	// and then kept for good.
	err := commit(9)
	acked := err == nil
	if !acked && kerr.CodeOf(err) != kerr.CoordinatorNotAvailable {
		t.Fatalf("a commit while the delete's write was pending: %v, want success or COORDINATOR_NOT_AVAILABLE", err)
	}
	close(gate)
	waitUntil(t, "the tombstones' write", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.shards[0].writes) == 0
	})
	want := []int64(nil)
	if acked {
		want = []int64{9}
	}
	offsets := func() []int64 {
		t.Helper()
		var got []int64
		waitUntil(t, "an OffsetFetch", func() bool {
			r, code := fetchErr(s, "g")
			got = nil
			for _, tr := range r.GetTopics() {
				for _, p := range tr.GetPartitions() {
					got = append(got, p.GetCommittedOffset())
				}
			}
			return code == kerr.None
		})
		return got
	}
	if got := offsets(); !slices.Equal(got, want) {
		t.Fatalf("offsets once the tombstones were written: %v, want %v", got, want)
	}
	if !acked {
		// The caller's retry finds the group gone, as Kafka answers it.
		r, _ := s.DeleteGroups(context.Background(), &groupv1.DeleteGroupsRequest{GroupIds: []string{"g"}})
		if code := kerr.Code(r.GetResults()[0].GetErrorCode()); code != kerr.GroupIDNotFound {
			t.Fatalf("the retried delete: %s, want GROUP_ID_NOT_FOUND", code)
		}
	}
	reloadAt(t, h, c, 2) // a new leadership: the next coordinator loads the log
	if got := offsets(); !slices.Equal(got, want) {
		t.Fatalf("offsets after the reload: %v, want %v (what the coordinator served before it)", got, want)
	}
}

// A delete whose tombstones reach the log but are not acknowledged in
// time (a dead follower still in the ISR) is done all the same, as in
// Kafka's coordinator: the tombstones commit once the ISR shrinks, so the
// group put back served offsets the next load no longer had.
func TestADeleteWrittenButNotAcknowledgedIsDone(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: 2 * time.Millisecond})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	if _, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
		Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 7}}}}}); err != nil {
		t.Fatal(err)
	}
	h.set(func() { h.appendTimesOut = true })
	r, _ := s.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{"g"}})
	if code := kerr.Code(r.GetResults()[0].GetErrorCode()); code != kerr.CoordinatorNotAvailable {
		t.Fatalf("a delete not acknowledged in time: %s, want COORDINATOR_NOT_AVAILABLE (retriable)", code)
	}
	if f, code := fetchErr(s, "g"); code != kerr.None || len(f.GetTopics()) != 0 {
		t.Fatalf("offsets served after tombstones reached the log: %v %s", f.GetTopics(), code)
	}
	r, _ = s.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{"g"}})
	if code := kerr.Code(r.GetResults()[0].GetErrorCode()); code != kerr.GroupIDNotFound {
		t.Fatalf("the retried delete: %s, want GROUP_ID_NOT_FOUND", code)
	}
	reloadAt(t, h, c, 2)
	if f, _ := fetchErr(s, "g"); len(f.GetTopics()) != 0 {
		t.Fatalf("the deleted group came back at the load with %v", f.GetTopics())
	}
}

// A delete whose write fails puts the group back as it was, in its state
// since the moment it entered it: an Empty group's offsets still expire
// offsets.retention.minutes after it became Empty, not after the failed
// delete.
func TestAFailedDeleteKeepsWhenTheGroupBecameEmpty(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.retentionMinutes = 10
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: time.Hour, Now: clock.Now})
	defer c.Close()
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	joinAloneAndCommit(t, s, 9)
	if _, err := s.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: "g", Members: []*groupv1.MemberIdentity{{GroupInstanceId: "i"}}}); err != nil {
		t.Fatal(err)
	}
	has := func() bool {
		r, code := fetchErr(s, "g")
		return code == kerr.None && len(r.GetTopics()) == 1
	}

	waitUntil(t, "the Empty group written", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.shards[0].writes) == 0
	})
	clock.advance(9 * time.Minute)
	h.set(func() { h.appendErr = kerr.New(kerr.NotEnoughReplicas, "the ISR is below min.insync.replicas") })
	r, _ := s.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{"g"}})
	if code := kerr.Code(r.GetResults()[0].GetErrorCode()); code != kerr.CoordinatorNotAvailable {
		t.Fatalf("a delete whose write failed: %s, want COORDINATOR_NOT_AVAILABLE", code)
	}
	d, _ := s.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"g"}})
	if st := d.GetGroups()[0].GetGroupState(); st != Empty.String() || !has() {
		t.Fatalf("after the failed delete: state %s, offsets kept %v; want Empty with its offsets", st, has())
	}
	clock.advance(2 * time.Minute)
	c.expire()
	if has() {
		t.Fatal("the offsets outlived retention counted from when the group became Empty: the failed delete restarted the count")
	}
}

// An offset for a topic or partition the metadata does not hold is refused
// with UNKNOWN_TOPIC_OR_PARTITION, as Kafka checks its metadata cache: kept,
// it would be handed to the consumers of a topic created later under that
// name. The other partitions of the same request are stored.
func TestACommitToAPartitionThatDoesNotExistIsRefused(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.absent = map[string]bool{"ghost": true}
	c := New(Options{Host: h, Tick: time.Hour})
	defer c.Close()
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	resp, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
		Topics: []*groupv1.OffsetCommitTopic{
			{Name: "ghost", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 9}}},
			{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 5}, {Partition: 1, CommittedOffset: 6}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kerr.Code{}
	for _, tr := range resp.GetTopics() {
		for _, p := range tr.GetPartitions() {
			got[fmt.Sprintf("%s-%d", tr.GetName(), p.GetPartition())] = kerr.Code(p.GetErrorCode())
		}
	}
	want := map[string]kerr.Code{"ghost-0": kerr.UnknownTopicOrPartition, "orders-0": kerr.None, "orders-1": kerr.UnknownTopicOrPartition}
	if !maps.Equal(got, want) {
		t.Fatalf("answers %v, want %v", got, want)
	}
	r, code := fetchErr(s, "g")
	if code != kerr.None {
		t.Fatal(code)
	}
	var stored []string
	for _, tr := range r.GetTopics() {
		for _, p := range tr.GetPartitions() {
			stored = append(stored, fmt.Sprintf("%s-%d@%d", tr.GetName(), p.GetPartition(), p.GetCommittedOffset()))
		}
	}
	if !slices.Equal(stored, []string{"orders-0@5"}) {
		t.Fatalf("stored %v, want only orders-0@5", stored)
	}
}

// OffsetDelete deletes any offset of an Empty group, and of a group with
// members only those of topics no member subscribes to, as Kafka does; the
// tombstones it writes keep the offsets gone through a reload.
func TestOffsetDeleteSparesWhatMembersSubscribeTo(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.absent = map[string]bool{"ghost": true}
	c := New(Options{Host: h, Tick: time.Hour})
	defer c.Close()
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	if _, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1, Topics: []*groupv1.OffsetCommitTopic{
		{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 5}}},
		{Name: "payments", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 7}}},
	}}); err != nil {
		t.Fatal(err)
	}
	stored := func() []string {
		t.Helper()
		r, code := fetchErr(s, "g")
		if code != kerr.None {
			t.Fatal(code)
		}
		var out []string
		for _, tr := range r.GetTopics() {
			for _, p := range tr.GetPartitions() {
				out = append(out, fmt.Sprintf("%s-%d@%d", tr.GetName(), p.GetPartition(), p.GetCommittedOffset()))
			}
		}
		slices.Sort(out)
		return out
	}
	del := func(group string, topics ...string) (map[string]kerr.Code, error) {
		req := &groupv1.OffsetDeleteRequest{GroupId: group}
		for _, tn := range topics {
			req.Topics = append(req.Topics, &groupv1.OffsetDeleteTopic{Name: tn, Partitions: []int32{0}})
		}
		resp, err := s.OffsetDelete(ctx, req)
		got := map[string]kerr.Code{}
		for _, tr := range resp.GetTopics() {
			for _, p := range tr.GetPartitions() {
				got[tr.GetName()] = kerr.Code(p.GetErrorCode())
			}
		}
		return got, err
	}

	sub := (&kmsg.ConsumerMemberMetadata{Topics: []string{"orders"}}).AppendTo(nil)
	j, err := s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "g", SessionTimeoutMs: 30000, GroupInstanceId: "i",
		ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range", Metadata: sub}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: "g", GenerationId: j.GetGenerationId(), MemberId: j.GetMemberId(), GroupInstanceId: "i"}); err != nil {
		t.Fatal(err)
	}
	got, err := del("g", "orders", "payments", "ghost")
	want := map[string]kerr.Code{"orders": kerr.GroupSubscribedToTopic, "payments": kerr.None, "ghost": kerr.UnknownTopicOrPartition}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("delete with a member subscribed to orders: %v, %v; want %v", got, err, want)
	}
	if got := stored(); !slices.Equal(got, []string{"orders-0@5"}) {
		t.Fatalf("stored %v, want orders-0@5 only", got)
	}

	if _, err := s.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: "g", Members: []*groupv1.MemberIdentity{{MemberId: j.GetMemberId(), GroupInstanceId: "i"}}}); err != nil {
		t.Fatal(err)
	}
	if got, err := del("g", "orders"); err != nil || got["orders"] != kerr.None {
		t.Fatalf("delete of an Empty group's offset: %v, %v", got, err)
	}
	if got := stored(); len(got) != 0 {
		t.Fatalf("stored %v after deleting every offset", got)
	}
	if _, err := del("nope", "orders"); kerr.CodeOf(err) != kerr.GroupIDNotFound {
		t.Fatalf("delete for an unknown group: %v, want GROUP_ID_NOT_FOUND", err)
	}

	// A new leadership reloads the partition: the tombstones hold.
	h.set(func() { delete(h.leads, 0) })
	c.reconcile()
	h.set(func() { h.leads[0] = 2 })
	c.reconcile()
	waitUntil(t, "the reload", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	if got := stored(); len(got) != 0 {
		t.Fatalf("after a reload the group has offsets %v again", got)
	}
}

// A reset naming a partition the topic does not have answers that
// partition UNKNOWN_TOPIC_OR_PARTITION (a typo), not a missing leader, and
// resets the others.
func TestAResetNamingAPartitionThatDoesNotExistSaysSo(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: time.Hour})
	defer c.Close()
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	resp, err := s.ResetGroupOffsets(context.Background(), &groupv1.ResetGroupOffsetsRequest{GroupId: "g",
		Spec: groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_EARLIEST, Topics: []*groupv1.ResetGroupOffsetsTopic{{Name: "orders", Partitions: []int32{0, 9}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]kerr.Code{}
	for _, p := range resp.GetPartitions() {
		got[p.GetPartition()] = kerr.Code(p.GetErrorCode())
	}
	if want := map[int32]kerr.Code{0: kerr.None, 9: kerr.UnknownTopicOrPartition}; !maps.Equal(got, want) {
		t.Fatalf("reset answers %v, want %v", got, want)
	}
}

// An OffsetDelete's unnamed topic is refused naming its index, as an
// OffsetCommit's is: it was "topics.name" whatever the index, and nothing
// is deleted.
func TestAnOffsetDeleteOfAnUnnamedTopicNamesItsIndex(t *testing.T) {
	_, c, s := withOrdersAndPaymentsCommitted(t)
	defer c.Close()
	_, err := s.OffsetDelete(context.Background(), &groupv1.OffsetDeleteRequest{GroupId: "g",
		Topics: []*groupv1.OffsetDeleteTopic{{Name: "orders", Partitions: []int32{0}}, {Partitions: []int32{0}}}})
	if e := kerr.As(err); e == nil || e.Code != kerr.InvalidTopicException || e.Field != "topics[1].name" {
		t.Fatalf("an OffsetDelete naming no topic at index 1: %+v, want INVALID_TOPIC_EXCEPTION naming topics[1].name", e)
	}
	if r, _ := fetchErr(s, "g"); len(r.GetTopics()) != 2 {
		t.Fatalf("offsets after the refused delete: %v, want orders and payments kept", r)
	}
}

// A group whose last member left and that has no offsets is forgotten by
// the next cleanup with a tombstone for its metadata record, so a reload
// does not bring it back.
func TestAForgottenGroupStaysForgottenThroughAReload(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.cleanupEvery = 10 * time.Minute
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: time.Hour, Now: clock.Now}) // the test runs the ticks
	defer c.Close()
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	j, err := s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "g", SessionTimeoutMs: 30000, GroupInstanceId: "i",
		ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: "g", GenerationId: j.GetGenerationId(), MemberId: j.GetMemberId(), GroupInstanceId: "i"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: "g", Members: []*groupv1.MemberIdentity{{MemberId: j.GetMemberId(), GroupInstanceId: "i"}}}); err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		t.Helper()
		r, err := s.ListGroups(ctx, &groupv1.ListGroupsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, g := range r.GetGroups() {
			ids = append(ids, g.GetGroupId())
		}
		return ids
	}
	c.expire()
	if ids := listed(); !slices.Equal(ids, []string{"g"}) {
		t.Fatalf("groups %v after a tick before the cleanup, want g still listed", ids)
	}
	clock.advance(10 * time.Minute)
	c.expire()
	if ids := listed(); len(ids) != 0 {
		t.Fatalf("groups %v after the cleanup, want g forgotten", ids)
	}
	waitUntil(t, "the tombstone", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.logs[0]) == 0 {
			return false
		}
		last := h.logs[0][len(h.logs[0])-1]
		k, err := DecodeKey(last.Key)
		return err == nil && !k.IsOffset && last.Value == nil
	})
	h.set(func() { delete(h.leads, 0) })
	c.reconcile()
	h.set(func() { h.leads[0] = 2 })
	c.reconcile()
	waitUntil(t, "the reload", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	if ids := listed(); len(ids) != 0 {
		t.Fatalf("groups %v after a reload, want g still forgotten", ids)
	}
}

// Leadership of the offsets partition lost and regained between two
// leadership checks: another coordinator led in between (it may have
// moved the group to a new generation), so the groups loaded in the old
// leadership answer nothing more, and a write begun in it is not appended
// in the new one. Otherwise a member of a generation the other coordinator
// had fenced committed, acknowledged, over that coordinator's commits.
func TestAnOldLeadershipNeitherAnswersNorWrites(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: time.Hour}) // the test runs the leadership checks
	defer c.Close()
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	commit := func(off int64) error {
		_, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: off}}}}})
		return err
	}
	appends := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.appends
	}

	// A commit whose write is held while the leadership moves away and back.
	gate, held := make(chan struct{}), make(chan struct{})
	h.set(func() { h.appendGate, h.appendHeld = gate, held })
	done := make(chan error, 1)
	go func() { done <- commit(5) }()
	<-held
	h.set(func() { h.leads[0] = 3 })
	close(gate)
	if err := <-done; kerr.CodeOf(err) != kerr.NotCoordinator {
		t.Fatalf("a commit written after its leadership ended: %v, want NOT_COORDINATOR", err)
	}
	if n := appends(); n != 0 {
		t.Fatalf("%d appends in the new leadership from the old one", n)
	}

	// Before the next leadership check, the old leadership's groups answer
	// nothing.
	if err := commit(6); kerr.CodeOf(err) != kerr.CoordinatorLoadInProgress {
		t.Fatalf("a commit to the old leadership: %v, want COORDINATOR_LOAD_IN_PROGRESS", err)
	}
	if _, code := fetchErr(s, "g"); code != kerr.CoordinatorLoadInProgress {
		t.Fatalf("an offset fetch from the old leadership: %s, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	h.set(func() { delete(h.leads, 0) })
	if _, code := fetchErr(s, "g"); code != kerr.NotCoordinator {
		t.Fatalf("an offset fetch after the leadership ended: %s, want NOT_COORDINATOR", code)
	}
	if n := appends(); n != 0 {
		t.Fatalf("%d appends from an old leadership", n)
	}
}

// withOrdersAndPaymentsCommitted is a coordinator leading offsets
// partition 0, loaded, whose group g has committed offset 5 of orders
// (topic id id-1) and 7 of payments; the test runs the sweeps.
func withOrdersAndPaymentsCommitted(t *testing.T) (*fakeHost, *Coordinator, *Service) {
	t.Helper()
	h := newFakeHost(1)
	h.leads[0] = 1
	h.topicIDs = map[string]string{"orders": "id-1", "payments": "id-p"}
	c := New(Options{Host: h, Tick: time.Hour})
	s := &Service{C: c}
	c.reconcile()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	for topic, offset := range map[string]int64{"orders": 5, "payments": 7} {
		if _, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: topic, Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: offset}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	return h, c, s
}

// reloadAt gives the fake host's broker a new leadership of offsets
// partition 0 at epoch and waits for the coordinator to load it from the
// log.
func reloadAt(t *testing.T, h *fakeHost, c *Coordinator, epoch int32) {
	t.Helper()
	h.set(func() { h.leads[0] = epoch })
	waitUntil(t, "the reload", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		sh := c.shards[0]
		return sh != nil && sh.epoch == epoch && !sh.loading
	})
}

// joinAloneAndCommit makes static member "i" the only member of group "g"
// (a session of 30 minutes) and commits offset of orders-0 in its
// generation, which it returns with the member id.
func joinAloneAndCommit(t *testing.T, s *Service, offset int64) (int32, string) {
	t.Helper()
	ctx := context.Background()
	_, err := s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "g", SessionTimeoutMs: 1_800_000, GroupInstanceId: "i",
		ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := s.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"g"}})
	gen, member := d.GetGroups()[0].GetGenerationId(), d.GetGroups()[0].GetMembers()[0].GetMemberId()
	if _, err := s.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: "g", GenerationId: gen, MemberId: member, GroupInstanceId: "i"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: "g", GenerationId: gen, MemberId: member, GroupInstanceId: "i",
		Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: offset}}}}}); err != nil {
		t.Fatal(err)
	}
	return gen, member
}
