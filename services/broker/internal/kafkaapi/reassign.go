package kafkaapi

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// Partition reassignment (KIP-455) over the Kafka protocol: both requests
// are forwarded to the controller's AlterPartitionReassignments and
// ListPartitionReassignments, which authorize them (Alter on Cluster,
// Describe on Cluster) and do the work. The controller's refusal of the
// whole request (authorization, no controller, the timeout) is the
// top-level code; Kafka's error answer repeats it on every partition.

// reassignTimeout is how long the forward may take: the request's
// timeout_ms, or Kafka's default of 60 s when it gives none.
func reassignTimeout(ms int32) time.Duration {
	if ms <= 0 {
		ms = 60_000
	}
	return time.Duration(ms) * time.Millisecond
}

// handleAlterPartitionReassignments forwards each partition's new target;
// a null replica list cancels the partition's move (tidemark's empty
// target), so an empty non-null list, which Kafka refuses, is refused here
// before it could be taken for a cancel.
func (s *Server) handleAlterPartitionReassignments(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	type item struct {
		topic     string
		partition int32
		err       error // refused here
	}
	var items []item
	greq := &adminv1.AlterPartitionReassignmentsRequest{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			it := item{topic: t.Topic, partition: p.Partition}
			if p.Replicas != nil && len(p.Replicas) == 0 {
				it.err = kerr.New(kerr.InvalidReplicaAssignment, "the target replica list of %s-%d is empty: give the replicas, or null to cancel", t.Topic, p.Partition)
			} else {
				greq.Partitions = append(greq.Partitions, &adminv1.ReassignablePartition{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
			}
			items = append(items, it)
		}
	}
	results, err := s.forwardReassignments(ctx, req.TimeoutMillis, greq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
	}
	byTopic := map[string]int{}
	next := 0 // the forwarded items come back in order
	for _, it := range items {
		rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
		rp.Partition = it.partition
		switch {
		case err != nil: // the whole call refused (authorization first, as Kafka)
			rp.ErrorCode, rp.ErrorMessage = code(err), message(err)
		case it.err != nil:
			rp.ErrorCode, rp.ErrorMessage = code(it.err), message(it.err)
		case next < len(results):
			r := results[next]
			next++
			rp.ErrorCode, rp.ErrorMessage = protoCode(r.GetErrorCode()), optMessage(r.GetErrorMessage())
		default:
			e := kerr.New(kerr.UnknownServerError, "the controller gave no answer for %s-%d", it.topic, it.partition)
			rp.ErrorCode, rp.ErrorMessage = code(e), message(e)
		}
		i, ok := byTopic[it.topic]
		if !ok {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = it.topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[it.topic] = i
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

// forwardReassignments sends greq to the controller, which authorizes it
// even when every item was refused here, so that a caller without Alter on
// Cluster learns that first, as from Kafka.
func (s *Server) forwardReassignments(ctx context.Context, timeoutMs int32, greq *adminv1.AlterPartitionReassignmentsRequest) ([]*adminv1.ReassignmentResult, error) {
	cli, fctx, cancel, err := s.adminFor(ctx, reassignTimeout(timeoutMs))
	if err != nil {
		return nil, err
	}
	defer cancel()
	gresp, err := cli.AlterPartitionReassignments(fctx, greq)
	if err != nil {
		return nil, err
	}
	return gresp.GetResults(), nil
}

// handleListPartitionReassignments lists the moves in flight: every one
// for null topics, else those among the partitions named (one not moving
// is left out, as Kafka does). replicas is the whole moving set (target
// then origin), adding the target's replicas outside the origin, removing
// the origin's outside the target.
func (s *Server) handleListPartitionReassignments(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	greq := &adminv1.ListPartitionReassignmentsRequest{}
	if req.Topics != nil {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				greq.Partitions = append(greq.Partitions, &commonv1.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		if len(greq.Partitions) == 0 {
			// Named nothing: the controller would take an empty list
			// for all, the caller asked for none.
			return resp
		}
	}
	cli, fctx, cancel, err := s.adminFor(ctx, reassignTimeout(req.TimeoutMillis))
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		return resp
	}
	defer cancel()
	ongoing, err := listSkippingUnknownTopics(fctx, cli, greq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		return resp
	}
	byTopic := map[string]int{}
	for _, r := range ongoing {
		i, ok := byTopic[r.GetTopic()]
		if !ok {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = r.GetTopic()
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[r.GetTopic()] = i
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = r.GetPartition()
		rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = nonNil(r.GetReplicas()), nonNil(r.GetAddingReplicas()), nonNil(r.GetRemovingReplicas())
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

// nonNil keeps an empty list an empty array on the wire (the fields are
// not nullable).
func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// listSkippingUnknownTopics lists greq's moves. The controller refuses a
// request naming a topic it does not know; Kafka's leaves such a topic
// out, so on that refusal each topic is asked alone and the unknown ones
// are skipped.
func listSkippingUnknownTopics(ctx context.Context, cli adminv1.AdminServiceClient, greq *adminv1.ListPartitionReassignmentsRequest) ([]*adminv1.OngoingReassignment, error) {
	gresp, err := cli.ListPartitionReassignments(ctx, greq)
	if err == nil || len(greq.GetPartitions()) == 0 || kerr.FromStatus(err).Code != kerr.UnknownTopicOrPartition {
		return gresp.GetReassignments(), err
	}
	var topics []string
	byTopic := map[string][]*commonv1.TopicPartition{}
	for _, tp := range greq.GetPartitions() {
		if _, ok := byTopic[tp.GetTopic()]; !ok {
			topics = append(topics, tp.GetTopic())
		}
		byTopic[tp.GetTopic()] = append(byTopic[tp.GetTopic()], tp)
	}
	var out []*adminv1.OngoingReassignment
	for _, t := range topics {
		one, err := cli.ListPartitionReassignments(ctx, &adminv1.ListPartitionReassignmentsRequest{Partitions: byTopic[t]})
		switch {
		case err != nil && kerr.FromStatus(err).Code == kerr.UnknownTopicOrPartition:
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, one.GetReassignments()...)
	}
	return out, nil
}
