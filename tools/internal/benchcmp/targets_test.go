package benchcmp

import (
	"strings"
	"testing"
	"time"
)

func TestTargetsSayWhatTheRunReached(t *testing.T) {
	ms := time.Millisecond
	r := &Result{Rows: []Row{
		// 2.10× but a p99 above JetStream's: not met.
		{Shape: Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1},
			Tidemark:  Figure{MsgsPerSec: 2100, P50: ms, P99: 3 * ms},
			JetStream: Figure{MsgsPerSec: 1000, P50: ms, P99: 2 * ms}},
		{Shape: Shape{Name: "sync1-1k", Mode: Sync, Size: 1024, Producers: 1},
			Tidemark:  Figure{MsgsPerSec: 2000, P50: ms, P99: ms},
			JetStream: Figure{MsgsPerSec: 1000, P50: ms, P99: 2 * ms}},
		{Shape: Shape{Name: "batch-128", Mode: Batch, Size: 128, Producers: 1},
			Tidemark: Figure{MsgsPerSec: 2900}, JetStream: Figure{MsgsPerSec: 1000}},
		{Shape: Shape{Name: "batch-1k", Mode: Batch, Size: 1024, Producers: 1},
			Tidemark: Figure{MsgsPerSec: 2000}, JetStream: Figure{MsgsPerSec: 1000}},
		{Shape: Shape{Name: "batch-1k-acks1", Mode: Batch, Size: 1024, Producers: 1, LeaderAcks: true},
			Tidemark: Figure{MsgsPerSec: 4000}},
		{Shape: Shape{Name: "paced-128", Mode: Paced, Size: 128, Producers: 1, Fraction: 0.5},
			Tidemark: Figure{MsgsPerSec: 100, P99: 20 * ms}, JetStream: Figure{MsgsPerSec: 100, P99: ms}},
		{Shape: Shape{Name: "paced-1k", Mode: Paced, Size: 1024, Producers: 1, Fraction: 0.5},
			Tidemark: Figure{Err: "exit status 1"}, JetStream: Figure{MsgsPerSec: 100, P99: ms}},
		// End to end is reported, not a target.
		{Shape: Shape{Name: "e2e-1k", Mode: EndToEnd, Size: 1024, Producers: 1, Fraction: 0.5},
			Tidemark: Figure{MsgsPerSec: 100, P99: 90 * ms}, JetStream: Figure{MsgsPerSec: 100, P99: ms}},
	}, PeakRSS: PeakRSS{Tidemark: 151e6}}
	md := r.Markdown()
	requireLines(t, md,
		"| sync, 1 producer, 128 B: ≥ 2× JetStream's writes/s, p99 ≤ JetStream's | 2.10×, p99 1.50× | not met |",
		"| sync, 1 producer, 1 KiB: ≥ 2× JetStream's writes/s, p99 ≤ JetStream's | 2.00×, p99 0.50× | met |",
		"| batching producer, 128 B: ≥ 3× JetStream's records/s | 2.90× | not met |",
		"| batching producer, 1 KiB: ≥ 2× JetStream's records/s | 2.00× | met |",
		"| batching producer at half peak, 128 B (ack latency): p99 ≤ 20.00 ms | 20.00 ms | met |",
		"| batching producer at half peak, 1 KiB (ack latency): p99 ≤ 20.00 ms | – | – |",
		"| acks=all / acks=1 throughput, batching 1 KiB: ≥ 0.6 | 0.50 | not met |",
		"| largest broker's peak resident memory: < 150 MB | 151 MB | not met |",
		"- 3 of 7 targets met in this run (1 without a figure: a shape not run or failed)",
	)
	if strings.Contains(md, "end to end at half peak, 1 KiB (produce → consumer): p99") {
		t.Errorf("end to end is not a target:\n%s", md)
	}
	if got := (&Result{}).targetsTable(); got != "" {
		t.Errorf("a run with no figures prints no targets, got %q", got)
	}
}
