package grpcapi

import (
	"context"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

func (s *AdminServer) DescribeClientQuotas(ctx context.Context, req *adminv1.DescribeClientQuotasRequest) (*adminv1.DescribeClientQuotasResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.DescribeClientQuotas(ctx, req)
}

func (s *AdminServer) AlterClientQuotas(ctx context.Context, req *adminv1.AlterClientQuotasRequest) (*adminv1.AlterClientQuotasResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.AlterClientQuotas(ctx, req)
}
