package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	c.waitSettled(15*time.Second, topic, 0, reps)
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if low, err := cl.DeleteRecords(ctx, topic, 0, 4); err != nil || low != 4 {
		t.Fatalf("delete below 4: low watermark %d, %v; want 4", low, err)
	}
	for _, id := range reps {
		if v, ok := c.view(id, topic, 0); !ok || v.logStart != 4 {
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
	// An unknown partition may be one the metadata has not caught up
	// with: it is retried until ctx ends, then named.
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := cl.DeleteRecords(short, topic, 1, 0); kerr.CodeOf(err) != kerr.UnknownTopicOrPartition {
		t.Fatalf("delete in partition 1 of a one-partition topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	// The partition still takes writes after its log start moved to its end.
	if off, err := c.Produce(context.Background(), topic, 0, -1, "after"); err != nil || off != 6 {
		t.Fatalf("produce after deleting every record: offset %d, %v; want 6", off, err)
	}
}
