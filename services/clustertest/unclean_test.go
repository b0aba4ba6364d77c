package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// Unclean leader election with real brokers. A follower is cut off and
// leaves the ISR while acknowledged writes continue; then every ISR member
// dies. With unclean.leader.election.enable off the partition stays offline
// and, once an ISR member returns, nothing acknowledged is missing. Turned on
// at run time, the out-of-sync replica leads at once with only what it had:
// the acknowledged records it missed are gone.
func TestUncleanElectionOffThenOn(t *testing.T) {
	c := Start(t, Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("u", 1, 3, map[string]string{"min.insync.replicas": "1"})
	pd := c.Partition("u", 0)
	reps := pd.GetReplicas()
	leader, other, lagging := reps[0], reps[1], reps[2]
	ctx := context.Background()
	if _, err := c.Produce(ctx, "u", 0, -1, "a0"); err != nil {
		t.Fatal(err)
	}
	c.SameLogs("u", 0, reps...)
	c.Net.Partition(BrokerName(leader), BrokerName(lagging))
	var acked []string
	for i := 1; i <= 5; i++ {
		v := fmt.Sprintf("a%d", i)
		if _, err := c.Produce(ctx, "u", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		acked = append(acked, v)
	}
	c.WaitFor(10*time.Second, "the cut-off follower to leave the ISR", func() bool {
		return !slices.Contains(c.Partition("u", 0).GetIsr(), lagging)
	})

	// Every ISR member dies; only the out-of-sync replica is alive.
	c.CrashBroker(leader)
	c.CrashBroker(other)
	c.Net.HealAll()
	c.WaitFor(10*time.Second, "the partition to go offline", func() bool {
		return c.Partition("u", 0).GetLeader() == -1
	})
	time.Sleep(500 * time.Millisecond)
	if pd := c.Partition("u", 0); pd.GetLeader() != -1 || slices.Contains(pd.GetIsr(), lagging) || len(pd.GetIsr()) == 0 {
		t.Fatalf("unclean election off: leader %d isr %v; want offline, ISR kept without %d", pd.GetLeader(), pd.GetIsr(), lagging)
	}

	// Case "off", continued: the ISR member the controller kept (F19: it
	// never empties the ISR) returns and leads with every acknowledged record.
	kept := c.Partition("u", 0).GetIsr()[0]
	c.StartBroker(kept)
	c.WaitFor(15*time.Second, "the returning ISR member to lead", func() bool {
		return c.Partition("u", 0).GetLeader() == kept && c.Leads(kept, "u", 0)
	})
	if got := c.Values(kept, "u", 0); !slices.Equal(got, append([]string{"a0"}, acked...)) {
		t.Fatalf("returning ISR member's log %v lost acknowledged records", got)
	}

	// Case "on": kill it again and allow unclean elections at run time.
	c.CrashBroker(kept)
	c.WaitFor(10*time.Second, "offline again", func() bool { return c.Partition("u", 0).GetLeader() == -1 })
	resp, err := c.Admin().AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "u"},
		Ops:      []*adminv1.ConfigOp{{Name: "unclean.leader.election.enable", Value: "true", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}},
	}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter config: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "the out-of-sync replica to be elected", func() bool {
		return c.Partition("u", 0).GetLeader() == lagging && c.Leads(lagging, "u", 0)
	})
	if isr := c.Partition("u", 0).GetIsr(); !slices.Equal(isr, []int32{lagging}) {
		t.Fatalf("ISR after unclean election %v, want [%d]", isr, lagging)
	}
	if got := c.Values(lagging, "u", 0); !slices.Equal(got, []string{"a0"}) {
		t.Fatalf("unclean leader's log %v, want just what it had: [a0]", got)
	}
	if _, err := c.Produce(ctx, "u", 0, -1, "after-unclean"); err != nil {
		t.Fatalf("produce to the unclean leader: %v", err)
	}
}

