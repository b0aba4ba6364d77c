package clustertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A producer over its produce quota on the Kafka listener is slowed to
// about its quota: a produce waits out what its principal owes before it
// appends, holding the connection's next requests, as Kafka mutes the
// connection. Before, the wait only delayed the answer, so a pipelining
// producer (acks=0 here; acks=1 with in-flight > 1 likewise) appended far
// over its quota.
func TestKafkaPipelinedProducerIsHeldToItsQuota(t *testing.T) {
	c := Start(t, Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.producer.default": "1000", "quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := kadm.NewClient(c.kafkaClient())
	c.kafkaCreate(adm, "aq", 1, 1, nil)
	prod := c.kafkaClient(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.NoAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(4000),
		kgo.MaxProduceRequestsInflightPerBroker(5))
	value := strings.Repeat("z", 3000)
	start := time.Now()
	for range 20 {
		prod.Produce(context.Background(), &kgo.Record{Topic: "aq", Value: []byte(value)}, nil)
	}
	_ = prod.Flush(ctxFor(t, 10*time.Second))
	time.Sleep(1500 * time.Millisecond)
	ends, err := adm.ListEndOffsets(ctxFor(t, 10*time.Second), "aq")
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
