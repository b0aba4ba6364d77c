package benchcmp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Tail is where a tidemark run's latency went, read from the brokers' own
// histograms: scraped before and after the run, the difference is the
// run's. A paced row's p99 over its goal is then either the brokers'
// (the leader's produce time is as long: the disk, or waiting for the
// followers) or outside them (the client, the hops between processes).
// Times are a histogram bucket's upper bound, in seconds (+Inf above the
// last bound).
type Tail struct {
	// Produces counts the leader's acks=all produce requests in the run;
	// ProduceP99 and ProduceMax are their time on the leader, from
	// arrival to response (tidemark_broker_produce_latency_seconds).
	Produces   int64   `json:"produces"`
	ProduceP99 float64 `json:"produce_p99_s"`
	ProduceMax float64 `json:"produce_max_s"`
	// AppendToHWP99 and AppendToHWMax: from the leader's append to the HW
	// covering it, the followers' part (tidemark_broker_append_to_hw_seconds).
	AppendToHWP99 float64 `json:"append_to_hw_p99_s"`
	AppendToHWMax float64 `json:"append_to_hw_max_s"`
	// Appends counts segment writes on all brokers, leader and followers;
	// SlowAppends those over slowAppend, AppendMax the slowest
	// (tidemark_log_append_write_seconds).
	Appends     int64   `json:"appends"`
	SlowAppends int64   `json:"slow_appends"`
	AppendMax   float64 `json:"append_max_s"`
	// Checkpoints counts offset checkpoints written durably on all brokers,
	// CheckpointMax the slowest (tidemark_log_checkpoint_write_seconds).
	Checkpoints   int64   `json:"checkpoints"`
	CheckpointMax float64 `json:"checkpoint_max_s"`
	// FollowerApplyP99 and FollowerApplyMax are the followers' time to
	// apply a fetch answer (append it), FollowerGapMax the longest gap
	// from one of their fetch rounds to the next request, over all
	// brokers (tidemark_broker_replica_fetch_seconds, phases apply and
	// between): a stall of acks=all writes in a follower's own loop.
	FollowerApplyP99 float64 `json:"follower_apply_p99_s"`
	FollowerApplyMax float64 `json:"follower_apply_max_s"`
	FollowerGapMax   float64 `json:"follower_gap_max_s"`
}

// maxMetricsBytes bounds what one scrape of a broker's /metrics reads.
const maxMetricsBytes = 16 << 20

// slowAppend is where a segment write counts as stalled: a page-cache
// write takes microseconds, and 10 ms is half the paced rows' goal.
const slowAppend = 10e-3

// The brokers' histograms a Tail (and a SyncSplit) is read from.
const (
	produceLatency  = "tidemark_broker_produce_latency_seconds"
	appendToHW      = "tidemark_broker_append_to_hw_seconds"
	appendWrite     = "tidemark_log_append_write_seconds"
	checkpointWrite = "tidemark_log_checkpoint_write_seconds"
	replicaFetch    = "tidemark_broker_replica_fetch_seconds"
	fetchLatency    = "tidemark_broker_fetch_latency_seconds"
)

// brokerHistograms are the histograms a Tail needs, summed over brokers.
type brokerHistograms struct {
	produce, toHW, appends, checkpoints histogram
	// apply and gap: the followers' fetch rounds (replicaFetch).
	apply, gap histogram
}

// plus is h and o summed histogram by histogram.
func (h brokerHistograms) plus(o brokerHistograms) brokerHistograms {
	return brokerHistograms{produce: h.produce.plus(o.produce), toHW: h.toHW.plus(o.toHW), appends: h.appends.plus(o.appends),
		checkpoints: h.checkpoints.plus(o.checkpoints), apply: h.apply.plus(o.apply), gap: h.gap.plus(o.gap)}
}

// minus is h less an earlier reading of the same brokers.
func (h brokerHistograms) minus(before brokerHistograms) brokerHistograms {
	return brokerHistograms{produce: h.produce.minus(before.produce), toHW: h.toHW.minus(before.toHW), appends: h.appends.minus(before.appends),
		checkpoints: h.checkpoints.minus(before.checkpoints), apply: h.apply.minus(before.apply), gap: h.gap.minus(before.gap)}
}

