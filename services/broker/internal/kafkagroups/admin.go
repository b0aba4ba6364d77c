package kafkagroups

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/broker/internal/group"
	"tidemark.io/services/platform/authz"
)

// listGroups lists the groups this broker coordinates (Kafka's admin
// clients ask every broker), only those the caller may Describe.
func (g *Groups) listGroups(ctx context.Context, req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	// A state this broker does not know (a newer protocol's, such as
	// Assigning) matches no group, as in Kafka, rather than failing the
	// whole listing.
	known := slices.DeleteFunc(slices.Clone(req.StatesFilter), func(s string) bool { _, ok := group.ParseState(s); return !ok })
	if len(req.StatesFilter) > 0 && len(known) == 0 {
		return resp
	}
	greq := &groupv1.ListGroupsRequest{StatesFilter: known}
	gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_ListGroups_FullMethodName, greq, g.Service.ListGroups)
	if err != nil {
		resp.ErrorCode = code(err)
		return resp
	}
	for _, lg := range gresp.GetGroups() {
		resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: lg.GetGroupId(), ProtocolType: lg.GetProtocolType(), GroupState: lg.GetGroupState()})
	}
	return resp
}

func (g *Groups) describeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	// One call per group, so a refusal of one is that group's error only.
	for _, gid := range req.Groups {
		greq := &groupv1.DescribeGroupsRequest{GroupIds: []string{gid}}
		out := kmsg.DescribeGroupsResponseGroup{Group: gid, AuthorizedOperations: -2147483648}
		gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_DescribeGroups_FullMethodName, greq, g.Service.DescribeGroups)
		if err != nil || len(gresp.GetGroups()) != 1 {
			out.ErrorCode = code(err)
			resp.Groups = append(resp.Groups, out)
			continue
		}
		d := gresp.GetGroups()[0]
		// v3+; as in Kafka, only a group described without error has them.
		if req.IncludeAuthorizedOperations && d.GetErrorCode() == 0 {
			out.AuthorizedOperations = g.Authorizer.AuthorizedOperations(ctx, authz.GroupNamed(gid))
		}
		out.ErrorCode, out.State, out.ProtocolType, out.Protocol = int16(d.GetErrorCode()), d.GetGroupState(), d.GetProtocolType(), d.GetProtocolName()
		for _, m := range d.GetMembers() {
			out.Members = append(out.Members, kmsg.DescribeGroupsResponseGroupMember{MemberID: m.GetMemberId(), InstanceID: ptr(m.GetGroupInstanceId()),
				ClientID: m.GetClientId(), ClientHost: m.GetClientHost(), ProtocolMetadata: m.GetMemberMetadata(), MemberAssignment: m.GetMemberAssignment()})
		}
		resp.Groups = append(resp.Groups, out)
	}
	return resp
}

func (g *Groups) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, gid := range req.Groups {
		greq := &groupv1.DeleteGroupsRequest{GroupIds: []string{gid}}
		out := kmsg.DeleteGroupsResponseGroup{Group: gid}
		gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_DeleteGroups_FullMethodName, greq, g.Service.DeleteGroups)
		switch {
		case err != nil:
			out.ErrorCode = code(err)
		case len(gresp.GetResults()) == 1:
			out.ErrorCode = int16(gresp.GetResults()[0].GetErrorCode())
		}
		resp.Groups = append(resp.Groups, out)
	}
	return resp
}
