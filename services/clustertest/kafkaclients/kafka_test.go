package kafkaclients

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/recordbatch"
)

// consumeAll reads topic from the start until n records arrived, and
// returns their values per partition in offset order.
func consumeAll(t *testing.T, cl *kgo.Client, n int) map[int32][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int32][]string{}
	next := map[int32]int64{}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", got, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d after %d (a gap or a duplicate)", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			got++
		})
	}
	return out
}

// franz-go's producer (idempotent, acks=all) with each codec and its
// consumer against the Kafka listener: topics made with kadm, every record
// back in order, once, and the batches kept compressed as sent.
func TestKafkaProduceConsumeWithFranzGo(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	adm := kadm.NewClient(c.KafkaClient())
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		want  recordbatch.Codec
	}{
		{"none", kgo.NoCompression(), recordbatch.None},
		{"gzip", kgo.GzipCompression(), recordbatch.Gzip},
		{"snappy", kgo.SnappyCompression(), recordbatch.Snappy},
		{"lz4", kgo.Lz4Compression(), recordbatch.LZ4},
		{"zstd", kgo.ZstdCompression(), recordbatch.Zstd},
	}
	for _, cc := range codecs {
		t.Run(cc.name, func(t *testing.T) {
			topic := "kgo-" + cc.name
			c.KafkaCreate(adm, topic, 3, 3, nil)
			prod := c.KafkaClient(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerBatchCompression(cc.codec), kgo.ProducerLinger(5*time.Millisecond))
			const n = 300
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range n {
				r := &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("%s-%03d-%s", cc.name, i, strings.Repeat("x", 100)))}
				prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := prod.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			cons := c.KafkaClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := consumeAll(t, cons, n)
			total := 0
			for _, vs := range got {
				total += len(vs)
			}
			if total != n {
				t.Fatalf("consumed %d records, want %d", total, n)
			}
			// Stored as sent, on every replica.
			for p := int32(0); p < 3; p++ {
				same := c.SameLogs(topic, p, 1, 2, 3)
				if len(same) != len(got[p]) {
					t.Fatalf("partition %d: replicas hold %d records, consumer read %d", p, len(same), len(got[p]))
				}
			}
			if codec := clustertest.StoredCodec(t, c.Broker(1), topic); codec != cc.want {
				t.Fatalf("stored batches use %s, want %s as sent", codec, cc.want)
			}
		})
	}
}

// Pipelined produce requests of one connection are appended in the order
// sent, as Kafka does, so a producer without idempotence but with five
// requests in flight still writes in order (its acks=all waits overlap).
func TestKafkaPipelinedProducesKeepOrder(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	c.KafkaCreate(kadm.NewClient(c.KafkaClient()), "pipe", 1, 3, nil)
	prod := c.KafkaClient(kgo.DefaultProduceTopic("pipe"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.MaxProduceRequestsInflightPerBroker(5), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(2048))
	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("p%05d-%s", i, strings.Repeat("y", 200)))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := c.KafkaClient(kgo.ConsumeTopics("pipe"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i, v := range consumeAll(t, cons, n)[0] {
		if want := fmt.Sprintf("p%05d-", i); !strings.HasPrefix(v, want) {
			t.Fatalf("record %d is %.6s, want %s (reordered)", i, v, want)
		}
	}
}
