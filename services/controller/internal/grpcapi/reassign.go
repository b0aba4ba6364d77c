package grpcapi

import (
	"context"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

func (s *AdminServer) AlterPartitionReassignments(ctx context.Context, req *adminv1.AlterPartitionReassignmentsRequest) (*adminv1.AlterPartitionReassignmentsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.AlterPartitionReassignments(ctx, req)
}

func (s *AdminServer) ListPartitionReassignments(ctx context.Context, req *adminv1.ListPartitionReassignmentsRequest) (*adminv1.ListPartitionReassignmentsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.ListPartitionReassignments(ctx, req)
}

func (s *AdminServer) CreatePartitions(ctx context.Context, req *adminv1.CreatePartitionsRequest) (*adminv1.CreatePartitionsResponse, error) {
	if err := s.checkTimeout(req.GetTimeoutMs()); err != nil {
		return nil, err
	}
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.CreatePartitions(ctx, req)
}
