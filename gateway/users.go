package gateway

import (
	"cmp"
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
			out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), "user " + e.GetUser(), ""})
		}
		return out
	})
}

func (s adminService) AlterUserScramCredentials(ctx context.Context, req *adminv1.AlterUserScramCredentialsRequest, _ ...grpc.CallOption) (*adminv1.AlterUserScramCredentialsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.AlterUserScramCredentials(ctx, req)
	return checked(resp, err, alterScramOutcomes(req))
}

// alterScramOutcomes names each user's refusal by the first item of the
// request about that user, its deletions before its upsertions: the answer
// has one result per user.
func alterScramOutcomes(req *adminv1.AlterUserScramCredentialsRequest) func(*adminv1.AlterUserScramCredentialsResponse) []outcome {
	deleted := func(d *adminv1.ScramCredentialDeletion) string { return d.GetUser() }
	upserted := func(u *adminv1.ScramCredentialUpsertion) string { return u.GetUser() }
	return func(r *adminv1.AlterUserScramCredentialsResponse) []outcome {
		var out []outcome
		for _, e := range r.GetResults() {
			field := cmp.Or(itemFieldBy("deletions", req.GetDeletions(), deleted, e.GetUser()),
				itemFieldBy("upsertions", req.GetUpsertions(), upserted, e.GetUser()))
			out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), "user " + e.GetUser(), field})
		}
		return out
	}
}
