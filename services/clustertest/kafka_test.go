package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"tidemark.io/services/broker"
	"tidemark.io/services/recordbatch"
)

// kafkaClient is a franz-go client seeded with the cluster's Kafka
// listeners, closed when the test ends.
func (c *Cluster) kafkaClient(opts ...kgo.Opt) *kgo.Client {
	c.T.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		c.T.Fatal(err)
	}
	c.T.Cleanup(cl.Close)
	return cl
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

// kafkaCreate creates a topic with kadm and waits until every partition's
// leader serves it.
func (c *Cluster) kafkaCreate(adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	if err != nil || resp.Err != nil {
		c.T.Fatalf("kadm create %s: %v %v", topic, err, resp.Err)
	}
	c.WaitFor(10*time.Second, "leaders for "+topic, func() bool {
		for p := range partitions {
			if !c.Leads(c.Partition(topic, p).GetLeader(), topic, p) {
				return false
			}
		}
		return true
	})
}

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
	c := Start(t, Options{Brokers: 3, Kafka: true})
	adm := kadm.NewClient(c.kafkaClient())
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
			c.kafkaCreate(adm, topic, 3, 3, nil)
			prod := c.kafkaClient(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
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
			cons := c.kafkaClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
			if codec := storedCodec(t, c.Broker(1), topic); codec != cc.want {
				t.Fatalf("stored batches use %s, want %s as sent", codec, cc.want)
			}
		})
	}
}

// storedCodec is the codec of the first batch broker b holds of topic.
func storedCodec(t *testing.T, b *broker.Broker, topic string) recordbatch.Codec {
	t.Helper()
	for _, r := range b.Replicas().Replicas() {
		if r.TP().Topic != topic || r.Log().LogEndOffset() == 0 {
			continue
		}
		rr, err := r.Log().Read(0, 1<<20, r.Log().LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		for batch, err := range recordbatch.All(rr.Records) {
			if err != nil {
				t.Fatal(err)
			}
			return batch.Codec()
		}
	}
	t.Fatalf("broker %d holds no batch of %s", b.ID(), topic)
	return 0
}

// Pipelined produce requests of one connection are appended in the order
// sent, as Kafka does, so a producer without idempotence but with five
// requests in flight still writes in order (its acks=all waits overlap).
func TestKafkaPipelinedProducesKeepOrder(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Kafka: true})
	c.kafkaCreate(kadm.NewClient(c.kafkaClient()), "pipe", 1, 3, nil)
	prod := c.kafkaClient(kgo.DefaultProduceTopic("pipe"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
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
	cons := c.kafkaClient(kgo.ConsumeTopics("pipe"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i, v := range consumeAll(t, cons, n)[0] {
		if want := fmt.Sprintf("p%05d-", i); !strings.HasPrefix(v, want) {
			t.Fatalf("record %d is %.6s, want %s (reordered)", i, v, want)
		}
	}
}
