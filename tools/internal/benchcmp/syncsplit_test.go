package benchcmp

import (
	"bytes"
	"context"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
)

// splitBroker serves the histograms a SyncSplit reads, under the brokers'
// names, labels and buckets, in the real exposition format.
type splitBroker struct {
	addr    string
	produce *prometheus.HistogramVec
	toHW    prometheus.Histogram
	fetch   *prometheus.HistogramVec // the leader's time on fetches, by kind
	rounds  *prometheus.HistogramVec // the follower's rounds, by phase and leader
}

func newSplitBroker(t *testing.T) *splitBroker {
	latency := []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	b := &splitBroker{
		produce: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: produceLatency, Buckets: latency}, []string{"acks"}),
		toHW:    prometheus.NewHistogram(prometheus.HistogramOpts{Name: appendToHW, Buckets: latency}),
		fetch:   prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: fetchLatency, Buckets: latency}, []string{"kind"}),
		rounds:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: replicaFetch, Buckets: latency}, []string{"phase", "leader"}),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.produce, b.toHW, b.fetch, b.rounds)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	b.addr = strings.TrimPrefix(srv.URL, "http://")
	return b
}

// A run's split is the leader's histograms and its followers' rounds
// against it, the run's share only. The fetch that sat parked through the
// idle moment before the run counts its wait at both ends and so not in
// the hops; the followers' idle long polls against another leader (an
// earlier shape's topic) and acks=1 produces stay out of it.
func TestSplitIsTheLeadersFetchesLessTheirHops(t *testing.T) {
	b1, b2, b3 := newSplitBroker(t), newSplitBroker(t), newSplitBroker(t)
	// Before the run: writes and rounds that are not the run's.
	observe(b2.produce.WithLabelValues("-1"), 0.3, 5)
	observe(b2.fetch.WithLabelValues("follower"), 0.5, 4)
	observe(b1.rounds.WithLabelValues("round_trip", "2"), 0.7, 2)

	var log bytes.Buffer
	ctx := context.Background()
	split := splitAround(ctx, []string{b1.addr, b2.addr, b3.addr}, []string{"1", "2", "3"}, &log)
	if split == nil {
		t.Fatalf("no first reading: %s", log.String())
	}
	// The run: broker 2 leads. 90 acks=all produces of 400 µs, 300 µs of
	// it waiting for the followers; acks=1 ones are no part of it.
	observe(b2.produce.WithLabelValues("-1"), 400e-6, 90)
	observe(b2.produce.WithLabelValues("1"), 2, 10)
	observe(b2.toHW, 300e-6, 90)
	// 60 fetches answered, 30 of each follower: 58 of 100 µs, and the
	// first of each follower parked 0.4 s through the idle moment before.
	observe(b2.fetch.WithLabelValues("follower"), 100e-6, 58)
	observe(b2.fetch.WithLabelValues("follower"), 0.4, 2)
	// The followers see each of those 160 µs longer: the hops.
	for _, f := range []*splitBroker{b1, b3} {
		observe(f.rounds.WithLabelValues("round_trip", "2"), 260e-6, 29)
		observe(f.rounds.WithLabelValues("round_trip", "2"), 0.4+160e-6, 1)
		observe(f.rounds.WithLabelValues("apply", "2"), 20e-6, 30)
		observe(f.rounds.WithLabelValues("between", "2"), 4e-6, 29)
	}
	// Broker 1's idle long polls against broker 3, an earlier topic's leader.
	observe(b1.rounds.WithLabelValues("round_trip", "3"), 0.5, 3)
	observe(b1.rounds.WithLabelValues("apply", "3"), 0.01, 3)
	observe(b3.fetch.WithLabelValues("follower"), 0.5, 3)

	got := split()
	if got == nil {
		t.Fatalf("no split: %s", log.String())
	}
	want := SyncSplit{Produces: 90, Produce: 400e-6, AppendToHW: 300e-6, Followers: 2, Fetches: 60, Hops: 160e-6, Apply: 20e-6, Between: 4e-6}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if got.Produces != want.Produces || got.Followers != want.Followers || got.Fetches != want.Fetches ||
		!near(got.Produce, want.Produce) || !near(got.AppendToHW, want.AppendToHW) || !near(got.Hops, want.Hops) ||
		!near(got.Apply, want.Apply) || !near(got.Between, want.Between) {
		t.Fatalf("split %+v, want %+v", *got, want)
	}
	// A follower's round over a 0.9 s run of 30 rounds each: 30 ms.
	if r := got.round(900 * time.Millisecond); !near(r, 0.03) {
		t.Fatalf("round %v", r)
	}
}

