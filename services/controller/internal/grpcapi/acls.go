package grpcapi

import (
	"context"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

func (s *AdminServer) CreateAcls(ctx context.Context, req *adminv1.CreateAclsRequest) (*adminv1.CreateAclsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.CreateAcls(ctx, req)
}

func (s *AdminServer) DescribeAcls(ctx context.Context, req *adminv1.DescribeAclsRequest) (*adminv1.DescribeAclsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.DescribeAcls(ctx, req)
}

func (s *AdminServer) DeleteAcls(ctx context.Context, req *adminv1.DeleteAclsRequest) (*adminv1.DeleteAclsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.DeleteAcls(ctx, req)
}
