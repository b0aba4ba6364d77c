package clustertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
)

// sarama, a second Kafka client written independently of franz-go:
// an idempotent acks=all producer (gzip) and a partition consumer read the
// same records back in order.
func TestKafkaProduceConsumeWithSarama(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Kafka: true})
	c.kafkaCreate(kadm.NewClient(c.kafkaClient()), "sarama", 1, 3, nil)

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = sarama.CompressionGZIP
	cfg.Producer.Retry.Max = 20
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Return.Errors = true
	prod, err := sarama.NewSyncProducer(c.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 50
	var want []string
	for i := range n {
		v := fmt.Sprintf("s%03d", i)
		want = append(want, v)
		p, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder(v)})
		if err != nil || p != 0 || off != int64(i) {
			t.Fatalf("send %s: partition %d offset %d, %v", v, p, off, err)
		}
	}

	cons, err := sarama.NewConsumer(c.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("sarama", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case m := <-pc.Messages():
			if m.Offset != int64(len(got)) {
				t.Fatalf("offset %d after %d records", m.Offset, len(got))
			}
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("consume: %v", err)
		case <-timeout:
			t.Fatalf("consumed %d of %d before the deadline", len(got), n)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
