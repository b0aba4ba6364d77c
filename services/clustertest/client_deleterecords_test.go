package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// pollFirst polls a consumer of topic-0 from offset 0 under reset and
// returns the first record's offset, or the error Poll answered.
func pollFirst(t *testing.T, cl *client.Client, topic string, reset client.ResetPolicy) (int64, error) {
	t.Helper()
	cs, err := client.NewConsumer(cl, client.ConsumerOptions{Topic: topic, StartOffset: 0, Reset: reset})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		recs, err := cs.Poll(ctx)
		if err != nil {
			return -1, err
		}
		if len(recs) > 0 {
			return recs[0].Offset, nil
		}
	}
	t.Fatalf("a consumer of %s-0 from offset 0 read nothing", topic)
	return -1, nil
}

// The Go client's DeleteRecords on an RF=3 topic returns the low
// watermark, the offset asked, once every replica starts there: a consumer
// at offset 0 is refused (OFFSET_OUT_OF_RANGE) or, resetting, starts at the
// new log start. An offset beyond the high watermark, or below -1, is
// OFFSET_OUT_OF_RANGE and moves nothing; -1 deletes up to the high
// watermark; asking below the log start moves nothing back.
func TestClientDeleteRecords(t *testing.T) {
	c := Start(t, Options{})
	const topic = "trimmed"
	c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	reps := c.Partition(topic, 0).GetReplicas()
	for i := range 6 {
		if _, err := c.Produce(context.Background(), topic, 0, -1, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitSettled(15*time.Second, topic, 0, reps)
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if low, err := cl.DeleteRecords(ctx, topic, 0, 4); err != nil || low != 4 {
		t.Fatalf("delete below 4: low watermark %d, %v; want 4", low, err)
	}
	for _, id := range reps {
		if v, ok := c.View(id, topic, 0); !ok || v.LogStart != 4 {
			t.Fatalf("broker %d after the answer: %v, want log start 4", id, v)
		}
	}
	if _, err := pollFirst(t, cl, topic, client.ResetNone); kerr.CodeOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("a consumer at offset 0 without reset: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	if off, err := pollFirst(t, cl, topic, client.ResetEarliest); err != nil || off != 4 {
		t.Fatalf("a consumer at offset 0 resetting to the earliest read offset %d, %v; want 4", off, err)
	}

	for _, bad := range []int64{7, -2} {
		if low, err := cl.DeleteRecords(ctx, topic, 0, bad); kerr.CodeOf(err) != kerr.OffsetOutOfRange {
			t.Fatalf("delete below %d (HW 6): low watermark %d, %v; want OFFSET_OUT_OF_RANGE", bad, low, err)
		}
	}
	if low, err := cl.DeleteRecords(ctx, topic, 0, 2); err != nil || low != 4 {
		t.Fatalf("delete below 2 after 4: low watermark %d, %v; want 4", low, err)
	}
	if low, err := cl.DeleteRecords(ctx, topic, 0, client.DeleteHighWatermark); err != nil || low != 6 {
		t.Fatalf("delete below the HW: low watermark %d, %v; want 6", low, err)
	}
	// A partition beyond the topic's, by metadata fetched for the call,
	// fails at once (TestPartitionCallsFailFastBeyondTheTopicsPartitions).
	if _, err := cl.DeleteRecords(ctx, topic, 1, 0); kerr.CodeOf(err) != kerr.UnknownTopicOrPartition || ctx.Err() != nil {
		t.Fatalf("delete in partition 1 of a one-partition topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	// The partition still takes writes after its log start moved to its end.
	if off, err := c.Produce(context.Background(), topic, 0, -1, "after"); err != nil || off != 6 {
		t.Fatalf("produce after deleting every record: offset %d, %v; want 6", off, err)
	}
}

// A DeleteRecords that times out waiting for a follower that stopped
// fetching (its connections stalled, its registration live) answers
// REQUEST_TIMED_OUT with the low watermark reached so far, as Kafka's
// answer carries low_watermark beside the error: over gRPC as a second
// status detail, and from the Go client's DeleteRecords as its result.
func TestDeleteRecordsTimeoutCarriesTheLowWatermark(t *testing.T) {
	c := Start(t, Options{})
	const topic = "stalled"
	c.CreateTopic(topic, 1, 2, nil)
	reps := c.Partition(topic, 0).GetReplicas()
	for i := range 10 {
		if _, err := c.Produce(context.Background(), topic, 0, -1, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitSettled(15*time.Second, topic, 0, reps)
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if low, err := cl.DeleteRecords(ctx, topic, 0, 4); err != nil || low != 4 {
		t.Fatalf("delete below 4: low watermark %d, %v; want 4", low, err)
	}

	leader := c.Leader(topic, 0)
	follower := reps[0]
	if follower == leader {
		follower = reps[1]
	}
	c.Net.Pause(BrokerName(follower))
	defer c.Net.Resume(BrokerName(follower))

	_, err := c.BrokerClient(leader).DeleteRecords(ctx, &brokerv1.DeleteRecordsRequest{Topic: topic, Partition: 0, Offset: 8, TimeoutMs: 1000})
	ke := kerr.FromCall(err)
	if ke.Code != kerr.RequestTimedOut {
		t.Fatalf("delete below 8 with broker %d stalled: %v, want REQUEST_TIMED_OUT", follower, err)
	}
	if part, ok := ke.Partial.(*brokerv1.DeleteRecordsResponse); !ok || part.GetLowWatermark() != 4 {
		t.Fatalf("REQUEST_TIMED_OUT answer carries %v, want low watermark 4", ke.Partial)
	}

	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if low, err := cl.DeleteRecords(short, topic, 0, 8); kerr.CodeOf(err) != kerr.RequestTimedOut || low != 4 {
		t.Fatalf("client delete below 8 with broker %d stalled: low watermark %d, %v; want 4 and REQUEST_TIMED_OUT", follower, low, err)
	}
}

// ListOffsets and DeleteRecords of a partition beyond the topic's
// partition count, by metadata fetched for the call, fail at once with
// UNKNOWN_TOPIC_OR_PARTITION naming the topic and partition (they were
// retried until the API timeout, a minute); a topic missing from the
// metadata, which may be one created a moment ago, is still asked about
// again until the call's deadline.
func TestPartitionCallsFailFastBeyondTheTopicsPartitions(t *testing.T) {
	c := Start(t, Options{})
	const topic = "two"
	c.CreateTopic(topic, 2, 1, nil)
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.ListOffsets(ctx, topic, 1, client.Latest()); err != nil {
		t.Fatalf("list offsets of %s-1: %v", topic, err)
	}
	for what, call := range map[string]func() error{
		"list offsets": func() error { _, err := cl.ListOffsets(ctx, topic, 2, client.Latest()); return err },
		"delete records": func() error {
			_, err := cl.DeleteRecords(ctx, topic, 7, client.DeleteHighWatermark)
			return err
		},
	} {
		err := call()
		if kerr.CodeOf(err) != kerr.UnknownTopicOrPartition || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			t.Fatalf("%s beyond %s's 2 partitions: %v, want UNKNOWN_TOPIC_OR_PARTITION before the deadline", what, topic, err)
		}
		if !strings.Contains(err.Error(), `"two"`) || !strings.Contains(err.Error(), "has 2 partitions") {
			t.Fatalf("%s beyond %s's 2 partitions: %q, want the topic and its partition count named", what, topic, err)
		}
	}

	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	_, err := cl.ListOffsets(short, "absent", 0, client.Latest())
	if kerr.CodeOf(err) != kerr.UnknownTopicOrPartition || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("list offsets of a topic nobody created: %v, want UNKNOWN_TOPIC_OR_PARTITION once the deadline passed", err)
	}
}