// scrapeBrokers reads every broker's /metrics (plain HTTP on loopback, as
// `tidemark dev` serves it) and sums the histograms over them.
func scrapeBrokers(ctx context.Context, addrs []string) (brokerHistograms, error) {
	var sum brokerHistograms
	for _, addr := range addrs {
		h, err := scrapeBroker(ctx, addr)
		if err != nil {
			return brokerHistograms{}, err
		}
		sum = sum.plus(h)
	}
	return sum, nil
}

// metricsBody is a broker's /metrics, at most maxMetricsBytes of it.
func metricsBody(ctx context.Context, addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", addr, err)
	}
	return body, nil
}

func scrapeBroker(ctx context.Context, addr string) (brokerHistograms, error) {
	body, err := metricsBody(ctx, addr)
	if err != nil {
		return brokerHistograms{}, err
	}
	hs, err := parseHistograms(bytes.NewReader(body), map[string]map[string]string{
		produceLatency: {"acks": "-1"}, appendToHW: nil, appendWrite: nil, checkpointWrite: nil, replicaFetch: {"phase": "apply"},
	})
	if err != nil {
		return brokerHistograms{}, fmt.Errorf("metrics of %s: %w", addr, err)
	}
	// One histogram name, two phases: a second pass for the other.
	gaps, err := parseHistograms(bytes.NewReader(body), map[string]map[string]string{replicaFetch: {"phase": "between"}})
	if err != nil {
		return brokerHistograms{}, fmt.Errorf("metrics of %s: %w", addr, err)
	}
	return brokerHistograms{produce: hs[produceLatency], toHW: hs[appendToHW], appends: hs[appendWrite], checkpoints: hs[checkpointWrite],
		apply: hs[replicaFetch], gap: gaps[replicaFetch]}, nil
}

// tailOf is the run's Tail: the histograms after it minus those before.
func tailOf(before, after brokerHistograms) *Tail {
	d := after.minus(before)
	return &Tail{
		Produces: d.produce.count(), ProduceP99: d.produce.quantile(0.99), ProduceMax: d.produce.max(),
		AppendToHWP99: d.toHW.quantile(0.99), AppendToHWMax: d.toHW.max(),
		Appends: d.appends.count(), SlowAppends: d.appends.over(slowAppend), AppendMax: d.appends.max(),
		Checkpoints: d.checkpoints.count(), CheckpointMax: d.checkpoints.max(),
		FollowerApplyP99: d.apply.quantile(0.99), FollowerApplyMax: d.apply.max(), FollowerGapMax: d.gap.max(),
	}
}

// histogram is a Prometheus histogram's cumulative bucket counts by upper
// bound, ascending (+Inf last), summed over the series it was read from.
type histogram struct {
	bounds []float64
	counts []float64
	// sum is the observations' total (the series' _sum), for means.
	sum float64
}

// parseHistograms reads, from Prometheus text exposition, each named
// histogram's buckets, summed over the series whose labels include every
// label of its matcher (nil: all series). A histogram absent from r is
// empty: a broker has no series of a labelled histogram until it observes.
func parseHistograms(r io.Reader, want map[string]map[string]string) (map[string]histogram, error) {
	byBound := map[string]map[float64]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sums := map[string]float64{}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if name, v, ok, err := sumLine(line, want); err != nil {
			return nil, err
		} else if ok {
			sums[name] += v
			continue
		}
		name, rest, ok := strings.Cut(line, "_bucket{")
		if !ok {
			continue
		}
		match, ok := want[name]
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		labels, err := parseLabels(rest[:end])
		if err != nil {
			return nil, fmt.Errorf("%w in %q", err, line)
		}
		if !labelsMatch(labels, match) {
			continue
		}
		le, err := strconv.ParseFloat(labels["le"], 64)
		if err != nil {
			return nil, fmt.Errorf("bucket bound in %q: %w", line, err)
		}
		fields := strings.Fields(rest[end+1:])
		if len(fields) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("value in %q: %w", line, err)
		}
		if byBound[name] == nil {
			byBound[name] = map[float64]float64{}
		}
		byBound[name][le] += v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := map[string]histogram{}
	for name, m := range byBound {
		var h histogram
		for le := range m {
			h.bounds = append(h.bounds, le)
		}
		slices.Sort(h.bounds)
		for _, le := range h.bounds {
			h.counts = append(h.counts, m[le])
		}
		h.sum = sums[name]
		out[name] = h
	}
	return out, nil
}

