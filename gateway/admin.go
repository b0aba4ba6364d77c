package gateway

import (
	"context"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
)

// adminService is the AdminServiceClient behind the REST routes: the
// client package's Admin, which finds the active controller and follows
// NOT_CONTROLLER answers. A batched answer in which no item succeeded is
// that item's error, so that REST callers get its HTTP status (items.go).
type adminService struct {
	a        *client.Admin
	stopping context.Context
}

var _ adminv1.AdminServiceClient = adminService{}

func (s adminService) CreateTopics(ctx context.Context, req *adminv1.CreateTopicsRequest, _ ...grpc.CallOption) (*adminv1.CreateTopicsResponse, error) {
	resp, err := s.a.CreateTopics(ctx, req)
	return checked(resp, err, createOutcomes)
}

func (s adminService) DeleteTopics(ctx context.Context, req *adminv1.DeleteTopicsRequest, _ ...grpc.CallOption) (*adminv1.DeleteTopicsResponse, error) {
	resp, err := s.a.DeleteTopics(ctx, req)
	return checked(resp, err, deleteOutcomes)
}

func (s adminService) DescribeTopics(ctx context.Context, req *adminv1.DescribeTopicsRequest, _ ...grpc.CallOption) (*adminv1.DescribeTopicsResponse, error) {
	resp, err := s.a.DescribeTopics(ctx, req)
	return checked(resp, err, describeOutcomes)
}

func (s adminService) DescribeCluster(ctx context.Context, _ *adminv1.DescribeClusterRequest, _ ...grpc.CallOption) (*adminv1.DescribeClusterResponse, error) {
	return s.a.DescribeCluster(ctx)
}

func (s adminService) DescribeConfigs(ctx context.Context, req *adminv1.DescribeConfigsRequest, _ ...grpc.CallOption) (*adminv1.DescribeConfigsResponse, error) {
	resp, err := s.a.DescribeConfigs(ctx, req)
	return checked(resp, err, describeConfigOutcomes)
}

func (s adminService) AlterConfigs(ctx context.Context, req *adminv1.AlterConfigsRequest, _ ...grpc.CallOption) (*adminv1.AlterConfigsResponse, error) {
	resp, err := s.a.AlterConfigs(ctx, req)
	return checked(resp, err, alterConfigOutcomes)
}

func (s adminService) ElectLeaders(ctx context.Context, req *adminv1.ElectLeadersRequest, _ ...grpc.CallOption) (*adminv1.ElectLeadersResponse, error) {
	resp, err := s.a.ElectLeaders(ctx, req)
	return checked(resp, err, electOutcomes)
}

func (s adminService) WatchCluster(ctx context.Context, req *adminv1.WatchClusterRequest, _ ...grpc.CallOption) (adminv1.AdminService_WatchClusterClient, error) {
	return watch(untilStop(ctx, s.stopping), s.a, req)
}
