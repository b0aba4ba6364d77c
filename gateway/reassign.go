package gateway

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

func (s adminService) AlterPartitionReassignments(ctx context.Context, req *adminv1.AlterPartitionReassignmentsRequest, _ ...grpc.CallOption) (*adminv1.AlterPartitionReassignmentsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.AlterPartitionReassignments(ctx, req)
	return checked(resp, err, reassignOutcomes)
}

func (s adminService) ListPartitionReassignments(ctx context.Context, req *adminv1.ListPartitionReassignmentsRequest, _ ...grpc.CallOption) (*adminv1.ListPartitionReassignmentsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	return s.a.ListPartitionReassignments(ctx, req)
}

func (s adminService) CreatePartitions(ctx context.Context, req *adminv1.CreatePartitionsRequest, _ ...grpc.CallOption) (*adminv1.CreatePartitionsResponse, error) {
	ctx, cancel := s.bound(ctx, req.GetTimeoutMs())
	defer cancel()
	resp, err := s.a.CreatePartitions(ctx, req)
	return checked(resp, err, createPartitionsOutcomes)
}

func reassignOutcomes(r *adminv1.AlterPartitionReassignmentsResponse) []outcome {
	var out []outcome
	for _, e := range r.GetResults() {
		out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), fmt.Sprintf("partition %s-%d", e.GetTopic(), e.GetPartition())})
	}
	return out
}

func createPartitionsOutcomes(r *adminv1.CreatePartitionsResponse) []outcome {
	var out []outcome
	for _, e := range r.GetResults() {
		out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), "topic " + e.GetName()})
	}
	return out
}
