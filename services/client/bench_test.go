package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
)

// BenchmarkProducer measures the producer against the in-process fake
// (loopback gRPC, one broker): records of 100 bytes, acks=all, idempotent.
// It reports records/s and MB/s of values.
func BenchmarkProducer(b *testing.B) {
	for _, bc := range []struct {
		name       string
		partitions int
		sync       bool
		linger     time.Duration
	}{
		{"async/1-partition", 1, false, 0},
		{"async/4-partitions", 4, false, 0},
		{"sync/linger-5ms", 1, true, 0},
		{"sync/no-linger", 1, true, -1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			fc := startCluster(b, fakebroker.Config{})
			fc.CreateTopic("t", bc.partitions)
			c := newClient(b, fc)
			p := newProducer(b, c, client.ProducerOptions{Linger: bc.linger})
			ctx := context.Background()
			val := make([]byte, 100)
			// Warm up: connection, metadata, producer id.
			if _, err := p.Produce(ctx, client.Record{Topic: "t", Value: val}); err != nil {
				b.Fatal(err)
			}
			var failed atomic.Int64
			cb := func(_ client.Result, err error) {
				if err != nil {
					failed.Add(1)
				}
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if bc.sync {
					if _, err := p.Produce(ctx, client.Record{Topic: "t", Value: val}); err != nil {
						b.Fatal(err)
					}
					continue
				}
				p.ProduceAsync(client.Record{Topic: "t", Value: val}, cb)
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			el := time.Since(start)
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d records failed", n)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
			b.ReportMetric(float64(b.N*len(val))/el.Seconds()/1e6, "MB/s")
		})
	}
}
