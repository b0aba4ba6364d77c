package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
)

// kafkaDeleteRecords asks, with kadm, that topic-0 start at offset and
// returns the partition's answer.
func kafkaDeleteRecords(c *clustertest.Cluster, adm *kadm.Client, topic string, offset int64) kadm.DeleteRecordsResponse {
	c.T.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resps, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		c.T.Fatalf("kadm delete records of %s below %d: %v", topic, offset, err)
	}
	r, ok := resps.Lookup(topic, 0)
	if !ok {
		c.T.Fatalf("no answer for %s-0 in %v", topic, resps)
	}
	return r
}

// waitLogStartsAt waits until every replica in reps starts its log at at.
func waitLogStartsAt(c *clustertest.Cluster, topic string, reps []int32, at int64, what string) {
	c.T.Helper()
	c.WaitFor(30*time.Second, what, func() bool {
		for _, id := range reps {
			if v, ok := c.View(id, topic, 0); !ok || v.LogStart != at {
				return false
			}
		}
		return true
	})
}

// readFromZero consumes topic-0 from offset 0, which DeleteRecords removed:
// the consumer is told OFFSET_OUT_OF_RANGE, resets to the log start, and
// returns the offset and value of the first record it reads.
func readFromZero(c *clustertest.Cluster, topic string) (int64, string) {
	c.T.Helper()
	cl := c.KafkaClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var first *kgo.Record
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if first == nil {
				first = r
			}
		})
		if first != nil {
			return first.Offset, string(first.Value)
		}
	}
	c.T.Fatalf("a consumer of %s-0 from offset 0 read nothing", topic)
	return 0, ""
}

