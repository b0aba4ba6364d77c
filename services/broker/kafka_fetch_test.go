package broker_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/broker"
)

// A Kafka Fetch's max_bytes is lowered to fetch.max.bytes, as Kafka does
// and as the gRPC fetch does: the whole answer holds at most that plus one
// batch. Before, only each partition was held to it, and a fetch asking
// 2 GiB over many partitions was answered with all they had.
func TestKafkaFetchMaxBytesIsLoweredToFetchMaxBytes(t *testing.T) {
	const limit, value = 65536, 40_000
	c := newClusterFn(t, 1, map[string]string{"fetch.max.bytes": "65536"}, func(cfg *broker.Config) { cfg.KafkaListen = "127.0.0.1:0" })
	c.ctrl.createTopic("f", 8, 1, nil)
	for p := range int32(8) {
		if _, err := c.produce("f", p, 1, strings.Repeat("v", value)); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers[1].KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, math.MaxInt32, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "f"
	for p := range int32(8) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, 1<<20, -1
		rt.Partitions = append(rt.Partitions, fp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	total, with := 0, 0
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, p := range t.Partitions {
			if len(p.RecordBatches) > 0 {
				total += len(p.RecordBatches)
				with++
			}
		}
	}
	if with == 0 || total > limit+value+1024 {
		t.Fatalf("answered %d bytes from %d partitions, want at most fetch.max.bytes %d and one batch", total, with, limit)
	}
}
