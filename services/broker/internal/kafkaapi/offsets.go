package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
)

// Kafka's special ListOffsets timestamps.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3 // v7+, KIP-734
	// v8+, KIP-1005: the first offset kept on the broker's own disk, and
	// the last offset tiered storage holds.
	listEarliestLocal = -4
	listLatestTiered  = -5
)

// handleListOffsets looks each partition up through the gRPC ListOffsets
// handler: earliest (log start), latest, the first offset at or after a
// timestamp, or the first record carrying the largest timestamp. As Kafka,
// a client's request (replica id -1, what consumers and admin clients
// send) sees what consumers can read, below the HW (with no transactions
// also the last stable offset a read_committed consumer asks for); any
// other replica id (a broker's, or -2 for debugging, which a follower
// answers too) sees the log up to its LEO. tidemark has no tiered storage,
// so, as Kafka without it, earliest-local is the log start and
// latest-tiered is offset -1 (after the same leader checks).
func (s *Server) handleListOffsets(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	// A partition named twice is INVALID_REQUEST, answered once and not
	// looked up, as Kafka's ReplicaManager.fetchOffset answers it.
	named := map[replica.TP]int{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			named[replica.TP{Topic: t.Topic, Partition: p.Partition}]++
		}
	}
	req.Topics = lastOfEach(req.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic },
		func(t *kmsg.ListOffsetsRequestTopic) *[]kmsg.ListOffsetsRequestTopicPartition { return &t.Partitions },
		func(p *kmsg.ListOffsetsRequestTopicPartition) int32 { return p.Partition })
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			greq := &brokerv1.ListOffsetsRequest{Topic: t.Topic, Partition: p.Partition, Timestamp: p.Timestamp, CurrentLeaderEpoch: p.CurrentLeaderEpoch}
			switch {
			case p.Timestamp == listLatest:
				greq.Spec = brokerv1.OffsetSpec_OFFSET_SPEC_LATEST
			case p.Timestamp == listEarliest, p.Timestamp == listEarliestLocal, p.Timestamp == listLatestTiered:
				greq.Spec = brokerv1.OffsetSpec_OFFSET_SPEC_EARLIEST
			case p.Timestamp == listMaxTimestamp:
				greq.Spec = brokerv1.OffsetSpec_OFFSET_SPEC_MAX_TIMESTAMP
			case p.Timestamp >= 0:
				greq.Spec = brokerv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP
			}
			var gresp *brokerv1.ListOffsetsResponse
			err := s.authorize(ctx, brokerv1.BrokerService_ListOffsets_FullMethodName, greq)
			if err == nil && named[replica.TP{Topic: t.Topic, Partition: p.Partition}] > 1 {
				err = kerr.New(kerr.InvalidRequest, "the partition is named more than once in the request")
			}
			if err == nil && greq.Spec == brokerv1.OffsetSpec_OFFSET_SPEC_UNSPECIFIED {
				err = kerr.BadField(kerr.InvalidRequest, "timestamp", "%d is not a timestamp, -1 (latest), -2 (earliest), -3 (max timestamp), -4 (earliest local) or -5 (latest tiered)", p.Timestamp)
			}
			if err == nil {
				gresp, err = s.opts.Broker.ListOffsetsAtEpoch(ctx, greq, p.CurrentLeaderEpoch, req.ReplicaID)
			}
			if err != nil {
				rp.ErrorCode = code(err)
			} else {
				rp.Offset, rp.Timestamp, rp.LeaderEpoch = gresp.GetOffset(), gresp.GetTimestamp(), gresp.GetLeaderEpoch()
				if p.Timestamp == listLatestTiered {
					rp.Offset, rp.Timestamp, rp.LeaderEpoch = -1, -1, -1
				}
				if req.Version == 0 {
					rp.OldStyleOffsets = []int64{rp.Offset}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// handleOffsetForLeaderEpoch answers through the replication service's
// handler, as a consumer (replica id -1) checking for truncation after a
// leader change (KIP-320).
func (s *Server) handleOffsetForLeaderEpoch(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			greq := &replicationv1.OffsetForLeaderEpochRequest{ReplicaId: -1, Partitions: []*replicationv1.OffsetForLeaderEpochPartition{{
				Topic: t.Topic, Partition: p.Partition, CurrentLeaderEpoch: p.CurrentLeaderEpoch, LeaderEpoch: p.LeaderEpoch}}}
			err := s.authorize(ctx, replicationv1.ReplicationService_OffsetForLeaderEpoch_FullMethodName, greq)
			var gresp *replicationv1.OffsetForLeaderEpochResponse
			if err == nil {
				gresp, err = s.opts.Replication.OffsetForLeaderEpoch(ctx, greq)
			}
			switch {
			case err != nil:
				rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = code(err), -1, -1
			case len(gresp.GetPartitions()) == 1:
				r := gresp.GetPartitions()[0]
				rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = protoCode(r.GetErrorCode()), r.GetLeaderEpoch(), r.GetEndOffset()
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
