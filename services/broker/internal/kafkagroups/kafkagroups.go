// Package kafkagroups serves Kafka's consumer-group APIs on the Kafka
// listener (a kafkaapi.Extension): each request becomes a call of the
// group coordinator's gRPC service, authorized by the same policy, so a
// group is one group whichever door its members use.
package kafkagroups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/broker/internal/kafkaapi"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/identity"
)

// Groups is the Extension.
type Groups struct {
	// Service is the gRPC GroupService's handler set.
	Service groupv1.GroupServiceServer
	// Authorizer decides each request as the gRPC method; nil: no checks.
	Authorizer *authz.Authorizer
	// KafkaEndpoint is broker id's address on the named Kafka listener
	// (the one the request arrived on); ok is false when it has none.
	KafkaEndpoint func(listener string, id int32) (host string, port int32, ok bool)
}

var _ kafkaapi.Extension = (*Groups)(nil)

// APIs are the versions served. JoinGroup starts at v4: the coordinator
// always hands a new member its id first (MEMBER_ID_REQUIRED, KIP-394),
// which older clients do not understand.
func (g *Groups) APIs() map[int16]kafkaapi.VersionRange {
	return map[int16]kafkaapi.VersionRange{
		int16(kmsg.FindCoordinator): {Min: 0, Max: 4},
		int16(kmsg.JoinGroup):       {Min: 4, Max: 9},
		int16(kmsg.SyncGroup):       {Min: 0, Max: 5},
		int16(kmsg.Heartbeat):       {Min: 0, Max: 4},
		int16(kmsg.LeaveGroup):      {Min: 0, Max: 5},
		int16(kmsg.OffsetCommit):    {Min: 2, Max: 8},
		int16(kmsg.OffsetFetch):     {Min: 1, Max: 8},
		int16(kmsg.ListGroups):      {Min: 0, Max: 4},
		int16(kmsg.DescribeGroups):  {Min: 0, Max: 5},
		int16(kmsg.DeleteGroups):    {Min: 0, Max: 2},
		int16(kmsg.OffsetDelete):    {Min: 0, Max: 0},
	}
}

// Handle answers one request; the principal is already in ctx.
func (g *Groups) Handle(ctx context.Context, _ identity.Principal, req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		return g.findCoordinator(ctx, r)
	case *kmsg.JoinGroupRequest:
		return g.joinGroup(ctx, r)
	case *kmsg.SyncGroupRequest:
		return g.syncGroup(ctx, r)
	case *kmsg.HeartbeatRequest:
		return g.heartbeat(ctx, r)
	case *kmsg.LeaveGroupRequest:
		return g.leaveGroup(ctx, r)
	case *kmsg.OffsetCommitRequest:
		return g.offsetCommit(ctx, r)
	case *kmsg.OffsetFetchRequest:
		return g.offsetFetch(ctx, r)
	case *kmsg.ListGroupsRequest:
		return g.listGroups(ctx, r)
	case *kmsg.DescribeGroupsRequest:
		return g.describeGroups(ctx, r)
	case *kmsg.DeleteGroupsRequest:
		return g.deleteGroups(ctx, r)
	case *kmsg.OffsetDeleteRequest:
		return g.offsetDelete(ctx, r)
	}
	panic("kafkagroups: request " + kmsg.NameForKey(req.Key()) + " is not one of its APIs")
}

// call runs one gRPC handler as the gRPC server would: authorize the
// request, decide what a list may show, call, trim the answer as the
// method's policy trims it.
func call[Req, Resp any](ctx context.Context, az *authz.Authorizer, method string, req Req, h func(context.Context, Req) (Resp, error)) (Resp, error) {
	var zero Resp
	if az != nil {
		if _, err := az.Authorize(ctx, method, req); err != nil {
			return zero, err
		}
		var err error
		if ctx, err = az.Shown(ctx, method, req); err != nil {
			return zero, err
		}
	}
	resp, err := h(ctx, req)
	if err != nil {
		return zero, err
	}
	if az != nil {
		resp = az.Filter(ctx, method, req, resp).(Resp)
	}
	return resp, nil
}

// code and message are as the listener's own answers carry errors:
// tidemark's codes are Kafka's.
var (
	code    = kafkaapi.ErrorCode
	message = kafkaapi.ErrorMessage
)

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
