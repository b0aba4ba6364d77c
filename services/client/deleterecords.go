package client

import (
	"context"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// DeleteHighWatermark, as DeleteRecords' offset, deletes every record
// below the high watermark.
const DeleteHighWatermark int64 = -1

// DeleteRecords raises topic-partition's log start to offset on its leader
// (Kafka's DeleteRecords, KIP-107): records below it can no longer be read.
// It returns the low watermark, the least log start among the leader and
// its live followers, once every live replica has moved. Asking below the
// log start moves nothing. An offset beyond the high watermark, or negative
// other than DeleteHighWatermark, is OFFSET_OUT_OF_RANGE. Retriable answers
// (a leader change, followers not there in time) are retried until ctx ends
// (or the API timeout when ctx has no deadline): asking again is harmless.
// A partition beyond the topic's partition count fails at once, as in
// ListOffsets.
// With an error, the low watermark returned is the one the last
// REQUEST_TIMED_OUT answer reported its leader had reached (Kafka's answer
// carries it beside the error), or -1 when no answer reported one.
func (c *Client) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	if err := checkDeleteRecords(topic, partition, offset); err != nil {
		return -1, err
	}
	var low int64 = -1
	err := c.partitionCall(ctx, "delete records", topic, partition,
		func(ctx context.Context, _ route, bc brokerv1.BrokerServiceClient) error {
			resp, err := bc.DeleteRecords(ctx, &brokerv1.DeleteRecordsRequest{
				Topic: topic, Partition: partition, Offset: offset,
				TimeoutMs: c.followerWaitMs(ctx),
			})
			if err != nil {
				// A timed-out wait still says how far the low watermark got.
				if part, ok := kerr.FromCall(err).Partial.(*brokerv1.DeleteRecordsResponse); ok {
					low = part.GetLowWatermark()
				}
				return err
			}
			low = resp.GetLowWatermark()
			return nil
		})
	return low, err
}

// checkDeleteRecords refuses what no broker could accept, before asking.
func checkDeleteRecords(topic string, partition int32, offset int64) error {
	if topic == "" {
		return kerr.BadField(kerr.InvalidTopicException, "topic", "must not be empty")
	}
	if partition < 0 {
		return kerr.BadField(kerr.UnknownTopicOrPartition, "partition", "must not be negative, got %d", partition)
	}
	if offset < DeleteHighWatermark {
		return kerr.BadField(kerr.OffsetOutOfRange, "offset", "%d is neither an offset nor DeleteHighWatermark (-1)", offset)
	}
	return nil
}

// followerWaitMs is how long the leader may wait for its followers' log
// starts: what is left of the attempt, so that the broker answers
// REQUEST_TIMED_OUT (retried) before the call's own deadline cuts it off.
func (c *Client) followerWaitMs(ctx context.Context) int32 {
	wait := c.opts.RequestTimeout
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d)*9/10)
	}
	return int32(max(wait, time.Millisecond).Milliseconds())
}
