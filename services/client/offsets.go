package client

import (
	"context"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
)

// Special start offsets for ConsumerOptions.StartOffset, with Kafka's values.
const (
	// OffsetLatest starts at the high watermark: only records written from now on.
	OffsetLatest int64 = -1
	// OffsetEarliest starts at the log start offset.
	OffsetEarliest int64 = -2
)

// OffsetSpec selects what ListOffsets looks up. Build one with Earliest,
// Latest, AtTime or MaxTimestamp.
type OffsetSpec struct {
	spec brokerv1.OffsetSpec
	ts   int64
}

// Earliest is the log start offset.
func Earliest() OffsetSpec { return OffsetSpec{spec: brokerv1.OffsetSpec_OFFSET_SPEC_EARLIEST} }

// Latest is the high watermark, the end of what consumers can read.
func Latest() OffsetSpec { return OffsetSpec{spec: brokerv1.OffsetSpec_OFFSET_SPEC_LATEST} }

// AtTime is the first offset whose timestamp is at or after t.
func AtTime(t time.Time) OffsetSpec {
	return OffsetSpec{spec: brokerv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP, ts: t.UnixMilli()}
}

// MaxTimestamp is the first record carrying the partition's largest
// timestamp (Kafka's MAX_TIMESTAMP), with that timestamp; offset -1 when
// the partition is empty or that record is not yet below the high watermark.
func MaxTimestamp() OffsetSpec {
	return OffsetSpec{spec: brokerv1.OffsetSpec_OFFSET_SPEC_MAX_TIMESTAMP}
}

// ListedOffset is a ListOffsets answer.
type ListedOffset struct {
	// Offset is -1 when no record has a timestamp at or after the one asked
	// (for MaxTimestamp: none below the high watermark carries the largest).
	Offset      int64
	Timestamp   int64 // ms since the epoch, when the broker knows it
	LeaderEpoch int32
}

// ListOffsets looks up an offset of topic-partition on its leader, retrying
// retriable answers until ctx ends (or the API timeout when ctx has no
// deadline). A partition beyond the topic's partition count, by metadata
// fetched for the call, is UNKNOWN_TOPIC_OR_PARTITION at once; a topic the
// metadata does not list (yet) is asked about again until the deadline.
func (c *Client) ListOffsets(ctx context.Context, topic string, partition int32, spec OffsetSpec) (ListedOffset, error) {
	var out ListedOffset
	err := c.partitionCall(ctx, "list offsets", topic, partition,
		func(ctx context.Context, r route, bc brokerv1.BrokerServiceClient) error {
			resp, err := bc.ListOffsets(ctx, &brokerv1.ListOffsetsRequest{
				Topic: topic, Partition: partition, Spec: spec.spec, Timestamp: spec.ts,
				CurrentLeaderEpoch: r.leaderEpoch,
			})
			if err != nil {
				return err
			}
			out = ListedOffset{Offset: resp.GetOffset(), Timestamp: resp.GetTimestamp(), LeaderEpoch: resp.GetLeaderEpoch()}
			return nil
		})
	return out, err
}
