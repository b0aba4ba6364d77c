package kafkaapi

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// handleDeleteRecords moves each partition's log start up to the offset
// asked (-1: the HW) on its leader, this broker, and answers once every
// live replica's log start is there or timeout_ms has passed (KIP-107, the
// replica manager's DeleteRecords). As Kafka's handleDeleteRecordsRequest:
// Delete on the topic is needed (TOPIC_AUTHORIZATION_FAILED; the gRPC
// method's policy decides it), a topic the metadata lacks is
// UNKNOWN_TOPIC_OR_PARTITION (the replica manager's answer for a partition
// nobody hosts), and an internal topic is INVALID_TOPIC_EXCEPTION. The
// partitions wait side by side with one deadline (one waiter in the replica
// manager, whatever their number). A partition named more than once is
// served once, from its last entry.
func (s *Server) handleDeleteRecords(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	req.Topics = lastOfEach(req.Topics, func(t *kmsg.DeleteRecordsRequestTopic) string { return t.Topic },
		func(t *kmsg.DeleteRecordsRequestTopic) *[]kmsg.DeleteRecordsRequestTopicPartition {
			return &t.Partitions
		},
		func(p *kmsg.DeleteRecordsRequestTopicPartition) int32 { return p.Partition })
	timeout := time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
	var asked []replica.DeleteRecordsPartition
	var answers []*kmsg.DeleteRecordsResponseTopicPartition // asked's, in order
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		*rt = kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(t.Partitions))
		refusal := s.deleteRecordsRefusal(ctx, t.Topic)
		for i, p := range t.Partitions {
			rp := &rt.Partitions[i]
			*rp = kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			if refusal != nil {
				rp.ErrorCode = code(refusal)
				continue
			}
			asked = append(asked, replica.DeleteRecordsPartition{TP: replica.TP{Topic: t.Topic, Partition: p.Partition}, Offset: p.Offset})
			answers = append(answers, rp)
		}
	}
	if len(asked) == 0 {
		return resp
	}
	for i, res := range s.opts.RM.DeleteRecords(ctx, asked, timeout) {
		answers[i].LowWatermark, answers[i].ErrorCode = res.LowWatermark, code(res.Err)
	}
	return resp
}

// deleteRecordsRefusal is the error every partition of topic is answered
// with before any is looked up, nil when none. __consumer_offsets is
// refused: the group coordinator loads groups from its log start.
func (s *Server) deleteRecordsRefusal(ctx context.Context, topic string) error {
	if err := s.authorize(ctx, brokerv1.BrokerService_DeleteRecords_FullMethodName, &brokerv1.DeleteRecordsRequest{Topic: topic}); err != nil {
		return err
	}
	if topicconfig.IsInternal(topic) {
		return kerr.New(kerr.InvalidTopicException, "records of the internal topic %s cannot be deleted", topic)
	}
	return nil
}
