package gateway

import (
	"context"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// The users' SCRAM credentials (POST /v1/users/scram:describe and
// /v1/users/scram:alter). An alter carries the salt and salted password,
// never the password, as Kafka's AlterUserScramCredentials.

func (s adminService) DescribeUserScramCredentials(ctx context.Context, req *adminv1.DescribeUserScramCredentialsRequest, _ ...grpc.CallOption) (*adminv1.DescribeUserScramCredentialsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.DescribeUserScramCredentials(ctx, req)
	return checked(resp, err, func(r *adminv1.DescribeUserScramCredentialsResponse) []outcome {
		var out []outcome
		for _, e := range r.GetResults() {
			out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), "user " + e.GetUser()})
		}
		return out
	})
}

func (s adminService) AlterUserScramCredentials(ctx context.Context, req *adminv1.AlterUserScramCredentialsRequest, _ ...grpc.CallOption) (*adminv1.AlterUserScramCredentialsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.AlterUserScramCredentials(ctx, req)
	return checked(resp, err, func(r *adminv1.AlterUserScramCredentialsResponse) []outcome {
		var out []outcome
		for _, e := range r.GetResults() {
			out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), "user " + e.GetUser()})
		}
		return out
	})
}
