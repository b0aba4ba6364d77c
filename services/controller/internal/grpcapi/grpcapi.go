// Package grpcapi is the controller's thin gRPC layer: AdminService and
// ControllerService handlers that find the active term and hand the request
// to it. Errors are *kerr.Error values; the server's interceptor maps them
// to gRPC statuses with an ErrorDetail. A standby answers NOT_CONTROLLER
// naming the active controller.
package grpcapi

import (
	"context"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// Admin is what AdminService needs from the active controller.
type Admin interface {
	CreateTopics(context.Context, *adminv1.CreateTopicsRequest) (*adminv1.CreateTopicsResponse, error)
	DeleteTopics(context.Context, *adminv1.DeleteTopicsRequest) (*adminv1.DeleteTopicsResponse, error)
	DescribeTopics(context.Context, *adminv1.DescribeTopicsRequest) (*adminv1.DescribeTopicsResponse, error)
	DescribeCluster(context.Context, *adminv1.DescribeClusterRequest) (*adminv1.DescribeClusterResponse, error)
	DescribeConfigs(context.Context, *adminv1.DescribeConfigsRequest) (*adminv1.DescribeConfigsResponse, error)
	AlterConfigs(context.Context, *adminv1.AlterConfigsRequest) (*adminv1.AlterConfigsResponse, error)
	ElectLeaders(context.Context, *adminv1.ElectLeadersRequest) (*adminv1.ElectLeadersResponse, error)
	WatchCluster(context.Context, *adminv1.WatchClusterRequest, func(*adminv1.WatchClusterResponse) error) error
	AlterPartitionReassignments(context.Context, *adminv1.AlterPartitionReassignmentsRequest) (*adminv1.AlterPartitionReassignmentsResponse, error)
	ListPartitionReassignments(context.Context, *adminv1.ListPartitionReassignmentsRequest) (*adminv1.ListPartitionReassignmentsResponse, error)
	CreatePartitions(context.Context, *adminv1.CreatePartitionsRequest) (*adminv1.CreatePartitionsResponse, error)
	CreateAcls(context.Context, *adminv1.CreateAclsRequest) (*adminv1.CreateAclsResponse, error)
	DescribeAcls(context.Context, *adminv1.DescribeAclsRequest) (*adminv1.DescribeAclsResponse, error)
	DeleteAcls(context.Context, *adminv1.DeleteAclsRequest) (*adminv1.DeleteAclsResponse, error)
	DescribeUserScramCredentials(context.Context, *adminv1.DescribeUserScramCredentialsRequest) (*adminv1.DescribeUserScramCredentialsResponse, error)
	AlterUserScramCredentials(context.Context, *adminv1.AlterUserScramCredentialsRequest) (*adminv1.AlterUserScramCredentialsResponse, error)
	DescribeClientQuotas(context.Context, *adminv1.DescribeClientQuotasRequest) (*adminv1.DescribeClientQuotasResponse, error)
	AlterClientQuotas(context.Context, *adminv1.AlterClientQuotasRequest) (*adminv1.AlterClientQuotasResponse, error)
}

// Control is what ControllerService needs from the active controller.
type Control interface {
	AlterPartition(context.Context, *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error)
	ControlledShutdown(context.Context, *controlv1.ControlledShutdownRequest) (*controlv1.ControlledShutdownResponse, error)
	AllocateProducerIds(context.Context, *controlv1.AllocateProducerIdsRequest) (*controlv1.AllocateProducerIdsResponse, error)
	CreateOffsetsTopic(context.Context, *controlv1.CreateOffsetsTopicRequest) (*controlv1.CreateOffsetsTopicResponse, error)
	BrokerSession(ctx context.Context, recv func() (*controlv1.BrokerSessionRequest, error), send func(*controlv1.BrokerSessionResponse) error) error
}

// Backend is the active controller.
type Backend interface {
	Admin
	Control
}

// Office finds the active controller in this process.
type Office interface {
	// Active returns this process's active term, or a NOT_CONTROLLER
	// *kerr.Error naming the active controller when there is one.
	Active(ctx context.Context) (Backend, error)
}

// AdminServer serves AdminService.
type AdminServer struct {
	adminv1.UnsafeAdminServiceServer
	office Office
	// TimeoutMaxMs is request.timeout.max.ms: the largest timeout_ms taken.
	TimeoutMaxMs int32
}

// DefaultTimeoutMaxMs is request.timeout.max.ms when not set (5 minutes).
const DefaultTimeoutMaxMs = 300_000

// NewAdmin returns the AdminService handlers.
func NewAdmin(o Office) *AdminServer {
	return &AdminServer{office: o, TimeoutMaxMs: DefaultTimeoutMaxMs}
}

// checkTimeout refuses a negative or too long timeout_ms before anything is
// done, so a refused request changes nothing.
func (s *AdminServer) checkTimeout(ms int32) error {
	if ms < 0 {
		return kerr.BadField(kerr.InvalidRequest, "timeout_ms", "must not be negative, got %d", ms)
	}
	if ms > s.TimeoutMaxMs {
		return kerr.BadField(kerr.InvalidRequest, "timeout_ms", "%d is above request.timeout.max.ms %d", ms, s.TimeoutMaxMs)
	}
	return nil
}

var _ adminv1.AdminServiceServer = (*AdminServer)(nil)

func (s *AdminServer) CreateTopics(ctx context.Context, req *adminv1.CreateTopicsRequest) (*adminv1.CreateTopicsResponse, error) {
	if err := s.checkTimeout(req.GetTimeoutMs()); err != nil {
		return nil, err
	}
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.CreateTopics(ctx, req)
}

func (s *AdminServer) DeleteTopics(ctx context.Context, req *adminv1.DeleteTopicsRequest) (*adminv1.DeleteTopicsResponse, error) {
	if err := s.checkTimeout(req.GetTimeoutMs()); err != nil {
		return nil, err
	}
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.DeleteTopics(ctx, req)
}

func (s *AdminServer) DescribeTopics(ctx context.Context, req *adminv1.DescribeTopicsRequest) (*adminv1.DescribeTopicsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.DescribeTopics(ctx, req)
}

func (s *AdminServer) DescribeCluster(ctx context.Context, req *adminv1.DescribeClusterRequest) (*adminv1.DescribeClusterResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.DescribeCluster(ctx, req)
}

func (s *AdminServer) DescribeConfigs(ctx context.Context, req *adminv1.DescribeConfigsRequest) (*adminv1.DescribeConfigsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.DescribeConfigs(ctx, req)
}

func (s *AdminServer) AlterConfigs(ctx context.Context, req *adminv1.AlterConfigsRequest) (*adminv1.AlterConfigsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.AlterConfigs(ctx, req)
}

func (s *AdminServer) ElectLeaders(ctx context.Context, req *adminv1.ElectLeadersRequest) (*adminv1.ElectLeadersResponse, error) {
	if err := s.checkTimeout(req.GetTimeoutMs()); err != nil {
		return nil, err
	}
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.ElectLeaders(ctx, req)
}

func (s *AdminServer) WatchCluster(req *adminv1.WatchClusterRequest, stream adminv1.AdminService_WatchClusterServer) error {
	if ms := req.GetIntervalMs(); ms < 0 {
		return kerr.BadField(kerr.InvalidRequest, "interval_ms", "must not be negative, got %d (0 means 1000)", ms)
	}
	b, err := s.office.Active(stream.Context())
	if err != nil {
		return err
	}
	return b.WatchCluster(stream.Context(), req, stream.Send)
}

// ControlServer serves ControllerService.
type ControlServer struct {
	controlv1.UnsafeControllerServiceServer
	office Office
}

// NewControl returns the ControllerService handlers.
func NewControl(o Office) *ControlServer { return &ControlServer{office: o} }

var _ controlv1.ControllerServiceServer = (*ControlServer)(nil)

func (s *ControlServer) AlterPartition(ctx context.Context, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.AlterPartition(ctx, req)
}

func (s *ControlServer) ControlledShutdown(ctx context.Context, req *controlv1.ControlledShutdownRequest) (*controlv1.ControlledShutdownResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.ControlledShutdown(ctx, req)
}

func (s *ControlServer) AllocateProducerIds(ctx context.Context, req *controlv1.AllocateProducerIdsRequest) (*controlv1.AllocateProducerIdsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.AllocateProducerIds(ctx, req)
}

func (s *ControlServer) CreateOffsetsTopic(ctx context.Context, req *controlv1.CreateOffsetsTopicRequest) (*controlv1.CreateOffsetsTopicResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.CreateOffsetsTopic(ctx, req)
}

func (s *ControlServer) BrokerSession(stream controlv1.ControllerService_BrokerSessionServer) error {
	b, err := s.office.Active(stream.Context())
	if err != nil {
		return err
	}
	return b.BrokerSession(stream.Context(), stream.Recv, stream.Send)
}
