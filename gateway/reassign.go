package gateway

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
)

func (s adminService) AlterPartitionReassignments(ctx context.Context, req *adminv1.AlterPartitionReassignmentsRequest, _ ...grpc.CallOption) (*adminv1.AlterPartitionReassignmentsResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.AlterPartitionReassignments(ctx, req)
	return checked(resp, err, reassignOutcomes(req))
}

func (s adminService) ListPartitionReassignments(ctx context.Context, req *adminv1.ListPartitionReassignmentsRequest, _ ...grpc.CallOption) (*adminv1.ListPartitionReassignmentsResponse, error) {
	if err := checkListedPartitions(req.GetPartitions()); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	return s.a.ListPartitionReassignments(ctx, req)
}

func (s adminService) CreatePartitions(ctx context.Context, req *adminv1.CreatePartitionsRequest, _ ...grpc.CallOption) (*adminv1.CreatePartitionsResponse, error) {
	ctx, cancel := s.bound(ctx, req.GetTimeoutMs())
	defer cancel()
	resp, err := s.a.CreatePartitions(ctx, req)
	return checked(resp, err, createPartitionsOutcomes(req))
}

// checkListedPartitions refuses, before the controller is asked, a
// partition that can never exist: the controller answers the whole list
// UNKNOWN_TOPIC_OR_PARTITION for it, naming no field.
func checkListedPartitions(parts []*commonv1.TopicPartition) error {
	for i, tp := range parts {
		if err := checkPartitionNameAt(fmt.Sprintf("partitions[%d].", i), tp.GetTopic(), tp.GetPartition()); err != nil {
			return err
		}
	}
	return nil
}

func reassignOutcomes(req *adminv1.AlterPartitionReassignmentsRequest) func(*adminv1.AlterPartitionReassignmentsResponse) []outcome {
	keyOf := func(p *adminv1.ReassignablePartition) partitionKey {
		return partitionKey{p.GetTopic(), p.GetPartition()}
	}
	return func(r *adminv1.AlterPartitionReassignmentsResponse) []outcome {
		var out []outcome
		for _, e := range r.GetResults() {
			field := itemFieldBy("partitions", req.GetPartitions(), keyOf, partitionKey{e.GetTopic(), e.GetPartition()})
			out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), fmt.Sprintf("partition %s-%d", e.GetTopic(), e.GetPartition()), field})
		}
		return out
	}
}

func createPartitionsOutcomes(req *adminv1.CreatePartitionsRequest) func(*adminv1.CreatePartitionsResponse) []outcome {
	var names []string
	for _, t := range req.GetTopics() {
		names = append(names, t.GetName())
	}
	return func(r *adminv1.CreatePartitionsResponse) []outcome {
		var out []outcome
		for _, e := range r.GetResults() {
			out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), "topic " + e.GetName(), itemField("topics", names, e.GetName())})
		}
		return out
	}
}
