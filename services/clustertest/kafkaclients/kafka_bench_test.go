package kafkaclients

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
)

// BenchmarkKafkaFrontDoor compares the two front doors of the same cluster
// (3 brokers, RF 3, min.insync.replicas 2, acks=all, no compression):
// franz-go's producer through the Kafka listener against tidemark's Go
// client through gRPC, the same shape each, b.N records per door. Each line
// prints both throughputs and kafka/grpc (the goal: at least 0.8).
//
//	sync-128B:     one record at a time, each acknowledged before the next
//	batched-1KiB:  idempotent, linger 5 ms, 64 KiB batches, 5 in flight
func BenchmarkKafkaFrontDoor(b *testing.B) {
	for _, shape := range []struct {
		name  string
		size  int
		batch bool
	}{{"sync-128B", 128, false}, {"batched-1KiB", 1024, true}} {
		b.Run(shape.name, func(b *testing.B) {
			c := clustertest.Start(b, clustertest.Options{Kafka: true})
			c.CreateTopic("grpc", 1, 3, map[string]string{"min.insync.replicas": "2"})
			c.CreateTopic("kafka", 1, 3, map[string]string{"min.insync.replicas": "2"})
			value := make([]byte, shape.size)
			var grpcRate, kafkaRate float64
			if shape.batch {
				grpcRate = grpcBatched(b, c.Client(), value)
				kafkaRate = kafkaBatched(b, c, value)
			} else {
				grpcRate = grpcSync(b, c.Client(), value)
				kafkaRate = kafkaSync(b, c, value)
			}
			b.ReportMetric(grpcRate, "grpc-records/s")
			b.ReportMetric(kafkaRate, "kafka-records/s")
			b.ReportMetric(kafkaRate/grpcRate, "kafka/grpc")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func grpcSync(b *testing.B, cl *client.Client, value []byte) float64 {
	p, err := client.NewProducer(cl, client.ProducerOptions{Linger: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	rec := client.Record{Topic: "grpc", Partition: 0, ManualPartition: true, Value: value}
	if _, err := p.Produce(context.Background(), rec); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range b.N {
		if _, err := p.Produce(context.Background(), rec); err != nil {
			b.Fatal(err)
		}
	}
	return float64(b.N) / time.Since(start).Seconds()
}

func grpcBatched(b *testing.B, cl *client.Client, value []byte) float64 {
	p, err := client.NewProducer(cl, client.ProducerOptions{BatchSize: 64 << 10})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	rec := client.Record{Topic: "grpc", Partition: 0, ManualPartition: true, Value: value}
	if _, err := p.Produce(context.Background(), rec); err != nil {
		b.Fatal(err)
	}
	var failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(b.N)
	start := time.Now()
	for range b.N {
		p.ProduceAsync(rec, func(_ client.Result, err error) {
			if err != nil {
				failed.Add(1)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d records failed", f)
	}
	return float64(b.N) / time.Since(start).Seconds()
}

func kafkaProducer(b *testing.B, c *clustertest.Cluster, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic("kafka"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return cl
}

func kafkaSync(b *testing.B, c *clustertest.Cluster, value []byte) float64 {
	cl := kafkaProducer(b, c, kgo.ProducerLinger(0))
	start := time.Now()
	for range b.N {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(b.N) / time.Since(start).Seconds()
}

func kafkaBatched(b *testing.B, c *clustertest.Cluster, value []byte) float64 {
	cl := kafkaProducer(b, c, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(64<<10),
		kgo.MaxBufferedRecords(1<<20)) // idempotent: kgo keeps up to 5 requests in flight itself
	var failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(b.N)
	start := time.Now()
	for range b.N {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d records failed", f)
	}
	return float64(b.N) / time.Since(start).Seconds()
}
