package group

import (
	"context"
	"slices"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// A commit with a retention of its own (Kafka's OffsetCommit v2-v4
// retention_time_ms) expires that long after the commit, as Kafka's
// expireTimestamp does, instead of offsets.retention.minutes: sooner or
// later than it, stored as Kafka stores it (offset value v1 with the
// expire timestamp), so a coordinator move keeps it. A retention of -1 is
// the broker's. Before, the retention asked for was ignored.
func TestACommitsOwnRetentionIsItsExpiry(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.retentionMinutes = 10
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: 2 * time.Millisecond, Now: clock.Now})
	s := &Service{C: c}
	ctx := context.Background()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "short"); return code == kerr.None })
	commit := func(group string, retention *int64) {
		t.Helper()
		if _, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: -1, RetentionTimeMs: retention,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 9, CommittedLeaderEpoch: 4}}}}}); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	minus1 := int64(-1)
	commit("short", ms(2*time.Minute))
	commit("long", ms(30*time.Minute))
	commit("default", &minus1)
	has := func(s *Service, group string) bool {
		r, code := fetchErr(s, group)
		return code == kerr.None && len(r.GetTopics()) == 1
	}

	clock.advance(time.Minute)
	c.expire()
	if !has(s, "short") || !has(s, "long") || !has(s, "default") {
		t.Fatal("an offset expired a minute after its commit")
	}
	clock.advance(time.Minute)
	c.expire()
	if has(s, "short") {
		t.Error("the offset committed with a retention of 2 minutes outlived it")
	}

	// The coordinator moves: the next one reads the expiry from the log.
	c.Close()
	c2 := New(Options{Host: h, Tick: 2 * time.Millisecond, Now: clock.Now})
	defer c2.Close()
	s2 := &Service{C: c2}
	waitUntil(t, "the second load", func() bool { _, code := fetchErr(s2, "long"); return code == kerr.None })
	r, _ := fetchErr(s2, "long")
	if p := r.GetTopics()[0].GetPartitions()[0]; p.GetCommittedOffset() != 9 || p.GetCommittedLeaderEpoch() != -1 {
		t.Errorf("reloaded offset %d at epoch %d; want 9 at -1 (the value with an expiry has no leader epoch, as Kafka's v1)",
			p.GetCommittedOffset(), p.GetCommittedLeaderEpoch())
	}
	clock.advance(9 * time.Minute) // 11 minutes after the commits
	c2.expire()
	if !has(s2, "long") {
		t.Error("the offset committed with a retention of 30 minutes went with offsets.retention.minutes (10)")
	}
	if has(s2, "default") {
		t.Error("the offset committed with retention -1 outlived offsets.retention.minutes")
	}
	clock.advance(20 * time.Minute)
	c2.expire()
	if has(s2, "long") {
		t.Error("the offset committed with a retention of 30 minutes outlived it")
	}
}

// The offset commit value with an expire timestamp is Kafka's v1, and one
// without is v3; both read back as written (v1 without a leader epoch),
// and v1's -1 expire timestamp is none, as Kafka reads it.
func TestOffsetValueWithAnExpiryIsKafkasV1(t *testing.T) {
	with := OffsetValue{Offset: 5, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: 61000}
	b := EncodeOffset(with)
	if b[0] != 0 || b[1] != 1 {
		t.Fatalf("value with an expiry written as version %d, want 1", int(b[0])<<8|int(b[1]))
	}
	got, err := DecodeOffset(b)
	if want := (OffsetValue{Offset: 5, LeaderEpoch: -1, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: 61000}); err != nil || got != want {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
	without := OffsetValue{Offset: 5, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: 1000}
	if b := EncodeOffset(without); b[1] != 3 {
		t.Fatalf("value without an expiry written as version %d, want 3", b[1])
	} else if got, err := DecodeOffset(b); err != nil || got != without {
		t.Fatalf("read back %+v, %v; want %+v", got, err, without)
	}
	none := EncodeOffset(OffsetValue{Offset: 5, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: 7})
	copy(none[len(none)-8:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if got, err := DecodeOffset(none); err != nil || got.ExpireTimestamp != 0 {
		t.Fatalf("v1 with expire timestamp -1 read as %+v, %v; want no expiry", got, err)
	}
}

// retentionRig is a coordinator with offsets.retention.minutes 10 over a
// clock the test moves; the test runs the ticks (c.expire).
type retentionRig struct {
	t     *testing.T
	h     *fakeHost
	clock *manualClock
	c     *Coordinator
	s     *Service
}

func newRetentionRig(t *testing.T, h *fakeHost, clock *manualClock) *retentionRig {
	t.Helper()
	h.leads[0] = 1
	h.retentionMinutes = 10
	c := New(Options{Host: h, Tick: time.Hour, Now: clock.Now})
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { c.reconcile(); _, code := fetchErr(s, "probe"); return code == kerr.None })
	return &retentionRig{t: t, h: h, clock: clock, c: c, s: s}
}

// moved closes the coordinator once its queued writes are appended and
// loads the partition in the next one, as a coordinator move does.
func (r *retentionRig) moved() *retentionRig {
	r.t.Helper()
	waitUntil(r.t, "the queued writes", func() bool { r.c.mu.Lock(); defer r.c.mu.Unlock(); return !r.c.shards[0].writing })
	r.c.Close()
	return newRetentionRig(r.t, r.h, r.clock)
}

func (r *retentionRig) commitFromOutside(group string, offset int64) {
	r.t.Helper()
	if _, err := r.s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: -1,
		Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: offset}}}}}); err != nil {
		r.t.Fatalf("commit to %s: %v", group, err)
	}
}

