package client

import (
	"context"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// CreateAcls stores ACL bindings; each creation has its own result.
func (a *Admin) CreateAcls(ctx context.Context, req *adminv1.CreateAclsRequest) (*adminv1.CreateAclsResponse, error) {
	return unary(a, ctx, "create ACLs", req, callOpts(adminv1.AdminServiceClient.CreateAcls))
}

// DescribeAcls lists the ACL bindings a filter matches.
func (a *Admin) DescribeAcls(ctx context.Context, req *adminv1.DescribeAclsRequest) (*adminv1.DescribeAclsResponse, error) {
	return unary(a, ctx, "describe ACLs", req, callOpts(adminv1.AdminServiceClient.DescribeAcls))
}

// DeleteAcls deletes the ACL bindings each filter matches.
func (a *Admin) DeleteAcls(ctx context.Context, req *adminv1.DeleteAclsRequest) (*adminv1.DeleteAclsResponse, error) {
	return unary(a, ctx, "delete ACLs", req, callOpts(adminv1.AdminServiceClient.DeleteAcls))
}
