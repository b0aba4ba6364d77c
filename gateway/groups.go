package gateway

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
)

// groupService is the GroupServiceClient behind the REST group routes: a
// group's calls go to its coordinator, found with FindCoordinator on any
// broker and found again when the answer says it moved (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, an unreachable broker), within the retry
// budget. COORDINATOR_LOAD_IN_PROGRESS goes back to the caller at once
// (503 with Retry-After), like every retriable answer the gateway does not
// reroute. ListGroups asks every broker and merges.
type groupService struct{ r *router }

var _ groupv1.GroupServiceClient = groupService{}

// anyBroker runs call on a broker, moving on while brokers cannot be
// reached or leave a call unanswered (see onAnyAddress).
func (g groupService) anyBroker(ctx context.Context, call func(context.Context, groupv1.GroupServiceClient) error) error {
	return g.r.onAnyAddress(ctx, func(actx context.Context, addr string) error {
		gc, err := g.r.cl.GroupCoordinator(addr)
		if err != nil {
			return err
		}
		return call(actx, gc)
	})
}

// onCoordinator runs call on the group's coordinator. wait is how long the
// coordinator may hold the call on purpose (a JoinGroup waits for the
// rebalance).
func (g groupService) onCoordinator(ctx context.Context, group string, wait time.Duration, call func(context.Context, groupv1.GroupServiceClient) error) error {
	p := newPacer(g.r.budget)
	for {
		ke := asKerr(g.coordinatorAttempt(ctx, group, wait, call))
		if ke == nil {
			return nil
		}
		if !(reroutable(ke.Code) || ke.Code == kerr.CoordinatorNotAvailable) || ctx.Err() != nil || !p.wait(ctx) {
			return ke
		}
	}
}

func (g groupService) coordinatorAttempt(ctx context.Context, group string, wait time.Duration, call func(context.Context, groupv1.GroupServiceClient) error) error {
	found, err := g.FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: group})
	if err != nil {
		return err
	}
	addr := found.GetCoordinator().GetAddress()
	gc, err := g.r.cl.GroupCoordinator(addr)
	if errors.Is(err, client.ErrClosed) {
		return errStopped
	}
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, g.r.requestTimeout+wait)
	defer cancel()
	err = call(actx, gc)
	if _, rpc := status.FromError(err); rpc {
		// A frozen coordinator leaves the call unanswered: noted, it is
		// asked last by the next FindCoordinator (onAnyAddress), which then
		// goes to a broker that answers and names the coordinator the
		// cluster has now, instead of waiting out the frozen one first.
		g.r.cl.NoteAnswered(ctx, actx, addr, err)
	}
	return err
}

func (g groupService) FindCoordinator(ctx context.Context, req *groupv1.FindCoordinatorRequest, opts ...grpc.CallOption) (*groupv1.FindCoordinatorResponse, error) {
	var resp *groupv1.FindCoordinatorResponse
	err := g.anyBroker(ctx, func(actx context.Context, gc groupv1.GroupServiceClient) error {
		var err error
		resp, err = gc.FindCoordinator(actx, req, opts...)
		return err
	})
	return resp, err
}

// grouped is the shape of every single-group call: the request, its group
// and the extra time the coordinator may hold it.
func grouped[Req any, Resp any](g groupService, ctx context.Context, group string, wait time.Duration, req Req,
	fn func(groupv1.GroupServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error), opts []grpc.CallOption) (Resp, error) {
	var resp Resp
	err := g.onCoordinator(ctx, group, wait, func(actx context.Context, gc groupv1.GroupServiceClient) error {
		var err error
		resp, err = fn(gc, actx, req, opts...)
		return err
	})
	return resp, err
}

func (g groupService) JoinGroup(ctx context.Context, req *groupv1.JoinGroupRequest, opts ...grpc.CallOption) (*groupv1.JoinGroupResponse, error) {
	wait := time.Duration(max(req.GetRebalanceTimeoutMs(), req.GetSessionTimeoutMs(), 0)) * time.Millisecond
	return grouped(g, ctx, req.GetGroupId(), wait, req, groupv1.GroupServiceClient.JoinGroup, opts)
}

