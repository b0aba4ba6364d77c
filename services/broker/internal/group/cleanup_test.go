package group

import (
	"context"
	"slices"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/topicconfig"
)

// defaultCleanupEvery is offsets.retention.check.interval.ms by default.
var defaultCleanupEvery = time.Duration(topicconfig.DefaultBroker().OffsetsRetentionCheckIntervalMs) * time.Millisecond

// joined has a consumer join group and sync, alone, with a session longer
// than the cleanup interval; it returns the member's id.
func (r *retentionRig) joined(group string) string {
	r.t.Helper()
	ctx := context.Background()
	j, err := r.s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: group, SessionTimeoutMs: 1_800_000, GroupInstanceId: "i",
		ProtocolType: ConsumerProtocolType, Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.s.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: group, GenerationId: j.GetGenerationId(), MemberId: j.GetMemberId(), GroupInstanceId: "i"}); err != nil {
		r.t.Fatal(err)
	}
	return j.GetMemberId()
}

// left has a consumer join group and leave without committing: the group
// is Empty and has no offsets.
func (r *retentionRig) left(group string) {
	r.t.Helper()
	r.joined(group)
	if _, err := r.s.LeaveGroup(context.Background(), &groupv1.LeaveGroupRequest{GroupId: group, Members: []*groupv1.MemberIdentity{{GroupInstanceId: "i"}}}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *retentionRig) state(group string) string {
	r.t.Helper()
	d, err := r.s.DescribeGroups(context.Background(), &groupv1.DescribeGroupsRequest{GroupIds: []string{group}})
	if err != nil {
		r.t.Fatal(err)
	}
	return d.GetGroups()[0].GetGroupState()
}

// ticks runs n coordinator ticks of the default 50 ms, none of them due
// for the cleanup.
func (r *retentionRig) ticks(n int) {
	for range n {
		r.clock.advance(50 * time.Millisecond)
		r.c.expire()
	}
}

// An Empty group without offsets is forgotten by the cleanup, every
// offsets.retention.check.interval.ms, as Kafka's cleanupGroupMetadata
// does: until then it is listed and describes as Empty; a group that got
// a member again before the cleanup stays. Before, the next 50 ms tick
// dropped it.
func TestAnEmptyGroupWithoutOffsetsStaysUntilTheCleanup(t *testing.T) {
	h := newFakeHost(1)
	h.cleanupEvery = defaultCleanupEvery
	r := newRetentionRig(t, h, &manualClock{now: time.Unix(1_700_000_000, 0)})
	defer func() { r.c.Close() }()
	r.left("quiet")
	r.left("back")
	r.ticks(5)
	if got := r.listed(); !slices.Equal(got, []string{"back", "quiet"}) {
		t.Fatalf("listed %v five ticks after the members left, want [back quiet]", got)
	}
	if st := r.state("quiet"); st != Empty.String() {
		t.Fatalf("quiet describes as %q before the cleanup, want %q", st, Empty.String())
	}
	r.joined("back")
	r.clock.advance(defaultCleanupEvery)
	r.c.expire()
	if got := r.listed(); !slices.Equal(got, []string{"back"}) {
		t.Fatalf("listed %v after the cleanup, want [back]: quiet forgotten, back has a member again", got)
	}
	if st := r.state("quiet"); st != Dead.String() {
		t.Fatalf("quiet describes as %q after the cleanup, want %q", st, Dead.String())
	}
	r = r.moved()
	if got := r.listed(); !slices.Equal(got, []string{"back"}) {
		t.Fatalf("listed %v after a coordinator move, want [back]: quiet's tombstone keeps it forgotten", got)
	}
}

// A coordinator move keeps an Empty group without offsets: its metadata
// record has no tombstone, so the next coordinator loads it, lists it
// Empty, and forgets it at its own cleanup.
func TestAnEmptyGroupWithoutOffsetsSurvivesACoordinatorMove(t *testing.T) {
	h := newFakeHost(1)
	h.cleanupEvery = defaultCleanupEvery
	r := newRetentionRig(t, h, &manualClock{now: time.Unix(1_700_000_000, 0)})
	r.left("quiet")
	r.ticks(3)
	r = r.moved()
	defer func() { r.c.Close() }()
	r.ticks(5)
	if got := r.listed(); !slices.Equal(got, []string{"quiet"}) {
		t.Fatalf("listed %v on the next coordinator, want [quiet]", got)
	}
	if st := r.state("quiet"); st != Empty.String() {
		t.Fatalf("quiet describes as %q on the next coordinator, want %q", st, Empty.String())
	}
	r.clock.advance(defaultCleanupEvery)
	r.c.expire()
	if got := r.listed(); len(got) != 0 {
		t.Fatalf("listed %v after the next coordinator's cleanup, want none", got)
	}
	r = r.moved()
	if got := r.listed(); len(got) != 0 {
		t.Fatalf("listed %v after another move, want none", got)
	}
}

// Offsets expire at the cleanup too, not as soon as retention has passed:
// Kafka looks every offsets.retention.check.interval.ms. Before, they were
// looked for every second.
func TestOffsetsExpireAtTheCleanup(t *testing.T) {
	h := newFakeHost(1)
	h.cleanupEvery = 15 * time.Minute
	r := newRetentionRig(t, h, &manualClock{now: time.Unix(1_700_000_000, 0)})
	defer r.c.Close()
	r.commitFromOutside("simple", 5)
	r.clock.advance(10*time.Minute + time.Second) // retention (10 minutes) has passed
	r.c.expire()
	if !r.has("simple") {
		t.Fatal("the offset expired before the cleanup")
	}
	r.clock.advance(5 * time.Minute)
	r.c.expire()
	if r.has("simple") {
		t.Fatal("the offset outlived the cleanup after its retention")
	}
}
