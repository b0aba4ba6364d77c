package kafkagroups

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/broker/internal/group"
	"tidemark.io/services/broker/internal/kafkaapi"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// refusing answers every call with err, as the coordinator does when the
// request as a whole is refused.
type refusing struct {
	groupv1.UnimplementedGroupServiceServer
	err error
}

func (r refusing) JoinGroup(context.Context, *groupv1.JoinGroupRequest) (*groupv1.JoinGroupResponse, error) {
	return nil, r.err
}

func (r refusing) OffsetCommit(context.Context, *groupv1.OffsetCommitRequest) (*groupv1.OffsetCommitResponse, error) {
	return nil, r.err
}

func (r refusing) OffsetFetch(context.Context, *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
	return nil, r.err
}

func (r refusing) FindCoordinator(context.Context, *groupv1.FindCoordinatorRequest) (*groupv1.FindCoordinatorResponse, error) {
	return &groupv1.FindCoordinatorResponse{Coordinator: &commonv1.Node{Id: 2, Address: "grpc:9092"}}, nil
}

func (r refusing) LeaveGroup(_ context.Context, req *groupv1.LeaveGroupRequest) (*groupv1.LeaveGroupResponse, error) {
	out := &groupv1.LeaveGroupResponse{}
	for _, m := range req.GetMembers() {
		out.Members = append(out.Members, &groupv1.LeaveGroupMemberResult{MemberId: m.GetMemberId(), ErrorCode: commonv1.ErrorCode(kerr.UnknownMemberID)})
	}
	return out, nil
}

func handle[Resp kmsg.Response](t *testing.T, g *Groups, req kmsg.Request, version int16) Resp {
	t.Helper()
	req.SetVersion(version)
	return g.Handle(context.Background(), identity.Anon, req).(Resp)
}

// A request-wide refusal reaches the client as the same Kafka code, where
// the version carries it: top level, each partition, each group.
func TestErrorsTravelAsTheirKafkaCode(t *testing.T) {
	fenced := kerr.New(kerr.IllegalGeneration, "generation 3 is not 4")
	g := &Groups{Service: refusing{err: fenced}}

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
	ocr := handle[*kmsg.OffsetCommitResponse](t, g, oc, 8)
	if len(ocr.Topics) != 1 || len(ocr.Topics[0].Partitions) != 2 {
		t.Fatalf("commit answer %+v", ocr.Topics)
	}
	for _, p := range ocr.Topics[0].Partitions {
		if p.ErrorCode != int16(kerr.IllegalGeneration) {
			t.Fatalf("partition %d: code %d", p.Partition, p.ErrorCode)
		}
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "g"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if r := handle[*kmsg.OffsetFetchResponse](t, g, of, 1); len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != int16(kerr.IllegalGeneration) {
		t.Fatalf("v1 fetch: %+v", r.Topics)
	}
	if r := handle[*kmsg.OffsetFetchResponse](t, g, of, 7); r.ErrorCode != int16(kerr.IllegalGeneration) {
		t.Fatalf("v7 fetch: code %d", r.ErrorCode)
	}
	of8 := kmsg.NewPtrOffsetFetchRequest()
	of8.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "a"}, {Group: "b"}}
	if r := handle[*kmsg.OffsetFetchResponse](t, g, of8, 8); len(r.Groups) != 2 || r.Groups[1].ErrorCode != int16(kerr.IllegalGeneration) {
		t.Fatalf("v8 fetch: %+v", r.Groups)
	}

	required := &kerr.Error{Code: kerr.MemberIDRequired, Message: "join again", MemberID: "m-1"}
	jr := handle[*kmsg.JoinGroupResponse](t, &Groups{Service: refusing{err: required}}, kmsg.NewPtrJoinGroupRequest(), 9)
	if jr.ErrorCode != int16(kerr.MemberIDRequired) || jr.MemberID != "m-1" {
		t.Fatalf("join: code %d member %q, want MEMBER_ID_REQUIRED with m-1", jr.ErrorCode, jr.MemberID)
	}
}

