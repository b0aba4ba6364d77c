package kafkaclients

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
)

// fetchOf is a Fetch v12 of partition 0 of topic from offset 0, the
// partition named copies times.
func fetchOf(topic string, copies int, minBytes, maxWaitMs int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, maxWaitMs, minBytes, 50<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for range copies {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch = 0, 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}

// A Kafka Fetch long-polls as Kafka's: it answers once min_bytes have
// arrived (not at the first byte), and a parked fetch naming one partition
// 20,000 times parks it once. Before, the first record ended the wait
// whatever min_bytes said, and every entry parked a goroutine of its own
// (150 MiB of stacks for a 660 KB request).
func TestKafkaFetchLongPollWaitsForMinBytesAndParksEachPartitionOnce(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true})
	cl := c.KafkaClient(clustertest.FetchByName())
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "minbytes", 1, 1, nil)
	c.KafkaCreate(adm, "dup", 1, 1, nil)
	prod := c.KafkaClient(kgo.ProducerBatchCompression(kgo.NoCompression()))

	type answer struct {
		resp kmsg.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 30*time.Second), fetchOf("minbytes", 1, 100_000, 20_000))
		got <- answer{resp, err}
	}()
	time.Sleep(300 * time.Millisecond) // parked
	clustertest.ProduceSync(t, prod, "minbytes", strings.Repeat("a", 60_000))
	time.Sleep(300 * time.Millisecond)
	clustertest.ProduceSync(t, prod, "minbytes", strings.Repeat("b", 60_000))
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatal(a.err)
		}
		if n := len(a.resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches); n < 100_000 {
			t.Fatalf("the long poll answered with %d bytes, below min_bytes 100000, before max_wait", n)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no answer once min_bytes had arrived")
	}

	g0 := runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() {
		_, err := cl.Broker(1).Request(clustertest.CtxFor(t, 30*time.Second), fetchOf("dup", 20_000, 1, 3000))
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond) // parked
	if n := runtime.NumGoroutine() - g0; n > 100 {
		t.Fatalf("one fetch naming one partition 20,000 times parked %d goroutines", n)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A long poll woken by a batch counts that batch once against the
// consumer's byte-rate quota: the wait does not read for the consumer.
// Before, the wait and the answer both counted it, and a consumer tailing
// a topic was held to about half its quota.
func TestKafkaLongPollCountsItsBytesOnceAgainstTheQuota(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.consumer.default": "100000", "quota.window.num": "2", "quota.window.size.seconds": "1"}})
	cl := c.KafkaClient(clustertest.FetchByName())
	c.KafkaCreate(kadm.NewClient(cl), "quota", 1, 1, nil)
	type answer struct {
		resp kmsg.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 30*time.Second), fetchOf("quota", 1, 1, 10_000))
		got <- answer{resp, err}
	}()
	time.Sleep(500 * time.Millisecond) // parked
	clustertest.ProduceSync(t, c.KafkaClient(kgo.ProducerBatchCompression(kgo.NoCompression())), "quota", strings.Repeat("q", 70_000))
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	fr := a.resp.(*kmsg.FetchResponse)
	if n := len(fr.Topics[0].Partitions[0].RecordBatches); n == 0 || n >= 100_000 || fr.ThrottleMillis > 0 {
		t.Fatalf("the long poll answered %d bytes with throttle_time_ms %d under a 100000 B/s quota: want its ~70 KB counted once, not throttled", n, fr.ThrottleMillis)
	}
}