// sumLine reads a `<name>_sum{labels} v` (or unlabelled) line of one of
// the wanted histograms whose labels match; ok is false for other lines.
func sumLine(line string, want map[string]map[string]string) (name string, v float64, ok bool, err error) {
	metric, value, found := strings.Cut(line, " ")
	if !found {
		return "", 0, false, nil
	}
	labelText := ""
	if i := strings.IndexByte(metric, '{'); i >= 0 {
		// A label value may hold a space: the value follows the last '}'.
		end := strings.LastIndexByte(line, '}')
		if end < i {
			return "", 0, false, fmt.Errorf("malformed line %q", line)
		}
		metric, labelText, value = line[:i], line[i+1:end], line[end+1:]
	}
	name, isSum := strings.CutSuffix(metric, "_sum")
	match, wanted := want[name]
	if !isSum || !wanted {
		return "", 0, false, nil
	}
	labels, err := parseLabels(labelText)
	if err != nil {
		return "", 0, false, fmt.Errorf("%w in %q", err, line)
	}
	if !labelsMatch(labels, match) {
		return "", 0, false, nil
	}
	fields := strings.Fields(value)
	if len(fields) == 0 {
		return "", 0, false, fmt.Errorf("no value in %q", line)
	}
	if v, err = strconv.ParseFloat(fields[0], 64); err != nil {
		return "", 0, false, fmt.Errorf("value in %q: %w", line, err)
	}
	return name, v, true, nil
}

// parseLabels reads `k="v",k2="v2"` with the exposition format's escapes.
func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, `="`)
		if !ok {
			return nil, fmt.Errorf("malformed labels")
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, fmt.Errorf("unterminated label value")
		}
		labels[strings.TrimSpace(k)] = v.String()
		s = strings.TrimPrefix(rest[i+1:], ",")
	}
	return labels, nil
}

func labelsMatch(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// plus is h and o summed bucket by bucket; an empty one takes the other's
// bounds. Two brokers have the same bounds: they run the same build.
func (h histogram) plus(o histogram) histogram {
	switch {
	case len(o.bounds) == 0:
		return h
	case len(h.bounds) == 0:
		return o
	}
	return h.combine(o, 1)
}

// minus is h less an earlier reading of the same series.
func (h histogram) minus(before histogram) histogram {
	if len(before.bounds) == 0 {
		return h
	}
	return h.combine(before, -1)
}

func (h histogram) combine(o histogram, sign float64) histogram {
	out := histogram{bounds: slices.Clone(h.bounds), counts: slices.Clone(h.counts), sum: h.sum + sign*o.sum}
	for i, le := range o.bounds {
		if j, ok := slices.BinarySearch(out.bounds, le); ok {
			out.counts[j] += sign * o.counts[i]
		}
	}
	return out
}

// count is how many observations h holds (its +Inf bucket).
func (h histogram) count() int64 {
	if len(h.counts) == 0 {
		return 0
	}
	return int64(h.counts[len(h.counts)-1])
}

// quantile is the upper bound of the bucket that holds the q-quantile, 0
// when h is empty.
func (h histogram) quantile(q float64) float64 {
	n := float64(h.count())
	if n == 0 {
		return 0
	}
	for i, c := range h.counts {
		if c >= q*n {
			return h.bounds[i]
		}
	}
	return math.Inf(1)
}

// mean is the observations' average, 0 when h is empty.
func (h histogram) mean() float64 {
	if n := h.count(); n > 0 {
		return h.sum / float64(n)
	}
	return 0
}

// max is the upper bound of the highest bucket with an observation.
func (h histogram) max() float64 { return h.quantile(1) }

// over counts the observations above x, exactly when x is one of h's
// bounds (else above the highest bound under x).
func (h histogram) over(x float64) int64 {
	within := 0.0
	for i, le := range h.bounds {
		if le <= x {
			within = h.counts[i]
		}
	}
	return h.count() - int64(within)
}
