package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// newKafkaCluster is newCluster with every broker serving Kafka's wire
// protocol too.
func newKafkaCluster(t *testing.T, n int, settings map[string]string) *cluster {
	t.Helper()
	return newClusterFn(t, n, settings, func(cfg *broker.Config) {
		l := listen(t)
		cfg.KafkaListen, cfg.KafkaListener = l.Addr().String(), l
	})
}

// kafka is a Kafka client connection to broker id's Kafka listener, its
// Fetch capped at v12 (fetchByName).
func (c *cluster) kafka(id int32) *kgo.Broker {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers[id].KafkaAddr()), fetchByName())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl.SeedBrokers()[0]
}

// fetchByName caps a client's Fetch at v12, whose topics are named by
// name: franz-go sends a request at the highest version both sides speak,
// and v13 names topics by id only, which the hand-built fetches of these
// tests leave zero.
func fetchByName() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Fetch), 12)
	return kgo.MaxVersions(v)
}

// kafkaProduce sends one batch to partition 0 of topic with Kafka's
// Produce and answers the partition's answer and how long it took.
func kafkaProduce(t *testing.T, b *kgo.Broker, topic string, acks int16, timeoutMs int32, batch []byte) (kmsg.ProduceResponseTopicPartition, time.Duration) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch
	pt.Partitions = []kmsg.ProduceRequestTopicPartition{pp}
	req.Topics = []kmsg.ProduceRequestTopic{pt}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatalf("Produce to %s, acks %d, timeout %d ms: %v after %s", topic, acks, timeoutMs, err, time.Since(start))
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0], time.Since(start)
}

// A Kafka producer's timeout 0 asks for no wait: Kafka answers an acks=all
// produce at once, REQUEST_TIMED_OUT when the ISR has not acknowledged the
// batch, success when it has (a lone replica). gRPC's timeout_ms 0 is the
// broker default and still waits.
func TestKafkaProduceTimeoutZeroDoesNotWait(t *testing.T) {
	c := newKafkaCluster(t, 2, nil)
	c.ctrl.createTopic("pair", 1, 2, nil)
	c.ctrl.createTopic("lone", 1, 1, nil)
	if _, err := c.produce("pair", 0, -1, "a"); err != nil {
		t.Fatal(err)
	}
	k := c.kafka(1)
	c.crash(2) // still in the ISR: nothing acknowledges from now on

	got, took := kafkaProduce(t, k, "pair", -1, 0, batchOf("b"))
	if kerr.Code(got.ErrorCode) != kerr.RequestTimedOut || took > 5*time.Second {
		t.Fatalf("acks=all, timeout 0, ISR behind: %v after %s; want REQUEST_TIMED_OUT at once", kerr.Code(got.ErrorCode), took)
	}
	got, took = kafkaProduce(t, k, "lone", -1, 0, batchOf("c"))
	if got.ErrorCode != 0 || got.BaseOffset != 0 || took > 5*time.Second {
		t.Fatalf("acks=all, timeout 0, lone replica: %v, offset %d after %s; want success at once", kerr.Code(got.ErrorCode), got.BaseOffset, took)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := c.client(1).Produce(ctx, &brokerv1.ProduceRequest{Topic: "pair", Acks: -1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("d")}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("gRPC acks=-1 with timeout_ms 0 (the default): %v; want it still waiting after 1 s", err)
	}
}

// Kafka's ListOffsets answers the leader epoch an offset was written in:
// earliest the epoch at the log start, a timestamp the epoch of the found
// record's batch, latest the current epoch, and no record none.
func TestKafkaListOffsetsAnswersTheRecordsEpoch(t *testing.T) {
	c := newKafkaCluster(t, 1, nil)
	c.ctrl.createTopic("e", 1, 1, nil)
	base := time.Now().Add(-time.Hour).UnixMilli()
	produce := func(ts ...int64) {
		t.Helper()
		var bl recordbatch.Builder
		for _, x := range ts {
			bl.Append(recordbatch.Record{Timestamp: x, Value: []byte("v")})
		}
		if _, err := c.client(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "e", Acks: -1, TimeoutMs: 5000,
			Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: bl.Build(-1, -1, -1)}}); err != nil {
			t.Fatal(err)
		}
	}
	produce(base, base+1) // offsets 0-1, epoch 0
	c.ctrl.bumpLeaderEpoch("e", 0, 2)
	produce(base+100, base+101) // offsets 2-3, epoch 2

	k := c.kafka(1)
	for _, tc := range []struct {
		name      string
		timestamp int64
		offset    int64
		epoch     int32
	}{
		{"earliest", -2, 0, 0},
		{"a timestamp in epoch 0", base + 1, 1, 0},
		{"a timestamp in epoch 2", base + 50, 2, 2},
		{"latest", -1, 4, 2},
		{"a timestamp after every record", base + 1000, -1, -1},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "e"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = tc.timestamp
		rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
		req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := k.Request(ctx, req)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.Offset != tc.offset || got.LeaderEpoch != tc.epoch {
			t.Errorf("%s: %v, offset %d, leader epoch %d; want offset %d, leader epoch %d",
				tc.name, kerr.Code(got.ErrorCode), got.Offset, got.LeaderEpoch, tc.offset, tc.epoch)
		}
	}
}
