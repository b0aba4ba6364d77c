package kafkaclients

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/recordbatch"
)

// A producer over its produce quota on the Kafka listener is slowed to
// about its quota: a produce waits out what its principal owes before it
// appends, holding the connection's next requests, as Kafka mutes the
// connection. Before, the wait only delayed the answer, so a pipelining
// producer (acks=0 here; acks=1 with in-flight > 1 likewise) appended far
// over its quota.
func TestKafkaPipelinedProducerIsHeldToItsQuota(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.producer.default": "1000", "quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := kadm.NewClient(c.KafkaClient())
	c.KafkaCreate(adm, "aq", 1, 1, nil)
	prod := c.KafkaClient(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.NoAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(4000),
		kgo.MaxProduceRequestsInflightPerBroker(5))
	value := strings.Repeat("z", 3000)
	start := time.Now()
	for range 20 {
		prod.Produce(context.Background(), &kgo.Record{Topic: "aq", Value: []byte(value)}, nil)
	}
	_ = prod.Flush(clustertest.CtxFor(t, 10*time.Second))
	time.Sleep(1500 * time.Millisecond)
	ends, err := adm.ListEndOffsets(clustertest.CtxFor(t, 10*time.Second), "aq")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup("aq", 0)
	el := time.Since(start)
	bytes := o.Offset * 3000
	t.Logf("%d records (%d B) appended in %v under a 1000 B/s quota", o.Offset, bytes, el)
	// 2 s of quota plus the first burst, generously: 3 records.
	if o.Offset > 3 {
		t.Fatalf("%d records (%d B) appended in %v by one connection under a 1000 B/s produce quota: the throttle did not hold the connection", o.Offset, bytes, el)
	}
}

// A Produce from v6 on over the quota is answered at once with its
// throttle_time_ms, as Kafka does since KIP-219: such a client waits the
// throttle out itself before its next request (franz-go and the Java
// client do), and the connection's next produce waits what is still owed.
// Before, the answer was also held back for the throttle, so a client
// honouring it waited twice (here a 10 s throttle outlived the client's
// 5 s request timeout); an older Produce still has its answer held back.
func TestKafkaProduceV6IsAnsweredAtOnceWithItsThrottle(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.producer.default": "1000", "quota.window.num": "11", "quota.window.size.seconds": "1"}})
	cl := c.KafkaClient()
	c.KafkaCreate(kadm.NewClient(cl), "vq", 1, 1, nil)
	var bld recordbatch.Builder
	bld.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(strings.Repeat("v", 20_000))})
	batch := bld.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "vq"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	// 20,000 B over the minimum 10 s window against 1000 B/s: 10 s.
	resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 5*time.Second), req)
	if err != nil {
		t.Fatalf("Produce v7 over the quota: %v (the answer was held back for its throttle)", err)
	}
	pr := resp.(*kmsg.ProduceResponse)
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != 0 || pr.ThrottleMillis < 5000 {
		t.Fatalf("Produce v7 over the quota: error %d, throttle_time_ms %d, want appended and about 10000", code, pr.ThrottleMillis)
	}
}