func (g groupService) SyncGroup(ctx context.Context, req *groupv1.SyncGroupRequest, opts ...grpc.CallOption) (*groupv1.SyncGroupResponse, error) {
	return grouped(g, ctx, req.GetGroupId(), 5*time.Minute, req, groupv1.GroupServiceClient.SyncGroup, opts)
}

func (g groupService) Heartbeat(ctx context.Context, req *groupv1.HeartbeatRequest, opts ...grpc.CallOption) (*groupv1.HeartbeatResponse, error) {
	return grouped(g, ctx, req.GetGroupId(), 0, req, groupv1.GroupServiceClient.Heartbeat, opts)
}

func (g groupService) LeaveGroup(ctx context.Context, req *groupv1.LeaveGroupRequest, opts ...grpc.CallOption) (*groupv1.LeaveGroupResponse, error) {
	return grouped(g, ctx, req.GetGroupId(), 0, req, groupv1.GroupServiceClient.LeaveGroup, opts)
}

// OffsetCommit is not retried by the gateway once sent: a commit is
// idempotent, but a member whose generation moved on must learn it.
func (g groupService) OffsetCommit(ctx context.Context, req *groupv1.OffsetCommitRequest, opts ...grpc.CallOption) (*groupv1.OffsetCommitResponse, error) {
	return grouped(g, ctx, req.GetGroupId(), 5*time.Second, req, groupv1.GroupServiceClient.OffsetCommit, opts)
}

func (g groupService) OffsetFetch(ctx context.Context, req *groupv1.OffsetFetchRequest, opts ...grpc.CallOption) (*groupv1.OffsetFetchResponse, error) {
	return grouped(g, ctx, req.GetGroupId(), 0, req, groupv1.GroupServiceClient.OffsetFetch, opts)
}

func (g groupService) ResetGroupOffsets(ctx context.Context, req *groupv1.ResetGroupOffsetsRequest, opts ...grpc.CallOption) (*groupv1.ResetGroupOffsetsResponse, error) {
	return grouped(g, ctx, req.GetGroupId(), 5*time.Second, req, groupv1.GroupServiceClient.ResetGroupOffsets, opts)
}

func (g groupService) OffsetDelete(ctx context.Context, req *groupv1.OffsetDeleteRequest, opts ...grpc.CallOption) (*groupv1.OffsetDeleteResponse, error) {
	return grouped(g, ctx, req.GetGroupId(), 5*time.Second, req, groupv1.GroupServiceClient.OffsetDelete, opts)
}

func (g groupService) DescribeGroupLag(ctx context.Context, req *groupv1.DescribeGroupLagRequest, opts ...grpc.CallOption) (*groupv1.DescribeGroupLagResponse, error) {
	return grouped(g, ctx, req.GetGroupId(), 5*time.Second, req, groupv1.GroupServiceClient.DescribeGroupLag, opts)
}

// DescribeGroups asks each group's coordinator (eachGroup); a group whose coordinator
// cannot be found carries the error in its row. As with admin answers, when
// every group failed the answer is the first one's error.
func (g groupService) DescribeGroups(ctx context.Context, req *groupv1.DescribeGroupsRequest, _ ...grpc.CallOption) (*groupv1.DescribeGroupsResponse, error) {
	resp, err := g.describeGroups(ctx, req)
	return checked(resp, err, func(r *groupv1.DescribeGroupsResponse) []outcome {
		var items []outcome
		for _, d := range r.GetGroups() {
			items = append(items, outcome{d.GetErrorCode(), "", "group " + d.GetGroupId(), itemField("group_ids", req.GetGroupIds(), d.GetGroupId())})
		}
		return items
	})
}

