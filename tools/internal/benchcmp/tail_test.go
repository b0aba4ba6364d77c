package benchcmp

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
)

// fakeBroker serves a registry with histograms of the brokers' names and
// buckets, in the real exposition format.
type fakeBroker struct {
	srv         *httptest.Server
	produce     *prometheus.HistogramVec
	toHW        prometheus.Histogram
	appends     prometheus.Histogram
	checkpoints *prometheus.HistogramVec
	fetch       *prometheus.HistogramVec
}

func newFakeBroker(t *testing.T) *fakeBroker {
	latency := []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	disk := []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5}
	b := &fakeBroker{
		produce:     prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: produceLatency, Buckets: latency}, []string{"acks"}),
		toHW:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: appendToHW, Buckets: latency}),
		appends:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: appendWrite, Buckets: disk}),
		checkpoints: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: checkpointWrite, Buckets: disk}, []string{"file"}),
		fetch:       prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: replicaFetch, Buckets: latency}, []string{"phase"}),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.produce, b.toHW, b.appends, b.checkpoints, b.fetch)
	b.srv = httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *fakeBroker) addr() string { return strings.TrimPrefix(b.srv.URL, "http://") }

func observe(o prometheus.Observer, seconds float64, n int) {
	for range n {
		o.Observe(seconds)
	}
}

// A run's Tail is the histograms after it less those before, summed over
// the brokers: acks=1 produces, observations before the run and the
// exact bucket edge stay out of it.
func TestTailIsTheRunsShareOfEveryBroker(t *testing.T) {
	leader, follower := newFakeBroker(t), newFakeBroker(t)
	// Before the run: a slow acks=all produce, a slow append, a slow
	// checkpoint, none of which is the run's. The produce histogram of the
	// follower has no series yet.
	observe(leader.produce.WithLabelValues("-1"), 0.2, 1)
	observe(leader.appends, 0.3, 1)
	observe(follower.checkpoints.WithLabelValues("replication-offset-checkpoint"), 0.4, 1)

	var buf bytes.Buffer
	f := withTail(context.Background(), []string{leader.addr(), follower.addr()}, &buf, func() Figure {
		observe(leader.produce.WithLabelValues("-1"), 0.0004, 98) // bucket 0.5 ms
		observe(leader.produce.WithLabelValues("-1"), 0.04, 2)    // bucket 50 ms
		observe(leader.produce.WithLabelValues("1"), 2, 50)       // acks=1: not counted
		observe(leader.toHW, 0.0008, 99)
		observe(leader.toHW, 0.02, 1)
		observe(leader.appends, 40e-6, 100)
		observe(leader.appends, 0.12, 1)    // over 10 ms
		observe(follower.appends, 0.008, 1) // not
		observe(follower.appends, 0.01, 1)  // on the edge: not over
		observe(follower.appends, 0.011, 1) // over
		observe(follower.checkpoints.WithLabelValues("recovery-point-offset-checkpoint"), 0.003, 2)
		observe(follower.fetch.WithLabelValues("apply"), 0.0003, 99) // bucket 0.5 ms
		observe(follower.fetch.WithLabelValues("apply"), 0.07, 1)    // bucket 100 ms
		observe(follower.fetch.WithLabelValues("between"), 0.00008, 50)
		observe(follower.fetch.WithLabelValues("between"), 0.2, 1)     // bucket 250 ms
		observe(follower.fetch.WithLabelValues("round_trip"), 0.5, 10) // idle long polls: not a phase the Tail reads
		return Figure{MsgsPerSec: 100}
	})
	if buf.Len() > 0 {
		t.Fatalf("scrapes failed: %s", buf.String())
	}
	want := Tail{Produces: 100, ProduceP99: 0.05, ProduceMax: 0.05, AppendToHWP99: 0.001, AppendToHWMax: 0.025,
		Appends: 104, SlowAppends: 2, AppendMax: 0.25, Checkpoints: 2, CheckpointMax: 5e-3,
		FollowerApplyP99: 0.0005, FollowerApplyMax: 0.1, FollowerGapMax: 0.25}
	if f.Tail == nil || *f.Tail != want {
		t.Fatalf("tail %+v, want %+v", f.Tail, want)
	}
}

