package broker_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
)

// BenchmarkProduceAcksAllSync measures one synchronous producer against 3
// brokers on loopback, replication factor 3, min.insync.replicas 2: every
// write waits for the whole ISR (two follower round trips). It reports
// writes/s and latency percentiles.
func BenchmarkProduceAcksAllSync(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			c := newCluster(b, 3, nil)
			c.ctrl.createTopic("bench", 1, 3, map[string]string{"min.insync.replicas": "2"})
			value := string(make([]byte, size))
			cl := c.client(1)
			batch := batchOf(value)
			req := &brokerv1.ProduceRequest{Topic: "bench", Partition: 0, Acks: -1, TimeoutMs: 5000,
				Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batch}}
			lat := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				// The leader patches offsets into the batch in place: send a copy.
				req.Payload = &brokerv1.ProduceRequest_RecordBatch{RecordBatch: append([]byte(nil), batch...)}
				if _, err := cl.Produce(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			el := time.Since(start)
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(float64(b.N)/el.Seconds(), "writes/s")
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			b.ReportMetric(pct(0.999), "p99.9-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
		})
	}
}
