package clustertest

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Kafka Fetch naming several partitions over the consumer quota is held
// back (at most) once, for the throttle it reports, as Kafka computes one
// throttle per request. Before, each partition's read waited out what the
// earlier partitions of the same request made the consumer owe: N
// partitions were delayed about N times the throttle, past a client's
// request timeout.
func TestKafkaMultiPartitionFetchThrottledOnce(t *testing.T) {
	c := Start(t, Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.consumer.default": "1000", "quota.window.num": "2", "quota.window.size.seconds": "1"}})
	cl := c.kafkaClient()
	c.kafkaCreate(kadm.NewClient(cl), "mq", 4, 1, nil)
	prod := c.kafkaClient(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(4) {
		if err := prod.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Topic: "mq", Partition: p, Value: []byte(strings.Repeat("m", 3000))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 50<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "mq"
	for p := range int32(4) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, fp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	start := time.Now()
	resp, err := cl.Broker(1).Request(ctxFor(t, 60*time.Second), req)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	t.Logf("answer after %v, throttle_time_ms %d", took, fr.ThrottleMillis)
	if limit := time.Duration(fr.ThrottleMillis)*time.Millisecond + time.Second; took > limit {
		t.Fatalf("one fetch of 4 partitions answered after %v, but reports throttle_time_ms %d (cap 2000): the per-partition waits added up", took, fr.ThrottleMillis)
	}
}