// A consumer that read records an unclean election then took away learns
// of it (KIP-320): its fetch names the leader epoch it read last, the new
// leader answers that its log diverged from there, and the consumer reads
// on from where the logs part (with a reset policy), or gets a
// LogTruncation (ResetNone). Before, it went on at its old position in the
// new log and silently skipped the records written there since.
func TestConsumerLearnsOfATruncationUnderIt(t *testing.T) {
	c := Start(t, Options{Kafka: true, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("cut", 1, 3, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	reps := c.Partition("cut", 0).GetReplicas()
	leader, other, lagging := reps[0], reps[1], reps[2]
	ctx := context.Background()
	if _, err := c.Produce(ctx, "cut", 0, -1, "a0"); err != nil {
		t.Fatal(err)
	}
	c.SameLogs("cut", 0, reps...)
	c.Net.Partition(BrokerName(leader), BrokerName(lagging))
	for i := 1; i <= 5; i++ {
		if _, err := c.Produce(ctx, "cut", 0, -1, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor(10*time.Second, "the cut-off follower out of the ISR", func() bool {
		return !slices.Contains(c.Partition("cut", 0).GetIsr(), lagging)
	})
	consumer := func(reset client.ResetPolicy) *client.Consumer {
		cs, err := client.NewConsumer(c.Client(), client.ConsumerOptions{Topic: "cut", Partition: 0, Reset: reset, MaxWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	read := func(cs *client.Consumer, n int) ([]string, error) {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var got []string
		for len(got) < n {
			recs, err := cs.Poll(pctx)
			if err != nil {
				return got, err
			}
			for _, r := range recs {
				got = append(got, string(r.Value))
			}
		}
		return got, nil
	}
	resetting, strict := consumer(client.ResetEarliest), consumer(client.ResetNone)
	for _, cs := range []*client.Consumer{resetting, strict} {
		if got, err := read(cs, 6); err != nil || !slices.Equal(got, []string{"a0", "a1", "a2", "a3", "a4", "a5"}) {
			t.Fatalf("before the election: read %v, %v", got, err)
		}
	}

	c.CrashBroker(leader)
	c.CrashBroker(other)
	c.Net.HealAll()
	c.WaitFor(15*time.Second, "the out-of-sync replica elected", func() bool {
		return c.Partition("cut", 0).GetLeader() == lagging && c.Leads(lagging, "cut", 0)
	})
	var after []string
	for i := 1; i <= 7; i++ {
		v := fmt.Sprintf("b%d", i)
		if _, err := c.Produce(ctx, "cut", 0, -1, v); err != nil {
			t.Fatal(err)
		}
		after = append(after, v)
	}
	got, err := read(resetting, 7)
	if err != nil || !slices.Equal(got, after) {
		t.Fatalf("after the unclean election, a consumer with a reset policy read %v (%v), want %v: from where the logs part", got, err, after)
	}
	if n := resetting.Truncations(); n != 1 {
		t.Errorf("truncations counted: %d, want 1", n)
	}
	_, err = read(strict, 1)
	var lt *client.LogTruncation
	if !errors.As(err, &lt) || lt.DivergentOffset != 1 || lt.Position != 6 || kerr.CodeOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("a consumer with ResetNone: %v, want a LogTruncation (OFFSET_OUT_OF_RANGE) from offset 1 at position 6", err)
	}
	if strict.Position() != 6 {
		t.Fatalf("ResetNone moved the position to %d", strict.Position())
	}
	strict.SetPosition(lt.DivergentOffset)
	if got, err := read(strict, 7); err != nil || !slices.Equal(got, after) {
		t.Fatalf("after SetPosition: read %v, %v", got, err)
	}

	// A Kafka consumer's Fetch (v12) names its last fetched epoch too, and
	// gets the DivergingEpoch.
	kc := c.KafkaClient(FetchByName())
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MaxBytes = 12, 100, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "cut"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.LastFetchedEpoch, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = 0, 6, lt.Epoch, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := req.RequestWith(ctx, kc.Broker(int(lagging)))
	if err != nil {
		t.Fatal(err)
	}
	kp := kresp.Topics[0].Partitions[0]
	if kp.ErrorCode != 0 || kp.DivergingEpoch.EndOffset != 1 || kp.DivergingEpoch.Epoch != lt.Epoch || len(kp.RecordBatches) != 0 {
		t.Fatalf("Kafka Fetch v12 at offset 6, last fetched epoch %d: error %d, diverging epoch %+v, %d bytes of records; want the log's divergence at 1",
			lt.Epoch, kp.ErrorCode, kp.DivergingEpoch, len(kp.RecordBatches))
	}

	// The streaming read checks the same way: one answer naming where the
	// logs part, then OFFSET_OUT_OF_RANGE. Without the epoch it would
	// stream b6 and b7 and skip what was written below.
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := c.BrokerClient(lagging).Follow(fctx, &brokerv1.FollowRequest{Topic: "cut", Offset: 6, LastFetchedEpoch: &lt.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if d := first.GetFetch().GetDivergingEpoch(); err != nil || d.GetEndOffset() != 1 || d.GetEpoch() != lt.Epoch || len(first.GetFetch().GetRecords()) != 0 {
		t.Fatalf("Follow at offset 6, last fetched epoch %d: %v, %v; want one answer with the divergence at 1", lt.Epoch, first, err)
	}
	if _, err := stream.Recv(); kerr.FromStatus(err).Code != kerr.OffsetOutOfRange {
		t.Fatalf("after the divergence the stream ended with %v, want OFFSET_OUT_OF_RANGE", err)
	}
}