// A broker that cannot be scraped leaves the Tail out, says why, and the
// figure stands; so does a run without a figure.
func TestTailLeftOutWhenABrokerIsGone(t *testing.T) {
	b := newFakeBroker(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	var buf bytes.Buffer
	f := withTail(context.Background(), []string{b.addr(), strings.TrimPrefix(gone.URL, "http://")}, &buf, func() Figure { return Figure{MsgsPerSec: 7} })
	if f.Tail != nil || f.MsgsPerSec != 7 {
		t.Fatalf("figure %+v", f)
	}
	if !strings.Contains(buf.String(), "histograms around a paced run") {
		t.Fatalf("log %q", buf.String())
	}
	f = withTail(context.Background(), []string{b.addr()}, &buf, func() Figure { return Figure{Err: "broke"} })
	if f.Tail != nil {
		t.Fatalf("a failed run has no tail: %+v", f.Tail)
	}
}

func TestParseHistogramsRefusesMalformedLines(t *testing.T) {
	want := map[string]map[string]string{appendWrite: nil}
	for _, in := range []string{
		appendWrite + `_bucket{le="0.1" 3`,
		appendWrite + `_bucket{le="x"} 3`,
		appendWrite + `_bucket{le="0.1"}`,
		appendWrite + `_bucket{le="0.1"} many`,
		appendWrite + `_bucket{le="0.1} 3`,
	} {
		if _, err := parseHistograms(strings.NewReader(in+"\n"), want); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	hs, err := parseHistograms(strings.NewReader(`# HELP x_bucket{ a comment
other_bucket{le="+Inf"} 9
`+appendWrite+`_bucket{file="a\"b,c",le="0.1"} 3
`+appendWrite+`_bucket{file="a\"b,c",le="+Inf"} 4
`), want)
	if err != nil {
		t.Fatal(err)
	}
	h := hs[appendWrite]
	if h.count() != 4 || h.over(0.1) != 1 || len(hs) != 1 {
		t.Fatalf("%+v", hs)
	}
}

// The harness reads the histograms a real broker serves, under the names
// and labels it serves them with: a renamed metric fails here rather than
// leave the table empty.
func TestTailFromARealCluster(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Adjust: func(cfg *broker.Config) { cfg.Telemetry.MetricsListen = "127.0.0.1:0" }})
	c.CreateTopic("tail", 1, 3, map[string]string{"min.insync.replicas": "2"})
	var addrs []string
	for id := int32(1); id <= 3; id++ {
		addrs = append(addrs, c.Broker(id).MetricsAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var log bytes.Buffer
	const writes = 20
	f := withTail(ctx, addrs, &log, func() Figure {
		for i := range writes {
			if _, err := c.Produce(ctx, "tail", 0, -1, "v"); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		return Figure{MsgsPerSec: 1}
	})
	tl := f.Tail
	if tl == nil {
		t.Fatalf("no tail: %s", log.String())
	}
	if tl.Produces != writes || tl.ProduceP99 <= 0 || tl.ProduceMax < tl.ProduceP99 {
		t.Errorf("leader produces: %+v", tl)
	}
	if tl.AppendToHWP99 <= 0 || tl.AppendToHWMax < tl.AppendToHWP99 {
		t.Errorf("append → HW: %+v", tl)
	}
	// The leader appends each write; each follower at least once.
	if tl.Appends < writes+2 || tl.AppendMax <= 0 {
		t.Errorf("segment writes: %+v", tl)
	}
	// Both followers applied the writes' fetch answers and fetched again.
	if tl.FollowerApplyMax <= 0 || tl.FollowerApplyP99 <= 0 || tl.FollowerGapMax <= 0 {
		t.Errorf("followers' fetch rounds: %+v", tl)
	}
}

// The report puts each paced row's Tail beside the client's p99; rows
// without one (other shapes, a failed run) are left out.
func TestTailTableBesideTheClientsP99(t *testing.T) {
	r := &Result{Rows: []Row{
		{Shape: Shape{Mode: Sync, Size: 128, Producers: 1}, Tidemark: Figure{MsgsPerSec: 2000}},
		{Shape: Shape{Mode: Paced, Size: 1024, Fraction: 0.5}, Tidemark: Figure{MsgsPerSec: 100, P99: 21500 * time.Microsecond, HandoverP99: 120 * time.Microsecond,
			Batches: &Batches{Sent: 3100, SlotWaits: 42, QueueAvg: 2 * time.Millisecond, QueueMax: 61500 * time.Microsecond},
			Tail: &Tail{Produces: 3100, ProduceP99: 0.005, ProduceMax: 0.25, AppendToHWP99: 0.002, AppendToHWMax: 0.1,
				Appends: 9000, SlowAppends: 3, AppendMax: 0.25, Checkpoints: 12, CheckpointMax: 1,
				FollowerApplyP99: 0.001, FollowerApplyMax: 0.05, FollowerGapMax: 0.0005}}},
		{Shape: Shape{Mode: EndToEnd, Size: 1024, Fraction: 0.5}, Tidemark: Figure{Err: "broke", Tail: &Tail{Produces: 1}}},
	}}
	md := r.Markdown()
	requireLines(t, md,
		"| batching producer at half peak, 1 KiB (ack latency) | 21.50 ms | 0.12 ms | 42 of 3100; 61.50 ms | 3100: ≤ 5 ms / ≤ 250 ms | ≤ 2 ms / ≤ 100 ms | ≤ 1 ms / ≤ 50 ms; ≤ 0.5 ms | 9000: 3, ≤ 250 ms | 12: ≤ 1 s |")
	if strings.Count(md, "| 3100: ") != 1 || strings.Contains(md, "| 1: ") {
		t.Errorf("only the paced row with a figure has a tail line:\n%s", md)
	}
	for s, want := range map[float64]string{0: "–", 50e-6: "≤ 0.05 ms", 2.5e-3: "≤ 2.5 ms", 0.1: "≤ 100 ms", 2.5: "≤ 2.5 s"} {
		if got := bound(s); got != want {
			t.Errorf("bound(%g) = %q, want %q", s, got, want)
		}
	}
	if got := bound(math.Inf(1)); got != "beyond the last bucket" {
		t.Errorf("bound(+Inf) = %q", got)
	}
}

// A paced run's figure carries the client's handed-late p99 beside its
// acknowledgement or end-to-end latency, read from perf e2e's third line.
func TestParseTidemarkHandedOverAndBatches(t *testing.T) {
	out := `180000 records sent, 29886.3 records/s (29.19 MB/s), 7.31 ms avg ack latency, 103.59 ms max, 4.15 ms p50, 22.06 ms p95, 75.02 ms p99, 100.25 ms p99.9
180000 records consumed, 29886.3 records/s (29.19 MB/s), 7.87 ms avg end-to-end latency, 103.92 ms max, 4.46 ms p50, 22.84 ms p95, 77.90 ms p99, 100.73 ms p99.9
180000 records handed to the producer, 29886.3 records/s (29.19 MB/s), 0.02 ms avg delay past schedule, 40.10 ms max, 0.01 ms p50, 0.03 ms p95, 0.31 ms p99, 12.00 ms p99.9
3012 batches sent, 97 waited for a request slot (max.in.flight 5), 3.41 ms avg record queue time, 88.20 ms max
`
	sent, err := ParseTidemarkSent(out)
	if err != nil || sent.P99 != 75020*time.Microsecond {
		t.Fatalf("sent: %+v %v", sent, err)
	}
	h, err := parseTidemark(out, "handed to the producer")
	if err != nil || h.P99 != 310*time.Microsecond || h.Records != 180000 {
		t.Fatalf("handed over: %+v %v", h, err)
	}
	want := Batches{Sent: 3012, SlotWaits: 97, QueueAvg: 3410 * time.Microsecond, QueueMax: 88200 * time.Microsecond}
	if b := parseBatches(out); b == nil || *b != want {
		t.Fatalf("batches %+v, want %+v", b, want)
	}
	if b := parseBatches("180000 records sent, 1 records/s"); b != nil {
		t.Fatalf("no batches line: %+v", b)
	}
}
