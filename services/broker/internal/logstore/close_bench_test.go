package logstore

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkManagerCloseManyLogs measures a broker's shutdown of its log
// dir with many partitions on the real file system: each log holds a few
// batches appended since its last flush, as after a busy minute. It
// reports the whole Close and its cost per log.
func BenchmarkManagerCloseManyLogs(b *testing.B) {
	for _, n := range []int{500, 2000} {
		b.Run(fmt.Sprintf("logs=%d", n), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				m, err := OpenManager(ManagerOptions{Dir: dir, NoBackground: true,
					HighWatermark: func(TopicPartition) (int64, bool) { return 0, false }})
				if err != nil {
					b.Fatal(err)
				}
				for p := range n {
					l, err := m.GetOrCreate(TopicPartition{"bench", int32(p)}, DefaultConfig())
					if err != nil {
						b.Fatal(err)
					}
					fill(b, l, 3, 2, 100)
				}
				b.StartTimer()
				began := time.Now()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
				total += time.Since(began)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/close")
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/float64(n), "µs/log")
		})
	}
}