// DeleteRecords (KIP-107) through kadm on an RF=3 topic: the leader's log
// start moves to the offset asked and every replica's follows before the
// answer, whose low watermark is that offset; a consumer at offset 0 resets
// to it. Asked again (-1, the HW) right after a follower crashed, it
// completes once the leader learns the broker is gone, as Kafka's low
// watermark counts live brokers only, and the
// follower takes the new log start when it returns. The log start survives
// a restart of the whole cluster, after which the partition is whole and
// takes writes; so does one inside a segment, every broker killed at once.
func TestKafkaDeleteRecordsMovesEveryReplicasLogStart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Kafka: true, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	const topic = "trimmed"
	c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2", "segment.bytes": "1024"})
	reps := c.Partition(topic, 0).GetReplicas()
	for i := range 10 {
		if _, err := c.Produce(context.Background(), topic, 0, -1, fmt.Sprintf("r%d-%0100d", i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitSettled(15*time.Second, topic, 0, reps)
	adm := kadm.NewClient(c.KafkaClient())

	if r := kafkaDeleteRecords(c, adm, topic, 4); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete below 4: low watermark %d, %v; want 4", r.LowWatermark, r.Err)
	}
	for _, id := range reps {
		// The answer waited for every live replica's log start.
		if v, ok := c.View(id, topic, 0); !ok || v.LogStart != 4 {
			t.Fatalf("broker %d after the answer: %v, want log start 4", id, v)
		}
	}
	if off, v := readFromZero(c, topic); off != 4 || v[:2] != "r4" {
		t.Fatalf("a consumer from offset 0 read %q at %d, want r4 at 4", v, off)
	}
	// Asking for less than the log start moves nothing back.
	if r := kafkaDeleteRecords(c, adm, topic, 2); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete below 2 after 4: low watermark %d, %v; want 4", r.LowWatermark, r.Err)
	}

	leader := c.Leader(topic, 0)
	var down int32
	for _, id := range reps {
		if id != leader {
			down = id
			break
		}
	}
	c.CrashBroker(down)
	// Asked before or after the controller tells the leader the broker is
	// gone: either way the answer comes once it is (no follower fetch
	// will move the low watermark).
	for i := 10; i < 13; i++ {
		if _, err := c.Produce(context.Background(), topic, 0, -1, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if r := kafkaDeleteRecords(c, adm, topic, -1); r.Err != nil || r.LowWatermark != 13 {
		t.Fatalf("delete below the HW with broker %d dead: low watermark %d, %v; want 13", down, r.LowWatermark, r.Err)
	}
	c.StartBroker(down)
	waitLogStartsAt(c, topic, reps, 13, fmt.Sprintf("broker %d, back, at the leader's log start", down))
	c.WaitSettled(30*time.Second, topic, 0, reps)

	for _, id := range reps {
		if err := c.StopBroker(id); err != nil {
			t.Fatalf("graceful stop of broker %d: %v", id, err)
		}
	}
	for _, id := range reps {
		c.StartBroker(id)
	}
	c.WaitSettled(30*time.Second, topic, 0, reps)
	waitLogStartsAt(c, topic, reps, 13, "every log start at 13 after the whole cluster restarted")
	if _, err := c.Produce(context.Background(), topic, 0, -1, "after"); err != nil {
		t.Fatalf("acks=all produce after the restart: %v", err)
	}
	if off, v := readFromZero(c, topic); off != 13 || v != "after" {
		t.Fatalf("a consumer from offset 0 read %q at %d, want after at 13", v, off)
	}
	c.WaitHWAtLEO(topic, 0, reps...)
	if logs := c.SameLogs(topic, 0, reps...); len(logs) != 1 || logs[0] != "after" {
		t.Fatalf("replicas hold %v, want [after]", logs)
	}

	// A log start inside a segment survives every broker killed at once:
	// DeleteRecords answers only once it is on disk everywhere.
	for i := 14; i < 17; i++ {
		if _, err := c.Produce(context.Background(), topic, 0, -1, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if r := kafkaDeleteRecords(c, adm, topic, 16); r.Err != nil || r.LowWatermark != 16 {
		t.Fatalf("delete below 16: low watermark %d, %v; want 16", r.LowWatermark, r.Err)
	}
	for _, id := range reps {
		c.CrashBroker(id)
	}
	for _, id := range reps {
		c.StartBroker(id)
	}
	c.WaitSettled(30*time.Second, topic, 0, reps)
	for _, id := range reps {
		if v, ok := c.View(id, topic, 0); !ok || v.LogStart != 16 {
			t.Fatalf("broker %d after the whole cluster was killed: %v, want log start 16", id, v)
		}
	}
	if off, v := readFromZero(c, topic); off != 16 || v != "r16" {
		t.Fatalf("a consumer from offset 0 read %q at %d, want r16 at 16", v, off)
	}
}

// DeleteRecords refusals, each a Kafka error code for its partition and
// none moving the log start: an offset past the HW or negative but -1
// (OFFSET_OUT_OF_RANGE), a topic nobody has (UNKNOWN_TOPIC_OR_PARTITION), a
// follower asked (NOT_LEADER_OR_FOLLOWER), a compacted topic
// (POLICY_VIOLATION), __consumer_offsets (INVALID_TOPIC_EXCEPTION).
func TestKafkaDeleteRecordsRefusals(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Kafka: true})
	c.CreateTopic("kept", 1, 3, nil)
	c.CreateTopic("compacted", 1, 3, map[string]string{"cleanup.policy": "compact"})
	reps := c.Partition("kept", 0).GetReplicas()
	for i := range 3 {
		if _, err := c.Produce(context.Background(), "kept", 0, -1, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitSettled(15*time.Second, "kept", 0, reps)
	leader := c.Leader("kept", 0)
	var follower int32
	for _, id := range reps {
		if id != leader {
			follower = id
		}
	}
	cl := c.KafkaClient()
	ask := func(broker int32, topic string, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Offset = offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(clustertest.CtxFor(t, 20*time.Second), cl.Broker(int(broker)))
		if err != nil {
			t.Fatalf("delete records of %s at %d on broker %d: %v", topic, offset, broker, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("answer %+v", resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		what   string
		broker int32
		topic  string
		offset int64
		want   kerr.Code
	}{
		{"past the HW", leader, "kept", 4, kerr.OffsetOutOfRange},
		{"negative, not -1", leader, "kept", -2, kerr.OffsetOutOfRange},
		{"unknown topic", leader, "nobody", 1, kerr.UnknownTopicOrPartition},
		{"a follower", follower, "kept", 1, kerr.NotLeaderOrFollower},
		{"compacted", c.Leader("compacted", 0), "compacted", 0, kerr.PolicyViolation},
		{"internal", leader, "__consumer_offsets", 0, kerr.InvalidTopicException},
	} {
		if got := ask(tc.broker, tc.topic, tc.offset); got.ErrorCode != int16(tc.want) || got.LowWatermark != -1 {
			t.Errorf("%s: error %s, low watermark %d; want %s, -1", tc.what, kerr.Code(got.ErrorCode), got.LowWatermark, tc.want)
		}
	}
	for _, id := range reps {
		if v, ok := c.View(id, "kept", 0); !ok || v.LogStart != 0 {
			t.Fatalf("broker %d after the refusals: %v, want log start 0", id, v)
		}
	}
	if got := ask(leader, "kept", 3); got.ErrorCode != 0 || got.LowWatermark != 3 {
		t.Fatalf("delete at the HW: error %s, low watermark %d; want 3", kerr.Code(got.ErrorCode), got.LowWatermark)
	}
	c.WaitSettled(15*time.Second, "kept", 0, reps)
}

// DeleteRecords needs Delete on the topic, as in Kafka: alice, who may
// describe and write acl-* topics, is refused with
// TOPIC_AUTHORIZATION_FAILED and moves nothing; given Delete, she may.
func TestKafkaDeleteRecordsNeedsDeleteOnTheTopic(t *testing.T) {
	c, as, admin := clustertest.ACLQuietCluster(t)
	alice := as("alice")
	clustertest.ProduceSync(t, alice, "acl-orders", "a1")
	clustertest.ProduceSync(t, alice, "acl-orders", "a2")
	var asked kadm.Offsets
	asked.Add(kadm.Offset{Topic: "acl-orders", Partition: 0, At: 1})
	del := func() kadm.DeleteRecordsResponse {
		t.Helper()
		resps, err := kadm.NewClient(alice).DeleteRecords(clustertest.CtxFor(t, 30*time.Second), asked)
		if err != nil {
			t.Fatalf("delete records as alice: %v", err)
		}
		r, ok := resps.Lookup("acl-orders", 0)
		if !ok {
			t.Fatalf("no answer for acl-orders-0: %v", resps)
		}
		return r
	}
	if r := del(); !errors.Is(r.Err, fkerr.TopicAuthorizationFailed) {
		t.Fatalf("without Delete: %+v, want TOPIC_AUTHORIZATION_FAILED", r)
	}
	reps := c.Partition("acl-orders", 0).GetReplicas()
	for _, id := range reps {
		if v, ok := c.View(id, "acl-orders", 0); !ok || v.LogStart != 0 {
			t.Fatalf("broker %d after the refusal: %v, want log start 0", id, v)
		}
	}
	res, err := admin.CreateACLs(clustertest.CtxFor(t, 20*time.Second), kadm.NewACLs().Topics("acl-orders").Allow("User:alice").AllowHosts("*").Operations(kadm.OpDelete))
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("allowing Delete: %v %+v", err, res)
	}
	c.WaitFor(20*time.Second, "alice allowed to delete records", func() bool {
		r := del()
		return r.Err == nil && r.LowWatermark == 1
	})
	waitLogStartsAt(c, "acl-orders", reps, 1, "every log start at 1")
}