// FindCoordinator names the coordinator's Kafka address, one key or a
// batch; a transaction key is refused, and a coordinator without a Kafka
// listener is COORDINATOR_NOT_AVAILABLE.
func TestFindCoordinatorAnswersKafkaAddresses(t *testing.T) {
	g := &Groups{Service: refusing{}, KafkaEndpoint: func(_ string, id int32) (string, int32, bool) { return "k", 29090 + id, id == 2 }}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	if r := handle[*kmsg.FindCoordinatorResponse](t, g, fc, 3); r.ErrorCode != 0 || r.NodeID != 2 || r.Host != "k" || r.Port != 29092 {
		t.Fatalf("v3: %+v", r)
	}
	fc4 := kmsg.NewPtrFindCoordinatorRequest()
	fc4.CoordinatorKeys = []string{"a", "b"}
	if r := handle[*kmsg.FindCoordinatorResponse](t, g, fc4, 4); len(r.Coordinators) != 2 || r.Coordinators[1].Key != "b" || r.Coordinators[1].Port != 29092 {
		t.Fatalf("v4: %+v", r.Coordinators)
	}
	fc4.CoordinatorType = 1
	if r := handle[*kmsg.FindCoordinatorResponse](t, g, fc4, 4); r.Coordinators[0].ErrorCode != int16(kerr.InvalidRequest) || r.Coordinators[0].ErrorMessage == nil {
		t.Fatalf("transaction key: %+v", r.Coordinators)
	}
	none := &Groups{Service: refusing{}, KafkaEndpoint: func(string, int32) (string, int32, bool) { return "", 0, false }}
	if r := handle[*kmsg.FindCoordinatorResponse](t, none, fc, 2); r.ErrorCode != int16(kerr.CoordinatorNotAvailable) {
		t.Fatalf("no Kafka listener: code %d", r.ErrorCode)
	}
}

// LeaveGroup: v0-2 name one member and answer at the top level; v3+ a
// batch, each member with its own error.
func TestLeaveGroupOneOrBatch(t *testing.T) {
	g := &Groups{Service: refusing{}}
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.MemberID = "m"
	if r := handle[*kmsg.LeaveGroupResponse](t, g, lg, 2); r.ErrorCode != int16(kerr.UnknownMemberID) {
		t.Fatalf("v2: code %d", r.ErrorCode)
	}
	lg5 := kmsg.NewPtrLeaveGroupRequest()
	lg5.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "a"}, {MemberID: "b"}}
	r := handle[*kmsg.LeaveGroupResponse](t, g, lg5, 5)
	if r.ErrorCode != 0 || len(r.Members) != 2 || r.Members[1].MemberID != "b" || r.Members[1].ErrorCode != int16(kerr.UnknownMemberID) {
		t.Fatalf("v5: %+v", r)
	}
}

// listing holds two groups and filters them by state as the coordinator
// does, refusing a state it does not know.
type listing struct {
	groupv1.UnimplementedGroupServiceServer
}

func (listing) ListGroups(_ context.Context, req *groupv1.ListGroupsRequest) (*groupv1.ListGroupsResponse, error) {
	all := map[string]group.State{"a": group.Stable, "b": group.Empty}
	out := &groupv1.ListGroupsResponse{}
	for _, id := range []string{"a", "b"} {
		keep := len(req.GetStatesFilter()) == 0
		for _, f := range req.GetStatesFilter() {
			st, ok := group.ParseState(f)
			if !ok {
				return nil, kerr.BadField(kerr.InvalidRequest, "states_filter", "unknown state %q", f)
			}
			keep = keep || st == all[id]
		}
		if keep {
			out.Groups = append(out.Groups, &groupv1.ListedGroup{GroupId: id, GroupState: all[id].String()})
		}
	}
	return out, nil
}