// emptied has a consumer join group, commit and leave: the group is Empty
// from now on, with a protocol type.
func (r *retentionRig) emptied(group string) {
	r.t.Helper()
	ctx := context.Background()
	j, err := r.s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: group, SessionTimeoutMs: 30000, GroupInstanceId: "i",
		ProtocolType: ConsumerProtocolType, Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.s.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: group, GenerationId: j.GetGenerationId(), MemberId: j.GetMemberId(), GroupInstanceId: "i"}); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: j.GetGenerationId(), MemberId: j.GetMemberId(), GroupInstanceId: "i",
		Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 9}}}}}); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.s.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: group, Members: []*groupv1.MemberIdentity{{GroupInstanceId: "i"}}}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *retentionRig) has(group string) bool {
	r.t.Helper()
	resp, code := fetchErr(r.s, group)
	return code == kerr.None && len(resp.GetTopics()) == 1
}

func (r *retentionRig) listed() []string {
	r.t.Helper()
	resp, err := r.s.ListGroups(context.Background(), &groupv1.ListGroupsRequest{})
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []string
	for _, g := range resp.GetGroups() {
		ids = append(ids, g.GetGroupId())
	}
	slices.Sort(ids)
	return ids
}

// The offsets of a group that had members expire retention after it
// became Empty, as Kafka counts them (its currentStateTimestamp), however
// recent their commit: a commit from outside the Empty group (a reset)
// does not put the expiry off. The moment it became Empty is in its
// metadata record, so the next coordinator counts from it too. Before,
// retention counted from the later of the two, and the reset offset lived
// 5 minutes longer than Kafka keeps it.
func TestAnEmptiedGroupsOffsetsCountFromWhenItBecameEmpty(t *testing.T) {
	r := newRetentionRig(t, newFakeHost(1), &manualClock{now: time.Unix(1_700_000_000, 0)})
	r.emptied("g")
	r.clock.advance(5 * time.Minute)
	r.commitFromOutside("g", 12) // a reset, 5 minutes after the group became Empty
	r.clock.advance(time.Minute)
	r = r.moved()
	defer r.c.Close()

	r.clock.advance(4*time.Minute - time.Second) // 9m59s after the group became Empty
	r.c.expire()
	if !r.has("g") {
		t.Fatal("the offsets expired before retention had passed since the group became Empty")
	}
	r.clock.advance(2 * time.Second) // 10m01s after it became Empty, 5m01s after the reset
	r.c.expire()
	if r.has("g") {
		t.Fatal("the reset offset outlived retention counted from when the group became Empty (counted from the reset instead)")
	}
}

