// Package perfstat measures and reports the throughput and latency of
// `tidemark perf`, in the manner of Kafka's perf-test tools: records/s,
// MB/s, and latency avg, p50, p95, p99, p99.9 and max.
package perfstat

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxSamples bounds the latencies kept for percentiles; beyond it every
// k-th one is kept, so memory stays flat on long runs.
const maxSamples = 500_000

// MiB is the unit of the MB/s figures, as Kafka's tools count them.
const MiB = 1 << 20

// Recorder collects outcomes from any goroutine.
type Recorder struct {
	mu      sync.Mutex
	start   time.Time
	every   int64 // keep one latency sample in every
	total   stats
	window  stats
	winFrom time.Time
	samples []time.Duration
	fails   map[string]int
}

// stats are the running sums over a span of time.
type stats struct {
	n, bytes int64
	sum, max time.Duration
}

func (s *stats) add(lat time.Duration, bytes int) {
	s.n++
	s.bytes += int64(bytes)
	s.sum += lat
	s.max = max(s.max, lat)
}

// New returns a recorder for a run of about expected outcomes, started at now.
// The samples' room is taken here, not grown during the run: a grown slice
// is a large allocation (megabytes, copied) on the goroutine that records,
// mid-run, and during a collection it pays for that size in mark assist:
// a 19 ms stall of the producer's callbacks and the consumer together, 5 s
// into every 120k records/s run, in the latency being measured.
func New(expected int64, now time.Time) *Recorder {
	every := max(1, (expected+maxSamples-1)/maxSamples)
	room := min(maxSamples, max(0, expected)/every+1)
	return &Recorder{start: now, winFrom: now, every: every, fails: map[string]int{}, samples: make([]time.Duration, 0, room)}
}

// Record notes one success: its latency and its size in bytes.
func (r *Recorder) Record(lat time.Duration, bytes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.total.n%r.every == 0 && len(r.samples) < maxSamples {
		r.samples = append(r.samples, lat)
	}
	r.total.add(lat, bytes)
	r.window.add(lat, bytes)
}

// Restart forgets the successes noted so far and starts the run again at
// now: what a warm-up sent is not measured. Failures are kept: a record
// lost while warming up is still lost.
func (r *Recorder) Restart(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start, r.winFrom = now, now
	r.total, r.window, r.samples = stats{}, stats{}, r.samples[:0]
}

// Fail notes one failure under an error name.
func (r *Recorder) Fail(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails[name]++
}

// Done is how many outcomes, successes and failures, were noted.
func (r *Recorder) Done() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.total.n
	for _, c := range r.fails {
		n += int64(c)
	}
	return n
}

// Window returns the figures since the previous Window (or the start) and
// starts a new window at now: the periodic progress line.
func (r *Recorder) Window(now time.Time) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.window
	rep := Report{Records: w.n, Bytes: w.bytes, Elapsed: now.Sub(r.winFrom), Max: w.max}
	if w.n > 0 {
		rep.Avg = w.sum / time.Duration(w.n)
	}
	r.window, r.winFrom = stats{}, now
	return rep
}

// Summary returns the figures of the whole run up to now, percentiles included.
func (r *Recorder) Summary(now time.Time) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.total
	rep := Report{Records: t.n, Bytes: t.bytes, Elapsed: now.Sub(r.start), Max: t.max, Failed: maps.Clone(r.fails), Percentiles: true}
	if t.n > 0 {
		rep.Avg = t.sum / time.Duration(t.n)
	}
	sorted := slices.Clone(r.samples)
	slices.Sort(sorted)
	rep.P50, rep.P95 = Percentile(sorted, 0.50), Percentile(sorted, 0.95)
	rep.P99, rep.P999 = Percentile(sorted, 0.99), Percentile(sorted, 0.999)
	return rep
}

// Percentile returns the p-th quantile (0..1) of sorted latencies by the
// index rule of Kafka's perf tools, sorted[int(p*n)] (the last for p = 1),
// so figures compare with kafka-producer-perf-test's. It is not the nearest
// rank: where p*n is whole it takes the sample after, so p99 of 100 samples
// is the maximum. Zero for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)))
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Report is a set of figures over a span of time.
type Report struct {
	Records, Bytes      int64
	Elapsed             time.Duration
	Avg, Max            time.Duration
	P50, P95, P99, P999 time.Duration
	Percentiles         bool           // whether the percentiles were computed
	Failed              map[string]int // failures by error name (summary only)
}

// RecordsPerSec is the record throughput.
func (r Report) RecordsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Records) / r.Elapsed.Seconds()
}

// MBPerSec is the byte throughput in MiB/s.
func (r Report) MBPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / MiB / r.Elapsed.Seconds()
}

// FailedCount is the number of failures.
func (r Report) FailedCount() int {
	n := 0
	for _, c := range r.Failed {
		n += c
	}
	return n
}

// ms prints a latency in milliseconds; in-process runs are often sub-ms.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// Line is one line: counts, throughput, then latencies; what says what
// the records were ("sent", "consumed").
func (r Report) Line(what, latency string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records %s, %.1f records/s (%.2f MB/s), %s avg %s, %s max",
		r.Records, what, r.RecordsPerSec(), r.MBPerSec(), ms(r.Avg), latency, ms(r.Max))
	if r.Percentiles {
		fmt.Fprintf(&b, ", %s p50, %s p95, %s p99, %s p99.9", ms(r.P50), ms(r.P95), ms(r.P99), ms(r.P999))
	}
	if n := r.FailedCount(); n > 0 {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(r.Failed)) {
			parts = append(parts, fmt.Sprintf("%s x%d", name, r.Failed[name]))
		}
		fmt.Fprintf(&b, "; %d failed: %s", n, strings.Join(parts, ", "))
	}
	return b.String()
}

// Throttle paces a run to a target rate.
type Throttle struct {
	perSec float64
	start  time.Time
}

// NewThrottle paces to perSec operations a second from start; perSec <= 0
// means no limit.
func NewThrottle(perSec float64, start time.Time) *Throttle {
	return &Throttle{perSec: perSec, start: start}
}

// Wait returns how long to pause before operation number done+1 so the
// rate stays at or under the target.
func (t *Throttle) Wait(done int64, now time.Time) time.Duration {
	if t.perSec <= 0 {
		return 0
	}
	return max(t.due(done).Sub(now), 0)
}

func (t *Throttle) due(done int64) time.Time {
	return t.start.Add(time.Duration(float64(done) / t.perSec * float64(time.Second)))
}

// SendTime is the time operation number done+1 was due: a latency measured
// from it includes any time the sender fell behind its schedule (a send
// that waited for buffer room, a pause of the sending process), which a
// latency from the actual send would leave out for every operation queued
// behind the late one (coordinated omission). Unthrottled, it is now; it is
// never after now.
func (t *Throttle) SendTime(done int64, now time.Time) time.Time {
	if t.perSec <= 0 {
		return now
	}
	if due := t.due(done); due.Before(now) {
		return due
	}
	return now
}
