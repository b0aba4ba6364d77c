package kafkaclients

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
)

// A Kafka Fetch naming several partitions over the consumer quota is held
// back (at most) once, for the throttle it reports, as Kafka computes one
// throttle per request. Before, each partition's read waited out what the
// earlier partitions of the same request made the consumer owe: N
// partitions were delayed about N times the throttle, past a client's
// request timeout.
func TestKafkaMultiPartitionFetchThrottledOnce(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.consumer.default": "1000", "quota.window.num": "2", "quota.window.size.seconds": "1"}})
	cl := c.KafkaClient(clustertest.FetchByName())
	c.KafkaCreate(kadm.NewClient(cl), "mq", 4, 1, nil)
	prod := c.KafkaClient(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(4) {
		if err := prod.ProduceSync(clustertest.CtxFor(t, 30*time.Second), &kgo.Record{Topic: "mq", Partition: p, Value: []byte(strings.Repeat("m", 3000))}).FirstErr(); err != nil {
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
	resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 60*time.Second), req)
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

// A consumer that waited out the throttle_time_ms of a fetch over its
// quota (KIP-219: a client waits it after the answer) is not held back
// again: its next fetch reports no throttle, as Kafka's mute ends with the
// throttle time. Before, what a fetch owed came from the rate alone, which
// the first window.num - 1 windows judge over that minimum however long
// the client waited: the excess the first answer reported was owed again,
// in full, by the next fetch.
func TestKafkaFetchAfterItsThrottleIsNotHeldAgain(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.consumer.default": "500", "quota.window.num": "11", "quota.window.size.seconds": "1"}})
	cl := c.KafkaClient(clustertest.FetchByName())
	createWQWithOneRecord(t, c, cl)
	fetch := func(offset int64) *kmsg.FetchResponse { return kafkaFetchOne(t, cl, "wq", offset) }
	// About 6,000 B judged over the minimum 10 s window against 500 B/s:
	// a throttle of about 2 s.
	first := fetch(0)
	if n := len(first.Topics[0].Partitions[0].RecordBatches); n < 6000 || first.ThrottleMillis <= 0 {
		t.Fatalf("first fetch: %d bytes, throttle_time_ms %d: want the record, throttled", n, first.ThrottleMillis)
	}
	time.Sleep(time.Duration(first.ThrottleMillis) * time.Millisecond) // as a client honouring it does
	second := fetch(1)
	if second.ThrottleMillis != 0 {
		t.Fatalf("a fetch of nothing after waiting out a throttle of %d ms reports throttle_time_ms %d: held back again",
			first.ThrottleMillis, second.ThrottleMillis)
	}
}

// Two consumers of one principal (here both ANONYMOUS), each on its own
// connection: the second, fetching while the first's throttle runs, waits
// out what the principal owes before it reads, and a Fetch from v8 on
// (KIP-219: the client waits out throttle_time_ms after the answer) does
// not report that wait as a throttle still to come. Before, it did, and
// the second consumer waited it twice: once here, then again itself.
func TestKafkaFetchV8DoesNotReportAWaitAlreadyServed(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.consumer.default": "500", "quota.window.num": "11", "quota.window.size.seconds": "1"}})
	a, b := c.KafkaClient(clustertest.FetchByName()), c.KafkaClient(clustertest.FetchByName())
	createWQWithOneRecord(t, c, a)
	first := kafkaFetchOne(t, a, "wq", 0)
	if n := len(first.Topics[0].Partitions[0].RecordBatches); n < 6000 || first.ThrottleMillis <= 0 {
		t.Fatalf("first fetch: %d bytes, throttle_time_ms %d: want the record, throttled", n, first.ThrottleMillis)
	}
	second := kafkaFetchOne(t, b, "wq", 1)
	if second.ThrottleMillis != 0 {
		t.Fatalf("the other consumer's fetch of nothing, after waiting out the principal's %d ms, reports throttle_time_ms %d: it will wait again",
			first.ThrottleMillis, second.ThrottleMillis)
	}
}

// createWQWithOneRecord creates topic wq and appends one record of 6,000 B to it.
func createWQWithOneRecord(t *testing.T, c *clustertest.Cluster, cl *kgo.Client) {
	t.Helper()
	c.KafkaCreate(kadm.NewClient(cl), "wq", 1, 1, nil)
	prod := c.KafkaClient(kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := prod.ProduceSync(clustertest.CtxFor(t, 30*time.Second), &kgo.Record{Topic: "wq", Value: []byte(strings.Repeat("w", 6000))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// kafkaFetchOne is a Fetch v12 of partition 0 of topic from offset, not
// waiting for data.
func kafkaFetchOne(t *testing.T, cl *kgo.Client, topic string, offset int64) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 50<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = []kmsg.FetchRequestTopicPartition{fp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 60*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.FetchResponse)
}