func (g groupService) describeGroups(ctx context.Context, req *groupv1.DescribeGroupsRequest) (*groupv1.DescribeGroupsResponse, error) {
	rows := eachGroup(req.GetGroupIds(), func(id string) []*groupv1.DescribedGroup {
		one := &groupv1.DescribeGroupsRequest{GroupIds: []string{id}}
		resp, err := grouped(g, ctx, id, 0, one, func(gc groupv1.GroupServiceClient, actx context.Context, r *groupv1.DescribeGroupsRequest, o ...grpc.CallOption) (*groupv1.DescribeGroupsResponse, error) {
			resp, err := gc.DescribeGroups(actx, r, o...)
			if err == nil && len(resp.GetGroups()) == 1 && resp.GetGroups()[0].GetErrorCode() != 0 {
				// Moving coordinators answer per group: retry like a call.
				return resp, kerr.New(kerr.Code(resp.GetGroups()[0].GetErrorCode()), "describe %s", id)
			}
			return resp, err
		}, nil)
		if err != nil {
			return []*groupv1.DescribedGroup{{GroupId: id, ErrorCode: commonv1.ErrorCode(asKerr(err).Code)}}
		}
		return resp.GetGroups()
	})
	return &groupv1.DescribeGroupsResponse{Groups: slices.Concat(rows...)}, nil
}

// groupsAtOnce bounds the groups of one call asked at the same time.
const groupsAtOnce = 8

// eachGroup runs call for each group, groupsAtOnce at a time, and returns
// the answers in the order of ids. The calls made at once do not take the
// caller's call options: grpc.Header and grpc.Trailer (the REST handler's)
// point at one place every call would write to, and a merged answer has
// no one call's headers. One after the other, every group a
// frozen coordinator holds cost a whole request timeout, and a describe
// of many ran out the caller's deadline before reaching the groups
// whose coordinators answer.
func eachGroup[T any](ids []string, call func(id string) T) []T {
	out := make([]T, len(ids))
	sem := make(chan struct{}, groupsAtOnce)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = call(id)
		})
	}
	wg.Wait()
	return out
}

// DeleteGroups asks each group's coordinator (eachGroup); when every group failed the
// answer is the first one's error (deleting one group that still has
// members is 409 NON_EMPTY_GROUP), as with admin answers.
func (g groupService) DeleteGroups(ctx context.Context, req *groupv1.DeleteGroupsRequest, _ ...grpc.CallOption) (*groupv1.DeleteGroupsResponse, error) {
	resp, err := g.deleteGroups(ctx, req)
	return checked(resp, err, func(r *groupv1.DeleteGroupsResponse) []outcome {
		var items []outcome
		for _, d := range r.GetResults() {
			items = append(items, outcome{d.GetErrorCode(), "", "group " + d.GetGroupId(), itemField("group_ids", req.GetGroupIds(), d.GetGroupId())})
		}
		return items
	})
}

func (g groupService) deleteGroups(ctx context.Context, req *groupv1.DeleteGroupsRequest) (*groupv1.DeleteGroupsResponse, error) {
	rows := eachGroup(req.GetGroupIds(), func(id string) []*groupv1.DeletableGroupResult {
		one := &groupv1.DeleteGroupsRequest{GroupIds: []string{id}}
		resp, err := grouped(g, ctx, id, 5*time.Second, one, func(gc groupv1.GroupServiceClient, actx context.Context, r *groupv1.DeleteGroupsRequest, o ...grpc.CallOption) (*groupv1.DeleteGroupsResponse, error) {
			resp, err := gc.DeleteGroups(actx, r, o...)
			if err == nil && len(resp.GetResults()) == 1 {
				if c := kerr.Code(resp.GetResults()[0].GetErrorCode()); c == kerr.NotCoordinator || c == kerr.CoordinatorNotAvailable {
					return resp, kerr.New(c, "delete %s", id)
				}
			}
			return resp, err
		}, nil)
		if err != nil {
			return []*groupv1.DeletableGroupResult{{GroupId: id, ErrorCode: commonv1.ErrorCode(asKerr(err).Code)}}
		}
		return resp.GetResults()
	})
	return &groupv1.DeleteGroupsResponse{Results: slices.Concat(rows...)}, nil
}

