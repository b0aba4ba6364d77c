package gateway

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

func (s adminService) CreateAcls(ctx context.Context, req *adminv1.CreateAclsRequest, _ ...grpc.CallOption) (*adminv1.CreateAclsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.CreateAcls(ctx, req)
	return checked(resp, err, func(r *adminv1.CreateAclsResponse) []outcome {
		var out []outcome
		for i, c := range r.GetResults() {
			out = append(out, outcome{c.GetErrorCode(), c.GetErrorMessage(), "ACL binding " + bindingSubject(req.GetCreations(), i), fmt.Sprintf("creations[%d]", i)})
		}
		return out
	})
}

func (s adminService) DescribeAcls(ctx context.Context, req *adminv1.DescribeAclsRequest, _ ...grpc.CallOption) (*adminv1.DescribeAclsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	return s.a.DescribeAcls(ctx, req)
}

func (s adminService) DeleteAcls(ctx context.Context, req *adminv1.DeleteAclsRequest, _ ...grpc.CallOption) (*adminv1.DeleteAclsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.DeleteAcls(ctx, req)
	return checked(resp, err, func(r *adminv1.DeleteAclsResponse) []outcome {
		var out []outcome
		for i, f := range r.GetResults() {
			out = append(out, outcome{f.GetErrorCode(), f.GetErrorMessage(), "ACL filter", fmt.Sprintf("filters[%d]", i)})
		}
		return out
	})
}

func bindingSubject(cs []*adminv1.AclBinding, i int) string {
	if i >= len(cs) {
		return ""
	}
	c := cs[i]
	return c.GetResourceType() + ":" + c.GetResourceName() + " " + c.GetPrincipal() + " " + c.GetOperation()
}
