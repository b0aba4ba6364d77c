package group

import (
	"context"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
)

// A consumer group whose last member left keeps its protocol type, as
// Kafka's initNextGeneration keeps it: DescribeGroups and ListGroups show
// the Empty group as "consumer", also after a coordinator move. A group
// only ever committed to from outside (a consumer without group
// management) has none, "" as in Kafka. Before, an emptied group showed "".
func TestAnEmptiedGroupKeepsItsProtocolType(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: 2 * time.Millisecond})
	s := &Service{C: c}
	ctx := context.Background()
	waitUntil(t, "the load", func() bool { _, code := fetchErr(s, "g"); return code == kerr.None })
	if _, err := s.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "g", SessionTimeoutMs: 1_800_000, GroupInstanceId: "i",
		ProtocolType: "consumer", Protocols: []*groupv1.JoinGroupProtocol{{Name: "range"}}}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"g"}})
	gen, member := d.GetGroups()[0].GetGenerationId(), d.GetGroups()[0].GetMembers()[0].GetMemberId()
	if _, err := s.SyncGroup(ctx, &groupv1.SyncGroupRequest{GroupId: "g", GenerationId: gen, MemberId: member, GroupInstanceId: "i"}); err != nil {
		t.Fatal(err)
	}
	commit := func(group string, gen int32, member, instance string) {
		t.Helper()
		if _, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: gen, MemberId: member, GroupInstanceId: instance,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 9}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	commit("g", gen, member, "i")
	commit("simple", -1, "", "")
	appends := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.appends }
	before := appends()
	if _, err := s.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: "g", Members: []*groupv1.MemberIdentity{{GroupInstanceId: "i"}}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the Empty group written", func() bool { return appends() > before })

	check := func(s *Service, when string) {
		t.Helper()
		d, err := s.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"g", "simple"}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"g": "consumer", "simple": ""}
		for _, g := range d.GetGroups() {
			if g.GetGroupState() != "Empty" || g.GetProtocolType() != want[g.GetGroupId()] || g.GetProtocolName() != "" {
				t.Errorf("%s: DescribeGroups %s: state %s, protocol type %q, protocol %q; want Empty, %q, \"\"",
					when, g.GetGroupId(), g.GetGroupState(), g.GetProtocolType(), g.GetProtocolName(), want[g.GetGroupId()])
			}
		}
		l, err := s.ListGroups(ctx, &groupv1.ListGroupsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.GetGroups()) != 2 {
			t.Fatalf("%s: ListGroups %v, want g and simple", when, l.GetGroups())
		}
		for _, g := range l.GetGroups() {
			if g.GetProtocolType() != want[g.GetGroupId()] {
				t.Errorf("%s: ListGroups %s: protocol type %q, want %q", when, g.GetGroupId(), g.GetProtocolType(), want[g.GetGroupId()])
			}
		}
	}
	check(s, "after the last member left")

	// A rejoin of another protocol type is taken, as Kafka's Empty group
	// takes any: the type kept is what the group was, not a constraint.
	c.Close()
	c2 := New(Options{Host: h, Tick: 2 * time.Millisecond})
	defer c2.Close()
	s2 := &Service{C: c2}
	waitUntil(t, "the second load", func() bool { _, code := fetchErr(s2, "g"); return code == kerr.None })
	check(s2, "after a coordinator move")
	if _, err := s2.JoinGroup(ctx, &groupv1.JoinGroupRequest{GroupId: "g", SessionTimeoutMs: 1_800_000, GroupInstanceId: "j",
		ProtocolType: "connect", Protocols: []*groupv1.JoinGroupProtocol{{Name: "sessioned"}}}); err != nil {
		t.Fatalf("a member of another protocol type joining the Empty group: %v", err)
	}
}