// A metadata record without the moment of the group's last change of
// state (-1, as Kafka writes a group that has none) leaves it unknown: the
// offsets of the Empty group then expire retention after their commit, as
// Kafka's do. Before, the load time stood in for it, and every coordinator
// move put the expiry off by up to the retention.
func TestOffsetsOfAGroupWithoutAStateTimeCountFromTheirCommit(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := newFakeHost(1)
	committed := t0.Add(-9 * time.Minute)
	h.logs[0] = []recordbatch.Record{
		{Offset: 0, Key: GroupKey("g"), Value: EncodeGroup(GroupValue{ProtocolType: ConsumerProtocolType, Generation: 3, StateTimestamp: -1})},
		{Offset: 1, Key: OffsetKey("g", "orders", 0), Value: EncodeOffset(OffsetValue{Offset: 9, LeaderEpoch: -1, CommitTimestamp: committed.UnixMilli()})},
	}
	r := newRetentionRig(t, h, &manualClock{now: t0})
	defer r.c.Close()
	if !r.has("g") {
		t.Fatal("the loaded offset is missing")
	}
	r.clock.advance(time.Minute) // retention after the commit, a minute after the load
	r.c.expire()
	if r.has("g") {
		t.Fatal("the offset outlived retention after its commit (counted from the load instead)")
	}
}

// The moment of a group's last change of state is written as it was
// loaded: a Stable group's as it became Stable, not the load time, and an
// unknown one stays unknown (-1), as Kafka keeps its currentStateTimestamp.
func TestARestoredGroupKeepsItsStateTime(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	stable := GroupValue{ProtocolType: ConsumerProtocolType, Generation: 2, Protocol: "range", Leader: "m", StateTimestamp: now.Add(-time.Hour).UnixMilli(),
		Members: []MemberValue{{MemberID: "m", ClientID: "c", SessionTimeout: 30000, RebalanceTimeout: 30000}}}
	for _, v := range []GroupValue{
		stable,
		{ProtocolType: ConsumerProtocolType, Generation: 3, StateTimestamp: now.Add(-time.Minute).UnixMilli()},
		{ProtocolType: ConsumerProtocolType, Generation: 3, StateTimestamp: -1},
	} {
		if got := Restore("g", v, now).Value().StateTimestamp; got != v.StateTimestamp {
			t.Errorf("group of %d members restored from state timestamp %d writes %d", len(v.Members), v.StateTimestamp, got)
		}
	}
}

// An offset expires once retention has passed to the millisecond, as
// Kafka's currentTimestamp - base >= retention: after its commit for a
// group only committed to from outside, after the group became Empty for
// one that had members. Before, it lived one check longer (>).
func TestAnOffsetExpiresWhenRetentionHasJustPassed(t *testing.T) {
	r := newRetentionRig(t, newFakeHost(1), &manualClock{now: time.Unix(1_700_000_000, 0)})
	defer r.c.Close()
	r.commitFromOutside("simple", 5)
	r.emptied("g")
	r.clock.advance(10*time.Minute - time.Second)
	r.c.expire()
	if !r.has("simple") || !r.has("g") {
		t.Fatal("an offset expired before retention had passed")
	}
	r.clock.advance(time.Second) // retention to the millisecond
	r.c.expire()
	if r.has("simple") {
		t.Error("the offset committed from outside outlived retention after its commit, to the millisecond")
	}
	if r.has("g") {
		t.Error("the emptied group's offset outlived retention after the group became Empty, to the millisecond")
	}
}

// An Empty group goes with its last offsets, in the same check and its
// tombstone in the same batch as theirs, as Kafka's cleanup deletes it:
// it is no longer listed, describes as Dead, and a reload does not bring
// it back. Before, it stayed listed, Empty, until the next tick.
func TestAnEmptyGroupGoesWithItsLastOffsets(t *testing.T) {
	r := newRetentionRig(t, newFakeHost(1), &manualClock{now: time.Unix(1_700_000_000, 0)})
	r.commitFromOutside("simple", 5)
	r.emptied("g")
	if got := r.listed(); !slices.Equal(got, []string{"g", "simple"}) {
		t.Fatalf("listed %v, want [g simple]", got)
	}
	r.clock.advance(10*time.Minute + time.Second)
	r.c.expire()
	if got := r.listed(); len(got) != 0 {
		t.Fatalf("listed %v after their last offsets expired, want none", got)
	}
	d, err := r.s.DescribeGroups(context.Background(), &groupv1.DescribeGroupsRequest{GroupIds: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetGroups()[0].GetGroupState(); st != Dead.String() {
		t.Fatalf("g describes as %q after its last offsets expired, want %q", st, Dead.String())
	}
	r = r.moved()
	defer r.c.Close()
	if got := r.listed(); len(got) != 0 {
		t.Fatalf("listed %v after a reload, want none", got)
	}
}
