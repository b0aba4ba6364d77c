package replica

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// BenchmarkFetcherGapFlushes is a fetch round's flushes of n partitions
// copying a leader's cleaned log, on real files: each op appends a 16 KiB
// batch after a gap to every log, then flushes their gaps, alternating
// flushes one after another (as the fetcher did) with flushes side by side
// (runGapFlushes, maxGapFlushes at once). It reports each side's time per
// round: what the round's request, caught-up partitions included, waits.
func BenchmarkFetcherGapFlushes(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run("partitions="+strconv.Itoa(n), func(b *testing.B) { benchGapFlushes(b, n) })
	}
}

func benchGapFlushes(b *testing.B, n int) {
	dir := b.TempDir()
	open := func(name string) []gapFlush {
		fl := make([]gapFlush, n)
		for i := range fl {
			l, err := logstore.Open(logstore.Options{FS: vfs.OS, Dir: dir + "/" + name + "-" + strconv.Itoa(i), Config: logstore.DefaultConfig()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			fl[i].log = l
		}
		return fl
	}
	serial, parallel := open("serial"), open("parallel")
	value := strings.Repeat("x", 16<<10)
	round := func(fl []gapFlush, flush func([]gapFlush)) time.Duration {
		for _, g := range fl {
			rb := recordbatch.Batch(batch(value))
			rb.SetBaseOffset(g.log.LogEndOffset() + 3)
			rb.SetPartitionLeaderEpoch(0)
			if _, err := g.log.AppendAsFollowerUnflushed(rb); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		flush(fl)
		took := time.Since(start)
		for _, g := range fl {
			if g.err != nil {
				b.Fatal(g.err)
			}
			if g.log.GapsUnflushed() {
				b.Fatal("gaps left unflushed")
			}
		}
		return took
	}
	oneByOne := func(fl []gapFlush) {
		for i := range fl {
			fl[i].err = fl[i].log.FlushGaps()
		}
	}
	sideBySide := func(fl []gapFlush) { runGapFlushes(fl, maxGapFlushes) }
	var s, p time.Duration
	b.ResetTimer()
	for range b.N {
		s += round(serial, oneByOne)
		p += round(parallel, sideBySide)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(ms(s), "one-by-one-ms/round")
	b.ReportMetric(ms(p), "side-by-side-ms/round")
	b.ReportMetric(0, "ns/op")
}
