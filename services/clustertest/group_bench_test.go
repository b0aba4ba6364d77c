package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/client"
)

// BenchmarkGroupConsumerCommits: BenchmarkGroupCommits through the Go
// client: 10 GroupConsumers of one group, each committing its own
// partition's offset in a loop (CommitSync: one OffsetCommit, one acks=all
// write to __consumer_offsets RF 3). In-process: brokers, controllers and
// the members share one process and its 2 cores. It prints commits/s and
// the commit latency percentiles; the target is 1,000 commits/s.
func BenchmarkGroupConsumerCommits(b *testing.B) {
	const members = 10
	c := Start(b, Options{Brokers: 3, BrokerSettings: GroupSettings, AdjustController: OffsetsPartitions(3)})
	c.CreateTopic("bench-commits", members, 3, nil)
	var gcs []*client.GroupConsumer
	for i := range members {
		cl := c.GroupClient()
		o := GroupOpts("bench", "bench-commits")
		o.DisableAutoCommit = true
		o.ClientID = fmt.Sprintf("bench-%d", i)
		gc, err := client.NewGroupConsumer(cl, o)
		if err != nil {
			b.Fatal(err)
		}
		defer gc.Abandon()
		gcs = append(gcs, gc)
	}
	// Poll until every member holds one partition of the same generation.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		ready := true
		var wg sync.WaitGroup
		for _, gc := range gcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = gc.Poll(ctx)
			}()
		}
		wg.Wait()
		gen := gcs[0].Generation()
		for _, gc := range gcs {
			ready = ready && len(gc.Assignment()) == 1 && gc.Generation() == gen
		}
		if ready {
			break
		}
		if ctx.Err() != nil {
			b.Fatal("the members never settled on one partition each")
		}
	}
	lat := make([][]time.Duration, members)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, gc := range gcs {
		n := b.N / members
		if i < b.N%members {
			n++
		}
		tp := gc.Assignment()[0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range n {
				t0 := time.Now()
				if err := gc.CommitSync(ctx, map[client.TopicPartition]int64{tp: int64(k)}); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		b.Fatal("no commit measured")
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "commits/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op")
}
