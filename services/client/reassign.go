package client

import (
	"context"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// AlterPartitionReassignments starts, replaces or cancels (empty replicas)
// partition reassignments (KIP-455).
func (a *Admin) AlterPartitionReassignments(ctx context.Context, req *adminv1.AlterPartitionReassignmentsRequest) (*adminv1.AlterPartitionReassignmentsResponse, error) {
	return unary(a, ctx, "alter partition reassignments", req, callOpts(adminv1.AdminServiceClient.AlterPartitionReassignments))
}

// ListPartitionReassignments lists the reassignments in flight.
func (a *Admin) ListPartitionReassignments(ctx context.Context, req *adminv1.ListPartitionReassignmentsRequest) (*adminv1.ListPartitionReassignmentsResponse, error) {
	return unary(a, ctx, "list partition reassignments", req, callOpts(adminv1.AdminServiceClient.ListPartitionReassignments))
}

// CreatePartitions adds partitions to topics.
func (a *Admin) CreatePartitions(ctx context.Context, req *adminv1.CreatePartitionsRequest) (*adminv1.CreatePartitionsResponse, error) {
	return unary(a, ctx, "create partitions", req, callOpts(adminv1.AdminServiceClient.CreatePartitions))
}
