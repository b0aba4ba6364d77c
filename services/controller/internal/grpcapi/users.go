package grpcapi

import (
	"context"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

func (s *AdminServer) DescribeUserScramCredentials(ctx context.Context, req *adminv1.DescribeUserScramCredentialsRequest) (*adminv1.DescribeUserScramCredentialsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.DescribeUserScramCredentials(ctx, req)
}

func (s *AdminServer) AlterUserScramCredentials(ctx context.Context, req *adminv1.AlterUserScramCredentialsRequest) (*adminv1.AlterUserScramCredentialsResponse, error) {
	b, err := s.office.Active(ctx)
	if err != nil {
		return nil, err
	}
	return b.AlterUserScramCredentials(ctx, req)
}
