// Package benchcmp measures tidemark and NATS JetStream side by side on one
// machine, in one run, one system after the other, each as separate
// processes the way users run them: tidemark's dev cluster driven by
// `tidemark perf`, a 3-node JetStream R3 file-store cluster driven by
// `nats bench`. It reports each figure and the ratio tidemark/JetStream.
package benchcmp

import (
	"fmt"
	"slices"
	"strings"
)

// Mode is how a shape's producers send.
type Mode string

const (
	// Sync waits for each write's acknowledgement before the next.
	Sync Mode = "sync"
	// Batch lets the producer batch (tidemark's linger.ms and batch.size;
	// `nats bench js pub async`, batches of 500 acks waited for together).
	Batch Mode = "batch"
	// Consume reads back what the shape before it wrote.
	Consume Mode = "consume"
	// Paced sends like Batch but at a fraction of the same system's peak
	// (the rate its PaceOf shape reached earlier in the run), with a
	// consumer reading at the same time; the figure is the
	// acknowledgement latency.
	Paced Mode = "paced"
	// EndToEnd is a Paced run whose figure is the end-to-end latency: from
	// hand-over to the producer until a consumer has the record.
	EndToEnd Mode = "e2e"
)

// Shape is one workload both systems run: acks=all on RF 3 (tidemark) and
// R3 file storage (JetStream), one partition / one stream.
type Shape struct {
	Name      string `json:"name"`
	Mode      Mode   `json:"mode"`
	Size      int    `json:"size"`
	Producers int    `json:"producers"`
	Records   int64  `json:"records"`
	// ReadsFrom names the shape whose records a Consume shape reads.
	ReadsFrom string `json:"reads_from,omitempty"`
	// PaceOf names the shape whose rate sets a Paced or EndToEnd shape's,
	// times Fraction; Seconds is how long it sends. Rate (records/s) and
	// Records are filled in per system when it runs.
	PaceOf   string  `json:"pace_of,omitempty"`
	Fraction float64 `json:"fraction,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
	// Warmup is how long a Paced or EndToEnd shape sends at the same rate
	// before its measured records, on both systems (not measured: the first
	// records of a new client pay for its connections and producer id).
	Warmup float64 `json:"warmup,omitempty"`
	Rate   float64 `json:"-"`
	// InFlight is a Batch shape's window, the same on both systems: the
	// bytes of records a producer may have sent and not had acknowledged.
	// tidemark: buffer.memory (bytes waiting or in flight); JetStream:
	// `nats bench js pub async --batch InFlight/Size` (it publishes a batch,
	// then waits for all its acks). 0 keeps each tool's default (32 MiB;
	// batches of 500).
	InFlight int `json:"in_flight,omitempty"`
	// LeaderAcks sends with acks=1 (tidemark only: JetStream has no
	// leader-only acknowledgement), for the acks=all / acks=1 ratio.
	LeaderAcks bool `json:"leader_acks,omitempty"`
	// Runs is how many times the shape runs on each system, one after the
	// other; the table gives the median run by throughput (its latencies
	// are that run's). A synchronous shape takes two seconds, and one such
	// run's p99 moved by half from one run to the next on either system.
	Runs int `json:"runs,omitempty"`
}

// paced reports whether the shape sends at a rate set by another's.
func (s Shape) paced() bool { return s.Mode == Paced || s.Mode == EndToEnd }

// pace is the fraction of the peak as the table says it.
func (s Shape) pace() string {
	if s.Fraction == 0.5 {
		return "half peak"
	}
	return fmt.Sprintf("%.0f%% of peak", s.Fraction*100)
}

// Label is the shape as the table shows it.
func (s Shape) Label() string {
	size := fmt.Sprintf("%d B", s.Size)
	if s.Size%1024 == 0 {
		size = fmt.Sprintf("%d KiB", s.Size/1024)
	}
	switch s.Mode {
	case Sync:
		if s.Producers == 1 {
			return "sync, 1 producer, " + size
		}
		return fmt.Sprintf("sync, %d producers, %s", s.Producers, size)
	case Batch:
		if s.LeaderAcks {
			return "batching producer, " + size + ", acks=1"
		}
		return "batching producer, " + size
	case Paced:
		return fmt.Sprintf("batching producer at %s, %s (ack latency)", s.pace(), size)
	case EndToEnd:
		return fmt.Sprintf("end to end at %s, %s (produce → consumer)", s.pace(), size)
	default:
		return "consumer, " + size
	}
}

// DefaultInFlight is the batching shapes' window on both systems. Bounded,
// so the latency is the pipeline's and not a queue the tool filled: with
// its client's 32 MiB default, a batching producer queues over a second of
// records at the same throughput (measured 24.8k/s 1 KiB with p99 1.2 s at
// 32 MiB, 24.8k/s with p99 20 ms at 256 KiB). The same on both, so the
// throughput compares pipelines, not windows (JetStream's own default, 500
// messages, is 64,000 B at 128 B: a quarter of this).
const DefaultInFlight = 256 << 10

// pacedWarmup is the paced shapes' warm-up in seconds. A new tidemark
// client's first 100-200 ms of acknowledgements at 120k records/s of 128 B
// took 15-45 ms on average against about 5 ms after (its connections,
// producer id and heap growing): a run's start, not the pipeline's steady
// latency, and alone enough to set a 6 s run's p99.
const pacedWarmup = 1.0

// DefaultShapes are the shapes of `make bench-compare`, sized so each
// takes a few seconds on a 2-core machine. scale multiplies the counts;
// inFlight is the batching shapes' window (DefaultInFlight).
// syncRuns and batchRuns are how many runs a synchronous or batching
// shape's figure is the median of: on this shared machine one run of either
// system moved by a third from the next (batching 1 KiB: 54-85k records/s
// for tidemark over four runs of one evening), and the paced shapes take
// their rate from the batching rows.
const (
	syncRuns  = 3
	batchRuns = 3
	// pacedRuns: a paced shape's figure is the run with the median p99 (its
	// throughput is the pace); one 6 s run's p99 ranged 9-69 ms.
	pacedRuns = 3
)

func DefaultShapes(scale float64, inFlight int) []Shape {
	n := func(v int64) int64 { return max(8, int64(float64(v)*scale)) }
	secs := func(v float64) float64 { return max(1, v*scale) }
	return []Shape{
		{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1, Records: n(4000), Runs: syncRuns},
		{Name: "sync1-1k", Mode: Sync, Size: 1024, Producers: 1, Records: n(4000), Runs: syncRuns},
		{Name: "sync8-128", Mode: Sync, Size: 128, Producers: 8, Records: n(8000), Runs: syncRuns},
		{Name: "sync8-1k", Mode: Sync, Size: 1024, Producers: 8, Records: n(8000), Runs: syncRuns},
		{Name: "batch-128", Mode: Batch, Size: 128, Producers: 1, Records: n(200000), InFlight: inFlight, Runs: batchRuns},
		{Name: "batch-1k", Mode: Batch, Size: 1024, Producers: 1, Records: n(100000), InFlight: inFlight, Runs: batchRuns},
		{Name: "batch-1k-acks1", Mode: Batch, Size: 1024, Producers: 1, Records: n(100000), InFlight: inFlight, LeaderAcks: true, Runs: batchRuns},
		{Name: "consume-1k", Mode: Consume, Size: 1024, Producers: 1, Records: n(100000), ReadsFrom: "batch-1k"},
		{Name: "paced-128", Mode: Paced, Size: 128, Producers: 1, PaceOf: "batch-128", Fraction: 0.5, Seconds: secs(6), Warmup: pacedWarmup, Runs: pacedRuns},
		{Name: "paced-1k", Mode: Paced, Size: 1024, Producers: 1, PaceOf: "batch-1k", Fraction: 0.5, Seconds: secs(6), Warmup: pacedWarmup, Runs: pacedRuns},
		{Name: "e2e-1k", Mode: EndToEnd, Size: 1024, Producers: 1, PaceOf: "batch-1k", Fraction: 0.5, Seconds: secs(6), Warmup: pacedWarmup, Runs: pacedRuns},
	}
}

// SelectShapes keeps the shapes named, in their order in all; a shape that
// reads from or paces another needs that one named too.
func SelectShapes(all []Shape, names []string) ([]Shape, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Shape
	for _, s := range all {
		if !want[s.Name] {
			continue
		}
		delete(want, s.Name)
		for _, dep := range []string{s.ReadsFrom, s.PaceOf} {
			if dep != "" && !slices.Contains(names, dep) {
				return nil, fmt.Errorf("%s needs %s too", s.Name, dep)
			}
		}
		out = append(out, s)
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		slices.Sort(unknown)
		return nil, fmt.Errorf("no shape named %s", strings.Join(unknown, ", "))
	}
	return out, nil
}