// A run with no acks=all produce, or whose partition moved to another
// leader (two brokers answered produces), has no split; nor has one whose
// brokers cannot be read.
func TestSplitLeftOutWithoutOneLeader(t *testing.T) {
	b1, b2 := newSplitBroker(t), newSplitBroker(t)
	addrs, ids := []string{b1.addr, b2.addr}, []string{"1", "2"}
	var log bytes.Buffer
	ctx := context.Background()
	split := splitAround(ctx, addrs, ids, &log)
	if got := split(); got != nil {
		t.Fatalf("no produce, split %+v", *got)
	}
	split = splitAround(ctx, addrs, ids, &log)
	observe(b1.produce.WithLabelValues("-1"), 1e-3, 5)
	observe(b2.produce.WithLabelValues("-1"), 1e-3, 5)
	if got := split(); got != nil {
		t.Fatalf("two leaders, split %+v", *got)
	}
	if split := splitAround(ctx, []string{b1.addr, "127.0.0.1:1"}, ids, &log); split != nil {
		t.Fatal("a split begun with a broker unreadable")
	}
	if !strings.Contains(log.String(), "histograms before a synchronous run") {
		t.Fatalf("log %q", log.String())
	}
}

// The harness reads the histograms a real broker serves, under the names
// and labels it serves them with: the followers' rounds name their leader.
func TestSplitFromARealCluster(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Adjust: func(cfg *broker.Config) { cfg.Telemetry.MetricsListen = "127.0.0.1:0" }})
	c.CreateTopic("split", 1, 3, map[string]string{"min.insync.replicas": "2"})
	var addrs, ids []string
	for id := int32(1); id <= 3; id++ {
		addrs, ids = append(addrs, c.Broker(id).MetricsAddr()), append(ids, strconv.Itoa(int(id)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var log bytes.Buffer
	split := splitAround(ctx, addrs, ids, &log)
	const writes = 20
	for i := range writes {
		if _, err := c.Produce(ctx, "split", 0, -1, "v"); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	sp := split()
	if sp == nil {
		t.Fatalf("no split: %s", log.String())
	}
	// Each acks=all write needed both followers' fetches (min.insync.replicas
	// 2, ISR 3: the HW waits for the whole ISR).
	if sp.Produces != writes || sp.Followers != 2 || sp.Fetches < writes || sp.Produce <= 0 || sp.AppendToHW <= 0 || sp.AppendToHW > sp.Produce {
		t.Errorf("split %+v", *sp)
	}
	if sp.Hops <= 0 || sp.Apply <= 0 || sp.Between <= 0 {
		t.Errorf("followers' rounds: %+v", *sp)
	}
}

// The report splits each tidemark synchronous row's mean latency; rows
// without a split (other shapes, a failed run) are left out.
func TestSplitTableSplitsTheClientsMean(t *testing.T) {
	sp := &SyncSplit{Produces: 8000, Produce: 400e-6, AppendToHW: 390e-6, Followers: 2, Fetches: 5000, Hops: 160e-6, Apply: 12e-6, Between: 3e-6}
	r := &Result{Rows: []Row{
		// 8000 records at 10,000/s: a 0.8 s run, 2500 rounds a follower,
		// 320 µs each: 145 µs of it on the leader.
		{Shape: Shape{Mode: Sync, Size: 128, Producers: 8}, Tidemark: Figure{Records: 8000, MsgsPerSec: 10000, Mean: 700 * time.Microsecond, Split: sp}},
		{Shape: Shape{Mode: Sync, Size: 1024, Producers: 8}, Tidemark: Figure{Err: "broke", Split: sp}},
		{Shape: Shape{Mode: Batch, Size: 128, Producers: 1}, Tidemark: Figure{Records: 10, MsgsPerSec: 10}},
	}}
	md := r.Markdown()
	row := "| sync, 8 producers, 128 B | 700 | 300 | 400 | 390 (1.2 rounds) | 320 | 145 | 12 / 3 | 160 | 3.2 |"
	if !strings.Contains(md, row) {
		t.Fatalf("no row %q in:\n%s", row, md)
	}
	if strings.Count(md, "| sync, 8 producers, 1 KiB |") != 1 { // the main table's only
		t.Fatalf("a failed run's split is shown:\n%s", md)
	}
	if (&Result{Rows: r.Rows[2:]}).splitTable() != "" {
		t.Fatal("a table without synchronous rows")
	}
}

// splittingSide is a side whose runs a split is taken around, recording
// the order of events.
type splittingSide struct{ events []string }

func (s *splittingSide) start(context.Context) error { return nil }
func (s *splittingSide) stop()                       {}
func (s *splittingSide) run(context.Context, Shape) Figure {
	s.events = append(s.events, "run")
	return Figure{Records: 10, MsgsPerSec: 10}
}
func (s *splittingSide) splitAround(context.Context) func() *SyncSplit {
	s.events = append(s.events, "before")
	return func() *SyncSplit {
		s.events = append(s.events, "after")
		return &SyncSplit{Produces: 10}
	}
}

// Only synchronous runs are split, read before the run and after it.
func TestOnlySynchronousRunsAreSplit(t *testing.T) {
	sd := &splittingSide{}
	f := runMeasured(context.Background(), sd, Shape{Mode: Sync, Records: 10})
	if f.Split == nil || f.Split.Produces != 10 || strings.Join(sd.events, ",") != "before,run,after" {
		t.Fatalf("split %+v, events %v", f.Split, sd.events)
	}
	sd.events = nil
	if f := runMeasured(context.Background(), sd, Shape{Mode: Batch, Records: 10}); f.Split != nil || strings.Join(sd.events, ",") != "run" {
		t.Fatalf("a batching run split: %+v, events %v", f.Split, sd.events)
	}
}
