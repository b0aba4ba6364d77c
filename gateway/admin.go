package gateway

import (
	"context"
	"time"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
)

// adminService is the AdminServiceClient behind the REST routes: the
// client package's Admin, which finds the active controller, follows
// NOT_CONTROLLER answers and passes over a controller that does not answer
// within the request timeout. A batched answer in which no item succeeded
// is that item's error, so that REST callers get its HTTP status
// (items.go). Every call ends within budget plus the wait its request asks
// for (timeout_ms); past that it answers the last error the controllers
// gave (NOT_CONTROLLER: 503) or REQUEST_TIMED_OUT (504).
type adminService struct {
	a        *client.Admin
	stopping context.Context
	budget   time.Duration
	streams  *streamSlots
}

// bound gives a call its deadline: the budget plus the wait of timeout_ms.
func (s adminService) bound(ctx context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.budget+time.Duration(max(timeoutMs, 0))*time.Millisecond)
}

var _ adminv1.AdminServiceClient = adminService{}

func (s adminService) CreateTopics(ctx context.Context, req *adminv1.CreateTopicsRequest, _ ...grpc.CallOption) (*adminv1.CreateTopicsResponse, error) {
	ctx, cancel := s.bound(ctx, req.GetTimeoutMs())
	defer cancel()
	resp, err := s.a.CreateTopics(ctx, req)
	return checked(resp, err, createOutcomes(req))
}

func (s adminService) DeleteTopics(ctx context.Context, req *adminv1.DeleteTopicsRequest, _ ...grpc.CallOption) (*adminv1.DeleteTopicsResponse, error) {
	ctx, cancel := s.bound(ctx, req.GetTimeoutMs())
	defer cancel()
	resp, err := s.a.DeleteTopics(ctx, req)
	return checked(resp, err, deleteOutcomes(req))
}

// DescribeTopics lists all topics a page at a time (restPageSize).
func (s adminService) DescribeTopics(ctx context.Context, req *adminv1.DescribeTopicsRequest, _ ...grpc.CallOption) (*adminv1.DescribeTopicsResponse, error) {
	pg, err := restPage(len(req.GetTopics()) > 0, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	req.PageSize = int32(pg.Size)
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.DescribeTopics(ctx, req)
	return checked(resp, err, describeOutcomes(req))
}

func (s adminService) DescribeCluster(ctx context.Context, _ *adminv1.DescribeClusterRequest, _ ...grpc.CallOption) (*adminv1.DescribeClusterResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	return s.a.DescribeCluster(ctx)
}

func (s adminService) DescribeConfigs(ctx context.Context, req *adminv1.DescribeConfigsRequest, _ ...grpc.CallOption) (*adminv1.DescribeConfigsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.DescribeConfigs(ctx, req)
	return checked(resp, err, describeConfigOutcomes(req))
}

func (s adminService) AlterConfigs(ctx context.Context, req *adminv1.AlterConfigsRequest, _ ...grpc.CallOption) (*adminv1.AlterConfigsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.AlterConfigs(ctx, req)
	return checked(resp, err, alterConfigOutcomes(req))
}

func (s adminService) ElectLeaders(ctx context.Context, req *adminv1.ElectLeadersRequest, _ ...grpc.CallOption) (*adminv1.ElectLeadersResponse, error) {
	ctx, cancel := s.bound(ctx, req.GetTimeoutMs())
	defer cancel()
	resp, err := s.a.ElectLeaders(ctx, req)
	return checked(resp, err, electOutcomes(req))
}

func (s adminService) WatchCluster(ctx context.Context, req *adminv1.WatchClusterRequest, _ ...grpc.CallOption) (adminv1.AdminService_WatchClusterClient, error) {
	if err := s.streams.acquire(ctx, "cluster:watch"); err != nil {
		return nil, err
	}
	return watch(untilStop(ctx, s.stopping), s.a, req, s.budget)
}
