package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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

// franz-go's producer (idempotent, acks=all, the default) and consumer
// against the Kafka listener: topics made with kadm, every record back in
// order, once.
func TestKafkaProduceConsumeWithFranzGo(t *testing.T) {
	c := Start(t, Options{Brokers: 3, Kafka: true})
	adm := kadm.NewClient(c.kafkaClient())
	c.kafkaCreate(adm, "kgo", 3, 3, nil)

	prod := c.kafkaClient(kgo.DefaultProduceTopic("kgo"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		r := &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("v%03d", i))}
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := c.kafkaClient(kgo.ConsumeTopics("kgo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consumeAll(t, cons, n)
	total := 0
	for _, vs := range got {
		total += len(vs)
	}
	if total != n {
		t.Fatalf("consumed %d records, want %d", total, n)
	}
}
