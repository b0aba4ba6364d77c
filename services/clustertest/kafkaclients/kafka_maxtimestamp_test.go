package kafkaclients

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
)

// maxTimestampOf asks ListOffsets v7 for the partition's max timestamp
// (-3) until the leader answers it without an error.
func maxTimestampOf(c *clustertest.Cluster, cl *kgo.Client, topic string) kmsg.ListOffsetsResponseTopicPartition {
	c.T.Helper()
	var got kmsg.ListOffsetsResponseTopicPartition
	var last string
	c.WaitFor(30*time.Second, "a ListOffsets v7 max-timestamp answer", func() bool {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(7)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -3, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			last = err.Error()
			return false
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			last = fmt.Sprintf("answer %+v", resp.Topics)
			return false
		}
		if resp.Version != 7 {
			c.T.Fatalf("answered as ListOffsets v%d, want v7", resp.Version)
		}
		got = resp.Topics[0].Partitions[0]
		last = fmt.Sprintf("error %d offset %d", got.ErrorCode, got.Offset)
		return got.ErrorCode == 0 && got.Offset >= 0
	})
	c.T.Logf("max timestamp: %s", last)
	return got
}

// Records produced with timestamps out of order, within a batch and across
// batches, with a tie: ListOffsets v7's max timestamp is the first record
// carrying the largest, from the first leader, from a new leader once the
// followers caught up, and from a broker that crashed and recovered its log
// after an idle while.
func TestKafkaListOffsetsMaxTimestampAcrossLeaders(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	// ListOffsets pinned to v7, the version that brought max timestamp.
	v7 := kversion.Stable()
	v7.SetMaxKeyVersion(int16(kmsg.ListOffsets), 7)
	cl := c.KafkaClient(kgo.DefaultProduceTopic("maxts"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxVersions(v7))
	c.KafkaCreate(kadm.NewClient(cl), "maxts", 1, 3, nil)
	base := time.Now().Add(-time.Hour).UnixMilli()
	at := func(ts int64) *kgo.Record {
		return &kgo.Record{Value: []byte(fmt.Sprint(ts)), Timestamp: time.UnixMilli(base + ts)}
	}
	ctx := clustertest.CtxFor(t, 60*time.Second)
	// One batch: offsets 0-2, the maximum in the middle.
	if err := cl.ProduceSync(ctx, at(10), at(500), at(20)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{500, 30, 400} { // offsets 3-5: a tie, then smaller
		if err := cl.ProduceSync(ctx, at(ts)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	want := maxTimestampOf(c, cl, "maxts")
	if want.Offset != 1 || want.Timestamp != base+500 {
		t.Fatalf("first leader: offset %d timestamp %d, want offset 1 timestamp %d", want.Offset, want.Timestamp, base+500)
	}
	// The gRPC API (and REST through the gateway) answers the same.
	lo, err := c.Client().ListOffsets(ctx, "maxts", 0, client.MaxTimestamp())
	if err != nil || lo.Offset != want.Offset || lo.Timestamp != want.Timestamp || lo.LeaderEpoch != want.LeaderEpoch {
		t.Fatalf("gRPC ListOffsets OFFSET_SPEC_MAX_TIMESTAMP: %+v, %v; want offset %d timestamp %d epoch %d",
			lo, err, want.Offset, want.Timestamp, want.LeaderEpoch)
	}
	same := func(what string) {
		t.Helper()
		got := maxTimestampOf(c, cl, "maxts")
		if got.Offset != want.Offset || got.Timestamp != want.Timestamp || got.LeaderEpoch != want.LeaderEpoch {
			t.Fatalf("%s: offset %d timestamp %d epoch %d, want offset %d timestamp %d epoch %d",
				what, got.Offset, got.Timestamp, got.LeaderEpoch, want.Offset, want.Timestamp, want.LeaderEpoch)
		}
	}
	all := []int32{1, 2, 3}
	c.WaitHWAtLEO("maxts", 0, all...)
	first := c.Partition("maxts", 0).GetLeader()
	if err := c.StopBroker(first); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(20*time.Second, "a new leader", func() bool {
		l := c.Partition("maxts", 0).GetLeader()
		return l >= 0 && l != first
	})
	same("after a leader change")
	c.StartBroker(first)
	c.WaitHWAtLEO("maxts", 0, all...)

	// An idle while, then the leader crashes: its log is recovered from its
	// files when it starts again.
	time.Sleep(time.Second)
	second := c.Partition("maxts", 0).GetLeader()
	c.CrashBroker(second)
	c.StartBroker(second)
	c.WaitHWAtLEO("maxts", 0, all...)
	c.WaitFor(20*time.Second, "the restarted broker back in the ISR", func() bool {
		for _, id := range c.Partition("maxts", 0).GetIsr() {
			if id == second {
				return true
			}
		}
		return false
	})
	// Make the restarted broker the leader: stop the others, the follower
	// first, so the leadership can only move to it.
	for _, id := range all {
		if id != second && id != c.Partition("maxts", 0).GetLeader() {
			if err := c.StopBroker(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l := c.Partition("maxts", 0).GetLeader(); l != second {
		if err := c.StopBroker(l); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor(20*time.Second, "the restarted broker leading", func() bool {
		return c.Partition("maxts", 0).GetLeader() == second
	})
	same("from the restarted broker's recovered log")
}
