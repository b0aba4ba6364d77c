package clustertest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/controller"
)

// The replication benchmarks: 3 brokers on loopback with the real
// controller and etcd, replication factor 3, min.insync.replicas 2,
// acks=all, the Go client. They print throughput and latency percentiles
// side by side for 128 B and 1 KiB records, one synchronous producer and
// one batching producer. For scale, NATS JetStream R3 on this kind of
// machine: ~2,000 msg/s synchronous, ~33,000 msg/s batched
// (../shared/reference/peers.md).

func benchCluster(b *testing.B, opts ...Options) (*Cluster, *client.Client) {
	o := Options{}
	if len(opts) > 0 {
		o = opts[0]
	}
	c := Start(b, o)
	c.CreateTopic("bench", 1, 3, map[string]string{"min.insync.replicas": "2"})
	cl := c.Client()
	return c, cl
}

func reportLatencies(b *testing.B, lat []time.Duration, elapsed time.Duration, n int) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(pct(0.999), "p99.9-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSyncProducer: one producer waiting for each acks=all write
// before the next (linger off).
func BenchmarkSyncProducer(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			_, cl := benchCluster(b)
			p, err := client.NewProducer(cl, client.ProducerOptions{Linger: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			value := make([]byte, size)
			rec := client.Record{Topic: "bench", Partition: 0, ManualPartition: true, Value: value}
			if _, err := p.Produce(context.Background(), rec); err != nil { // warm up: producer id, metadata
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := p.Produce(context.Background(), rec); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatencies(b, lat, time.Since(start), b.N)
		})
	}
}

// BenchmarkTracingOverhead runs the batching producer with tracing off and
// on (every broker and controller instrumented, spans exported to a
// discarding exporter), side by side. The goal: throughput with tracing on
// within 10% of tracing off.
func BenchmarkTracingOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("tracing=%v", on), func(b *testing.B) {
			o := Options{}
			if on {
				o.Adjust = func(cfg *broker.Config) { cfg.Telemetry.Exporter = tracetest.NewNoopExporter() }
				o.AdjustController = func(cfg *controller.Config) { cfg.Telemetry.Exporter = tracetest.NewNoopExporter() }
			}
			_, cl := benchCluster(b, o)
			runBatching(b, cl, 128)
		})
	}
}

// BenchmarkBatchingProducer: one idempotent producer with batching (linger
// 5 ms, batch.size 64 KiB, 5 batches in flight) sending b.N records
// asynchronously; latency is per record, from send to acknowledgement.
func BenchmarkBatchingProducer(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			_, cl := benchCluster(b)
			runBatching(b, cl, size)
		})
	}
}

func runBatching(b *testing.B, cl *client.Client, size int) {
	p, err := client.NewProducer(cl, client.ProducerOptions{BatchSize: 64 << 10})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	value := make([]byte, size)
	if _, err := p.Produce(context.Background(), client.Record{Topic: "bench", Partition: 0, ManualPartition: true, Value: value}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	var failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(b.N)
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		i := i
		p.ProduceAsync(client.Record{Topic: "bench", Partition: 0, ManualPartition: true, Value: value}, func(_ client.Result, err error) {
			if err != nil {
				failed.Add(1)
			}
			lat[i] = time.Since(t0)
			wg.Done()
		})
	}
	wg.Wait()
	el := time.Since(start)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d records failed", f)
	}
	reportLatencies(b, lat, el, b.N)
}
