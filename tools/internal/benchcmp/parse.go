package benchcmp

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Figure is what one tool reported for one shape.
type Figure struct {
	Records    int64   `json:"records,omitempty"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	// P50 and P99 are zero when the tool reported no latency.
	P50 time.Duration `json:"p50_ns,omitempty"`
	P99 time.Duration `json:"p99_ns,omitempty"`
	// Failed counts records the tool reported as failed.
	Failed int64 `json:"failed,omitempty"`
	// Err says why the shape has no figure (the tool failed to run).
	Err string `json:"error,omitempty"`
	// Rate is the pace a Paced or EndToEnd shape was sent at (records/s).
	Rate float64 `json:"rate,omitempty"`
	// Runs is how many runs this figure is the median of (Shape.Runs);
	// MinMsgsPerSec and MaxMsgsPerSec are the slowest and fastest.
	Runs          int     `json:"runs,omitempty"`
	MinMsgsPerSec float64 `json:"min_msgs_per_sec,omitempty"`
	MaxMsgsPerSec float64 `json:"max_msgs_per_sec,omitempty"`
	// Redone counts the runs done again because the machine paused during
	// them (watchPauses); MachinePause is the longest of those pauses.
	Redone       int           `json:"redone,omitempty"`
	MachinePause time.Duration `json:"machine_pause_ns,omitempty"`
	// ServerCPU is the CPU time the system's server processes (brokers,
	// nats-servers) used over the run, per record it sent or read;
	// ClientCPU the tool process's. Zero: not measured (a client in the
	// harness's own process, a server that restarted).
	ServerCPU time.Duration `json:"server_cpu_per_record_ns,omitempty"`
	ClientCPU time.Duration `json:"client_cpu_per_record_ns,omitempty"`
	// ServerSwitches and ClientSwitches are the context switches of the
	// server processes' threads and of the tool process's, per record,
	// measured as their CPU time is: a thread that waits for the next hop
	// sleeps and is woken, and on a virtual machine each costs tens of µs
	// of CPU (see SleepWake). Zero: not measured.
	ServerSwitches float64 `json:"server_switches_per_record,omitempty"`
	ClientSwitches float64 `json:"client_switches_per_record,omitempty"`
	// StealPct is the share of the machine's CPU time the hypervisor took
	// during the run (/proc/stat's steal), StealMeasured whether it was
	// read; MaxStealPct is the highest of a row's runs. A row that met
	// the host running something else on its vCPUs says so.
	StealPct      float64 `json:"steal_pct,omitempty"`
	MaxStealPct   float64 `json:"max_steal_pct,omitempty"`
	StealMeasured bool    `json:"steal_measured,omitempty"`
	// Mean is the client's mean latency, as `tidemark perf` prints it
	// ("avg latency"); zero for JetStream.
	Mean time.Duration `json:"mean_ns,omitempty"`
	// Split is where a tidemark synchronous run's time went, as means of
	// the brokers' histograms over the run; nil for other shapes and for
	// JetStream.
	Split *SyncSplit `json:"split,omitempty"`
	// Tail is where a tidemark paced run's latency went, from the
	// brokers' histograms over the run (its warm-up included); nil for
	// other shapes and for JetStream.
	Tail *Tail `json:"tail,omitempty"`
	// HandoverP99 is, for a tidemark paced run, the p99 of how late its
	// records reached the producer against their schedule: the client
	// process's own part of the latency (`perf e2e`'s "handed to the
	// producer" line).
	HandoverP99 time.Duration `json:"handover_p99_ns,omitempty"`
	// Batches is, for a tidemark paced run, how its producer's batches went
	// out (`perf e2e`'s batches line); nil when not reported.
	Batches *Batches `json:"batches,omitempty"`
	// Memory is the machine's when the row began (before its first run);
	// nil when it could not be read.
	Memory *Memory `json:"memory,omitempty"`

	// clientUsage is what the tool process used in all, as a side's run
	// reports it; runMeasured turns it into ClientCPU and ClientSwitches.
	clientUsage usage
}

// tidemarkSummary matches the summary line of `tidemark perf produce` and
// `tidemark perf consume` (perfstat.Report.Line with percentiles).
var tidemarkSummary = regexp.MustCompile(`^(\d+) records (?:sent|consumed|handed to the producer), ([\d.]+) records/s \([\d.]+ MB/s\), .* ([\d.]+) ms p50, .* ([\d.]+) ms p99, [\d.]+ ms p99\.9(?:; (\d+) failed)?`)

// tidemarkMean finds the mean latency in that summary line.
var tidemarkMean = regexp.MustCompile(`, ([\d.]+) ms avg latency,`)

// ParseTidemark reads the summary line out of a `tidemark perf` run's
// output (the last one, when there are several).
func ParseTidemark(out string) (Figure, error) { return parseTidemark(out, "") }

// ParseTidemarkSent and ParseTidemarkConsumed read the acknowledgement
// and the end-to-end summary of `tidemark perf e2e`.
func ParseTidemarkSent(out string) (Figure, error)     { return parseTidemark(out, "sent") }
func ParseTidemarkConsumed(out string) (Figure, error) { return parseTidemark(out, "consumed") }

func parseTidemark(out, what string) (Figure, error) {
	var f Figure
	found := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		m := tidemarkSummary.FindStringSubmatch(line)
		if m == nil || (what != "" && !strings.HasPrefix(line, m[1]+" records "+what+",")) {
			continue
		}
		found = true
		f = Figure{}
		f.Records, _ = strconv.ParseInt(m[1], 10, 64)
		f.MsgsPerSec, _ = strconv.ParseFloat(m[2], 64)
		f.P50 = msDuration(m[3])
		f.P99 = msDuration(m[4])
		if a := tidemarkMean.FindStringSubmatch(line); a != nil {
			f.Mean = msDuration(a[1])
		}
		if m[5] != "" {
			f.Failed, _ = strconv.ParseInt(m[5], 10, 64)
		}
	}
	if !found {
		return f, fmt.Errorf("no summary line (\"N records sent, R records/s ... p99 ...\") in the tidemark perf output")
	}
	return f, nil
}

func msDuration(s string) time.Duration {
	v, _ := strconv.ParseFloat(s, 64)
	return time.Duration(v * float64(time.Millisecond))
}

var (
	// natsStats is the summary of one client ("NATS JetStream ... stats:
	// 1,105 msgs/sec ~ ...") or of all of them ("... aggregated stats:").
	natsStats = regexp.MustCompile(`^NATS JetStream .*?(aggregated )?stats: ([\d,.]+) msgs/sec`)
	// natsPercentile finds "P50: 816.86us" (one client) or "P50 2,295.21us"
	// (the aggregated latencies line).
	natsP50 = regexp.MustCompile(`\bP50:? ([\d,.]+)(ns|us|µs|ms|s)\b`)
	natsP99 = regexp.MustCompile(`\bP99:? ([\d,.]+)(ns|us|µs|ms|s)\b`)
)

// ParseNats reads throughput and, when printed, the p50 and p99 latency
// out of a `nats bench js ...` run's output. With several clients it takes
// the aggregated figures, not one client's.
func ParseNats(out string) (Figure, error) {
	var f Figure
	found, aggregated := false, false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := natsStats.FindStringSubmatch(line); m != nil {
			rate, err := strconv.ParseFloat(strings.ReplaceAll(m[2], ",", ""), 64)
			if err != nil {
				return f, fmt.Errorf("nats bench rate %q: %v", m[2], err)
			}
			found, aggregated = true, m[1] != ""
			f = Figure{MsgsPerSec: rate}
			f.P50, f.P99 = natsLatency(natsP50, line), natsLatency(natsP99, line)
			continue
		}
		// The aggregated summary puts latencies on a line of their own.
		if aggregated && strings.HasPrefix(line, "latencies per operation") {
			f.P50, f.P99 = natsLatency(natsP50, line), natsLatency(natsP99, line)
		}
	}
	if !found {
		return f, fmt.Errorf("no \"NATS JetStream ... stats: N msgs/sec\" line in the nats bench output")
	}
	return f, nil
}

func natsLatency(re *regexp.Regexp, line string) time.Duration {
	m := re.FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil {
		return 0
	}
	unit := map[string]time.Duration{"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[2]]
	return time.Duration(v * float64(unit))
}

// Batches is `perf e2e`'s account of the producer's batches over the
// measured records.
type Batches struct {
	Sent int64 `json:"sent"`
	// SlotWaits were ready while the partition's max.in.flight requests
	// were all outstanding: the pipeline to the leader was full.
	SlotWaits int64 `json:"slot_waits"`
	// QueueAvg and QueueMax: from a batch's creation to its first send.
	QueueAvg time.Duration `json:"queue_avg_ns"`
	QueueMax time.Duration `json:"queue_max_ns"`
}

var batchesLine = regexp.MustCompile(`^(\d+) batches sent, (\d+) waited for a request slot \(max\.in\.flight \d+\), ([\d.]+) ms avg record queue time, ([\d.]+) ms max`)

// parseBatches reads `perf e2e`'s batches line, nil when there is none.
func parseBatches(out string) *Batches {
	for _, line := range strings.Split(out, "\n") {
		m := batchesLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		b := &Batches{QueueAvg: msDuration(m[3]), QueueMax: msDuration(m[4])}
		b.Sent, _ = strconv.ParseInt(m[1], 10, 64)
		b.SlotWaits, _ = strconv.ParseInt(m[2], 10, 64)
		return b
	}
	return nil
}
