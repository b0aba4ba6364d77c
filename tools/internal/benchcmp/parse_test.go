package benchcmp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func near(d time.Duration, want time.Duration) bool {
	diff := d - want
	return diff > -time.Microsecond && diff < time.Microsecond
}

func TestParseRecordedOutputs(t *testing.T) {
	cases := []struct {
		file     string
		parse    func(string) (Figure, error)
		records  int64
		rate     float64
		p50, p99 time.Duration
	}{
		{"tidemark-produce-sync.txt", ParseTidemark, 2000, 787.4, 1120 * time.Microsecond, 3830 * time.Microsecond},
		{"tidemark-produce-batch.txt", ParseTidemark, 50000, 13155.2, 2022010 * time.Microsecond, 2457640 * time.Microsecond},
		{"tidemark-consume.txt", ParseTidemark, 50000, 153223.4, 5850 * time.Microsecond, 21840 * time.Microsecond},
		{"nats-sync-1.txt", ParseNats, 0, 1105, 816860 * time.Nanosecond, 2654410 * time.Nanosecond},
		// Eight clients: the aggregated line, not the first client's.
		{"nats-sync-8.txt", ParseNats, 0, 2790, 2295210 * time.Nanosecond, 9408400 * time.Nanosecond},
		{"nats-async.txt", ParseNats, 0, 19938, 21668440 * time.Nanosecond, 80054370 * time.Nanosecond},
		{"nats-ordered.txt", ParseNats, 0, 38488, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f, err := c.parse(read(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if f.Records != c.records || f.MsgsPerSec != c.rate || !near(f.P50, c.p50) || !near(f.P99, c.p99) || f.Failed != 0 {
				t.Fatalf("got %+v, want records %d, %v/s, p50 %v, p99 %v", f, c.records, c.rate, c.p50, c.p99)
			}
		})
	}
}

func TestParseTidemarkFailures(t *testing.T) {
	out := "10 records sent, 5.0 records/s (0.00 MB/s), 1.00 ms avg latency, 2.00 ms max, 1.00 ms p50, 2.00 ms p95, 2.00 ms p99, 2.00 ms p99.9; 3 failed: NOT_ENOUGH_REPLICAS x3\n"
	f, err := ParseTidemark(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Records != 10 || f.Failed != 3 {
		t.Fatalf("got %+v, want 10 records and 3 failed", f)
	}
}

func TestParseRefusesOutputWithoutSummary(t *testing.T) {
	// A progress line has no percentiles: it is not the summary.
	progress := "1000 records sent, 500.0 records/s (0.06 MB/s), 1.00 ms avg latency, 3.00 ms max\n"
	if _, err := ParseTidemark(progress); err == nil || err.Error() != `no summary line ("N records sent, R records/s ... p99 ...") in the tidemark perf output` {
		t.Fatalf("tidemark: got %v", err)
	}
	if _, err := ParseNats("nats: error: context deadline exceeded\n"); err == nil || err.Error() != `no "NATS JetStream ... stats: N msgs/sec" line in the nats bench output` {
		t.Fatalf("nats: got %v", err)
	}
}

func TestParseTidemarkE2ESummaries(t *testing.T) {
	out := "1200 records sent, 400.1 records/s (0.39 MB/s), 2.10 ms avg ack latency, 9.00 ms max, 1.90 ms p50, 3.00 ms p95, 4.50 ms p99, 8.00 ms p99.9\n" +
		"1200 records consumed, 399.8 records/s (0.39 MB/s), 3.10 ms avg end-to-end latency, 12.00 ms max, 2.90 ms p50, 4.00 ms p95, 6.50 ms p99, 11.00 ms p99.9\n"
	sent, err := ParseTidemarkSent(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseTidemarkConsumed(out)
	if err != nil {
		t.Fatal(err)
	}
	if sent.MsgsPerSec != 400.1 || sent.P99 != 4500*time.Microsecond || got.MsgsPerSec != 399.8 || got.P99 != 6500*time.Microsecond {
		t.Fatalf("sent %+v, consumed %+v", sent, got)
	}
	if _, err := ParseTidemarkConsumed(strings.SplitN(out, "\n", 2)[0]); err == nil {
		t.Fatal("a run without the consumed summary parsed")
	}
}