// A Kafka client's state filter naming a state tidemark does not know (a
// newer protocol's) matches no group, as in Kafka; it does not fail the
// listing of the states it does know.
func TestListGroupsIgnoresStatesItDoesNotKnow(t *testing.T) {
	g := &Groups{Service: listing{}}
	list := func(states ...string) (int16, []string) {
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter = states
		r := handle[*kmsg.ListGroupsResponse](t, g, req, 4)
		var ids []string
		for _, lg := range r.Groups {
			ids = append(ids, lg.Group)
		}
		return r.ErrorCode, ids
	}
	if code, ids := list("Stable", "Assigning"); code != 0 || len(ids) != 1 || ids[0] != "a" {
		t.Fatalf("Stable+Assigning: code %d, groups %v, want a", code, ids)
	}
	if code, ids := list("Reconciling"); code != 0 || len(ids) != 0 {
		t.Fatalf("Reconciling: code %d, groups %v, want none", code, ids)
	}
	if code, ids := list(); code != 0 || len(ids) != 2 {
		t.Fatalf("no filter: code %d, groups %v, want both", code, ids)
	}
}

// committing records the OffsetCommit requests it is given.
type committing struct {
	groupv1.UnimplementedGroupServiceServer
	got []*groupv1.OffsetCommitRequest
}

func (c *committing) OffsetCommit(_ context.Context, req *groupv1.OffsetCommitRequest) (*groupv1.OffsetCommitResponse, error) {
	c.got = append(c.got, req)
	return &groupv1.OffsetCommitResponse{}, nil
}

// OffsetCommit v2-v4's retention_time_ms reaches the coordinator, which
// expires the commit that long after it (Kafka's expireTimestamp); -1, and
// every v5+ request (the field is gone), leave it unset: the broker's
// offsets.retention.minutes. Before, it was dropped.
func TestOffsetCommitPassesItsRetentionOn(t *testing.T) {
	for _, c := range []struct {
		version   int16
		retention int64
		want      *int64
	}{{2, 60_000, msPtr(60_000)}, {4, 0, msPtr(0)}, {4, -1, nil}, {5, 60_000, nil}, {8, -1, nil}} {
		svc := &committing{}
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation, oc.RetentionTimeMillis = "g", -1, c.retention
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}}}}
		handle[*kmsg.OffsetCommitResponse](t, &Groups{Service: svc}, oc, c.version)
		if len(svc.got) != 1 {
			t.Fatalf("v%d: %d calls", c.version, len(svc.got))
		}
		got := svc.got[0].RetentionTimeMs
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			show := func(p *int64) string {
				if p == nil {
					return "unset"
				}
				return fmt.Sprint(*p)
			}
			t.Errorf("v%d retention %d: passed on %s, want %s", c.version, c.retention, show(got), show(c.want))
		}
	}
}

func msPtr(v int64) *int64 { return &v }

// FindCoordinator names the coordinator's address on the listener the
// request arrived on, and COORDINATOR_NOT_AVAILABLE where the coordinator
// lacks that listener, as Kafka answers.
func TestFindCoordinatorAnswersOnTheRequestsListener(t *testing.T) {
	addrs := map[string]int32{"INTERNAL": 19092, "EXTERNAL": 9092}
	g := &Groups{Service: refusing{}, KafkaEndpoint: func(listener string, id int32) (string, int32, bool) {
		port, ok := addrs[listener]
		return strings.ToLower(listener), port, ok
	}}
	for listener, port := range addrs {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKeys = []string{"g"}
		fc.SetVersion(4)
		r := g.Handle(kafkaapi.WithListenerName(context.Background(), listener), identity.Anon, fc).(*kmsg.FindCoordinatorResponse)
		if c := r.Coordinators[0]; c.ErrorCode != 0 || c.Host != strings.ToLower(listener) || c.Port != port {
			t.Fatalf("on %s: %+v, want %s:%d", listener, c, strings.ToLower(listener), port)
		}
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	fc.SetVersion(3)
	r := g.Handle(kafkaapi.WithListenerName(context.Background(), "REPLICATION"), identity.Anon, fc).(*kmsg.FindCoordinatorResponse)
	if r.ErrorCode != int16(kerr.CoordinatorNotAvailable) || r.NodeID != -1 {
		t.Fatalf("on a listener the coordinator lacks: %+v, want COORDINATOR_NOT_AVAILABLE", r)
	}
}