// ListGroups asks every live broker at once (each lists the groups it
// coordinates) and merges. A broker that does not answer within the request
// timeout, or answers an error, is named in unanswered beside the groups
// the others listed, as Kafka's admin client reports listConsumerGroups'
// errors per broker: a list is never silently partial, and one frozen
// broker no longer fails (504) the whole list. When no broker answers, the
// call fails with the first one's error.
//
// The list comes a page at a time (restPageSize), in group id order: each
// broker is asked for the page after the token, and the page answered is
// the first page_size of their merged lists, which are among those pages.
func (g groupService) ListGroups(ctx context.Context, req *groupv1.ListGroupsRequest, _ ...grpc.CallOption) (*groupv1.ListGroupsResponse, error) {
	pg, err := restPage(false, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	req.PageSize = int32(pg.Size)
	// Only the brokers are wanted: a page of one topic names them all,
	// where every topic's metadata, read as a caller who may see few,
	// would also drop the others from the shared client's cache.
	md, err := g.r.cl.MetadataPage(ctx, 1, "")
	if err != nil {
		return nil, err
	}
	brokers := md.GetBrokers()
	answers := make([]*groupv1.ListGroupsResponse, len(brokers))
	errs := make([]error, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		wg.Go(func() {
			answers[i], errs[i] = g.listOn(ctx, b.GetAddress(), req)
		})
	}
	wg.Wait()
	out := &groupv1.ListGroupsResponse{}
	var first error
	brokerHasMore := false
	for i, b := range brokers {
		if errs[i] == nil {
			out.Groups = append(out.Groups, answers[i].GetGroups()...)
			brokerHasMore = brokerHasMore || answers[i].GetNextPageToken() != ""
			continue
		}
		if errors.Is(errs[i], client.ErrClosed) {
			return nil, errStopped
		}
		ke := asKerr(errs[i])
		if first == nil {
			first = ke
		}
		out.Unanswered = append(out.Unanswered, &groupv1.ListGroupsBrokerError{
			BrokerId: b.GetId(), Address: b.GetAddress(), ErrorCode: commonv1.ErrorCode(ke.Code), Message: ke.Message})
	}
	if first != nil && len(out.Unanswered) == len(brokers) {
		return nil, first
	}
	sort.SliceStable(out.Groups, func(i, j int) bool { return out.Groups[i].GetGroupId() < out.Groups[j].GetGroupId() })
	// A group moving between coordinators may be listed by both.
	out.Groups = slices.CompactFunc(out.Groups, func(a, b *groupv1.ListedGroup) bool { return a.GetGroupId() == b.GetGroupId() })
	out.Groups, out.NextPageToken = pageOf(out.Groups, pg, brokerHasMore)
	return out, nil
}

// pageOf cuts the page pg out of groups merged from the brokers' pages (in
// id order, each id once). brokerHasMore: a broker's page was not its last.
func pageOf(groups []*groupv1.ListedGroup, pg paging.Request, brokerHasMore bool) ([]*groupv1.ListedGroup, string) {
	cur := paging.NewCursor(context.Background(), pg)
	page := groups[:0]
	for _, gr := range groups {
		if cur.Skip(gr.GetGroupId()) {
			continue
		}
		if !cur.Take(gr.GetGroupId()) {
			break
		}
		page = append(page, gr)
	}
	if brokerHasMore {
		cur.MoreFollow()
	}
	return page, cur.Next()
}

// listOn asks the broker at addr for its groups within the request timeout,
// noting whether it answered (client.Client.NoteAnswered): a frozen broker
// is then asked last by the calls that need any broker.
func (g groupService) listOn(ctx context.Context, addr string, req *groupv1.ListGroupsRequest) (*groupv1.ListGroupsResponse, error) {
	gc, err := g.r.cl.GroupCoordinator(addr)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, g.r.requestTimeout)
	defer cancel()
	resp, err := gc.ListGroups(actx, req)
	if _, rpc := status.FromError(err); rpc {
		g.r.cl.NoteAnswered(ctx, actx, addr, err)
	}
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return nil, kerr.New(kerr.RequestTimedOut, "broker at %s did not answer within %v", addr, g.r.requestTimeout)
	}
	return resp, err
}
