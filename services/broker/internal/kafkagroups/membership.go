package kafkagroups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/broker/internal/kafkaapi"
	"tidemark.io/services/platform/kerr"
)

// coordinatorTypeGroup is Kafka's key type for consumer groups; the other,
// 1, is transactions, which tidemark does not have.
const coordinatorTypeGroup = 0

// findCoordinator answers each key (one before v4, a batch from v4) with
// the coordinator's address on the Kafka listener the request arrived on.
func (g *Groups) findCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	one := func(key string) (id int32, host string, port int32, err error) {
		if req.CoordinatorType != coordinatorTypeGroup {
			return -1, "", -1, kerr.New(kerr.InvalidRequest, "coordinator key type %d is not served: tidemark has group coordinators only (type 0), no transactions", req.CoordinatorType)
		}
		greq := &groupv1.FindCoordinatorRequest{Key: key, KeyType: groupv1.CoordinatorType_COORDINATOR_TYPE_GROUP}
		gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_FindCoordinator_FullMethodName, greq, g.Service.FindCoordinator)
		if err != nil {
			return -1, "", -1, err
		}
		id = gresp.GetCoordinator().GetId()
		listener := kafkaapi.ListenerName(ctx)
		host, port, ok := g.KafkaEndpoint(listener, id)
		if !ok {
			// Kafka's answer for a coordinator without the request's
			// listener: the client retries, perhaps after a new Metadata.
			return -1, "", -1, kerr.New(kerr.CoordinatorNotAvailable, "the coordinator, broker %d, has no Kafka listener %q known to this broker", id, listener)
		}
		return id, host, port, nil
	}
	if req.Version < 4 {
		id, host, port, err := one(req.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = id, host, port, code(err)
		if req.Version >= 1 {
			resp.ErrorMessage = message(err)
		}
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		id, host, port, err := one(key)
		resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: id, Host: host, Port: port,
			ErrorCode: code(err), ErrorMessage: message(err)})
	}
	return resp
}

func (g *Groups) joinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalance = req.SessionTimeoutMillis // v0 has none: Kafka uses the session timeout
	}
	greq := &groupv1.JoinGroupRequest{GroupId: req.Group, SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeoutMs: rebalance,
		MemberId: req.MemberID, GroupInstanceId: str(req.InstanceID), ProtocolType: req.ProtocolType, Reason: str(req.Reason), ClientId: kafkaapi.ClientID(ctx)}
	for _, p := range req.Protocols {
		greq.Protocols = append(greq.Protocols, &groupv1.JoinGroupProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_JoinGroup_FullMethodName, greq, g.Service.JoinGroup)
	if err != nil {
		resp.ErrorCode, resp.Generation, resp.MemberID = code(err), -1, req.MemberID
		if e := kerr.FromStatus(err); e.Code == kerr.MemberIDRequired {
			resp.MemberID = e.MemberID
		}
		return resp
	}
	resp.Generation, resp.LeaderID, resp.MemberID, resp.SkipAssignment = gresp.GetGenerationId(), gresp.GetLeader(), gresp.GetMemberId(), gresp.GetSkipAssignment()
	pt, pn := gresp.GetProtocolType(), gresp.GetProtocolName()
	resp.ProtocolType, resp.Protocol = &pt, &pn
	for _, m := range gresp.GetMembers() {
		resp.Members = append(resp.Members, kmsg.JoinGroupResponseMember{MemberID: m.GetMemberId(), InstanceID: ptr(m.GetGroupInstanceId()), ProtocolMetadata: m.GetMetadata()})
	}
	return resp
}

func (g *Groups) syncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	greq := &groupv1.SyncGroupRequest{GroupId: req.Group, GenerationId: req.Generation, MemberId: req.MemberID, GroupInstanceId: str(req.InstanceID),
		ProtocolType: str(req.ProtocolType), ProtocolName: str(req.Protocol)}
	for _, a := range req.GroupAssignment {
		greq.Assignments = append(greq.Assignments, &groupv1.SyncGroupAssignment{MemberId: a.MemberID, Assignment: a.MemberAssignment})
	}
	gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_SyncGroup_FullMethodName, greq, g.Service.SyncGroup)
	if err != nil {
		resp.ErrorCode = code(err)
		return resp
	}
	pt, pn := gresp.GetProtocolType(), gresp.GetProtocolName()
	resp.ProtocolType, resp.Protocol, resp.MemberAssignment = &pt, &pn, gresp.GetAssignment()
	return resp
}

func (g *Groups) heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	greq := &groupv1.HeartbeatRequest{GroupId: req.Group, GenerationId: req.Generation, MemberId: req.MemberID, GroupInstanceId: str(req.InstanceID)}
	_, err := call(ctx, g.Authorizer, groupv1.GroupService_Heartbeat_FullMethodName, greq, g.Service.Heartbeat)
	resp.ErrorCode = code(err)
	return resp
}

// leaveGroup takes one member (v0-2) or a batch (v3+); the batch's
// answer carries each member's error.
func (g *Groups) leaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	greq := &groupv1.LeaveGroupRequest{GroupId: req.Group}
	if req.Version < 3 {
		greq.Members = []*groupv1.MemberIdentity{{MemberId: req.MemberID}}
	}
	for _, m := range req.Members {
		greq.Members = append(greq.Members, &groupv1.MemberIdentity{MemberId: m.MemberID, GroupInstanceId: str(m.InstanceID), Reason: str(m.Reason)})
	}
	gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_LeaveGroup_FullMethodName, greq, g.Service.LeaveGroup)
	if err != nil {
		resp.ErrorCode = code(err)
		return resp
	}
	for _, m := range gresp.GetMembers() {
		if req.Version < 3 {
			resp.ErrorCode = int16(m.GetErrorCode())
			continue
		}
		resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: m.GetMemberId(), InstanceID: ptr(m.GetGroupInstanceId()), ErrorCode: int16(m.GetErrorCode())})
	}
	return resp
}
