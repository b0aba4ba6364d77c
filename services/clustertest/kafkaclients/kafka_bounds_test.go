package kafkaclients

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// The Kafka door gives the refusals the gRPC door gives: Produce v3+ carries
// exactly one batch per partition (Kafka: INVALID_RECORD), and a batch's
// record headers count against produce.max.records.per.request as
// structured records' headers do.
func TestKafkaDoorOneBatchAndHeaderLimit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true,
		BrokerSettings: map[string]string{"produce.max.records.per.request": "1000"}})
	cl := c.KafkaClient()
	c.KafkaCreate(kadm.NewClient(cl), "rv", 1, 1, nil)
	leader := c.Leader("rv", 0)
	produce := func(records []byte) int16 {
		pr := kmsg.NewPtrProduceRequest()
		pr.SetVersion(9)
		pr.Acks, pr.TimeoutMillis = 1, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "rv"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = 0, records
		pt.Partitions = []kmsg.ProduceRequestTopicPartition{pp}
		pr.Topics = []kmsg.ProduceRequestTopic{pt}
		resp, err := cl.Broker(int(leader)).Request(clustertest.CtxFor(t, 10*time.Second), pr)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	two := append(append([]byte{}, batchOf(1)...), batchOf(1)...)
	if code := produce(two); code != int16(kerr.InvalidRecord) {
		t.Errorf("two batches for one partition: error %d, want INVALID_RECORD (%d)", code, kerr.InvalidRecord)
	}
	var bl recordbatch.Builder
	bl.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("v"), Headers: make([]recordbatch.Header, 100_000)})
	z, err := bl.Build(-1, -1, -1).Compressed(recordbatch.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if code := produce(z); code != int16(kerr.RecordListTooLarge) {
		t.Errorf("a %d-byte batch whose record has 100000 headers: error %d, want RECORD_LIST_TOO_LARGE (%d)", len(z), code, kerr.RecordListTooLarge)
	}
}
