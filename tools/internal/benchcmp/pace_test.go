package benchcmp

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

func (f *fakeSide) serverPIDs() []int { return []int{os.Getpid()} }

// measureTidemark measures res's shapes on sd as the tidemark side and
// returns the peak RSS it read.
func measureTidemark(t *testing.T, res *Result, sd side) int64 {
	t.Helper()
	var rss int64
	err := measure(context.Background(), io.Discard, t.TempDir(), res, 0, []*system{{name: "fake",
		mk:     func(string, *os.File) (side, error) { return sd, nil },
		figure: func(r *Row) *Figure { return &r.Tidemark }, peakRSS: &rss}})
	if err != nil {
		t.Fatal(err)
	}
	return rss
}

// fakeSide reports a fixed rate per shape and remembers what it ran.
type fakeSide struct {
	rate map[string]float64
	ran  []Shape
}

func (f *fakeSide) start(context.Context) error { return nil }
func (f *fakeSide) stop()                       {}
func (f *fakeSide) run(_ context.Context, s Shape) Figure {
	f.ran = append(f.ran, s)
	if s.Name == "warmup" {
		return Figure{MsgsPerSec: 1}
	}
	return Figure{MsgsPerSec: f.rate[s.Name]}
}

// A paced shape runs at its fraction of the same system's rate in the
// shape it names, for its seconds; without that rate it is not run.
func TestPacedShapesFollowTheSystemsOwnPeak(t *testing.T) {
	shapes := []Shape{
		{Name: "batch-1k", Mode: Batch, Size: 1024, Records: 100},
		{Name: "e2e-1k", Mode: EndToEnd, Size: 1024, PaceOf: "batch-1k", Fraction: 0.5, Seconds: 4},
		{Name: "e2e-none", Mode: EndToEnd, Size: 1024, PaceOf: "missing", Fraction: 0.5, Seconds: 4},
	}
	res := &Result{}
	for _, s := range shapes {
		res.Rows = append(res.Rows, Row{Shape: s})
	}
	fake := &fakeSide{rate: map[string]float64{"batch-1k": 3000, "e2e-1k": 1500}}
	rss := measureTidemark(t, res, fake)
	// The fake's "server" is this test process: its peak RSS is read.
	if rss < 1<<20 {
		t.Fatalf("peak RSS of the side's server processes read as %d bytes", rss)
	}
	var paced *Shape
	for i, s := range fake.ran {
		if s.Name == "e2e-none" {
			t.Fatal("a shape with no rate to pace from was run")
		}
		if s.Name == "e2e-1k" {
			paced = &fake.ran[i]
		}
	}
	if paced == nil || paced.Rate != 1500 || paced.Records != 6000 {
		t.Fatalf("paced shape ran as %+v, want rate 1500/s and 6000 records", paced)
	}
	if res.Rows[1].Tidemark.Rate != 1500 || res.Rows[2].Tidemark.Err == "" {
		t.Fatalf("figures: %+v, %+v", res.Rows[1].Tidemark, res.Rows[2].Tidemark)
	}
}

func TestSelectShapesKeepsOrderAndNamesWhatIsMissing(t *testing.T) {
	all := DefaultShapes(1, DefaultInFlight)
	got, err := SelectShapes(all, []string{"sync1-1k", "sync1-128"})
	if err != nil || len(got) != 2 || got[0].Name != "sync1-128" || got[1].Name != "sync1-1k" {
		t.Fatalf("SelectShapes: %v %v", got, err)
	}
	if _, err := SelectShapes(all, []string{"paced-1k"}); err == nil || !strings.Contains(err.Error(), "paced-1k needs batch-1k") {
		t.Fatalf("a paced shape without the one it paces: %v", err)
	}
	if _, err := SelectShapes(all, []string{"sync1-128", "nope"}); err == nil || !strings.Contains(err.Error(), "no shape named nope") {
		t.Fatalf("an unknown shape: %v", err)
	}
}

// seqSide returns the figures it is given, one per run, in order.
type seqSide struct {
	figs []Figure
	runs int
}

func (f *seqSide) start(context.Context) error { return nil }
func (f *seqSide) stop()                       {}
func (f *seqSide) run(_ context.Context, s Shape) Figure {
	if s.Name == "warmup" {
		return Figure{MsgsPerSec: 1}
	}
	f.runs++
	return f.figs[(f.runs-1)%len(f.figs)]
}

// A shape with Runs runs that many times; its figure is the median run by
// throughput (with that run's latencies) and the spread; a failed run is
// what the row reports.
func TestRepeatedShapesGiveTheMedianRun(t *testing.T) {
	measureOne := func(fake *seqSide, runs int) Figure {
		t.Helper()
		res := &Result{Rows: []Row{{Shape: Shape{Name: "sync1-128", Mode: Sync, Size: 128, Records: 10, Runs: runs}}}}
		measureTidemark(t, res, fake)
		return res.Rows[0].Tidemark
	}
	three := &seqSide{figs: []Figure{{MsgsPerSec: 900, P99: 9}, {MsgsPerSec: 2000, P99: 1}, {MsgsPerSec: 1500, P99: 4}}}
	f := measureOne(three, 3)
	if three.runs != 3 || f.MsgsPerSec != 1500 || f.P99 != 4 || f.Runs != 3 || f.MinMsgsPerSec != 900 || f.MaxMsgsPerSec != 2000 {
		t.Fatalf("%d runs gave %+v, want the 1500/s run of 900-2000", three.runs, f)
	}
	failing := &seqSide{figs: []Figure{{MsgsPerSec: 900}, {Err: "broke"}}}
	if f := measureOne(failing, 3); f.Err != "broke" || failing.runs != 2 {
		t.Fatalf("a failed run: %+v after %d runs", f, failing.runs)
	}
	once := &seqSide{figs: []Figure{{MsgsPerSec: 700}}}
	if f := measureOne(once, 0); once.runs != 1 || f.MsgsPerSec != 700 || f.Runs != 0 {
		t.Fatalf("no Runs: %+v after %d runs", f, once.runs)
	}
	md := (&Result{Rows: []Row{{Shape: Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1},
		Tidemark:  Figure{MsgsPerSec: 1500, Runs: 3, MinMsgsPerSec: 900, MaxMsgsPerSec: 2000},
		JetStream: Figure{MsgsPerSec: 1000, Runs: 3, MinMsgsPerSec: 950, MaxMsgsPerSec: 1100}},
		{Shape: Shape{Name: "batch-1k-acks1", Mode: Batch, Size: 1024, Producers: 1, LeaderAcks: true},
			Tidemark: Figure{MsgsPerSec: 70, Runs: 3, MinMsgsPerSec: 60, MaxMsgsPerSec: 80}, JetStream: Figure{Runs: 3}}}}).Markdown()
	if !strings.Contains(md, "the median of 3 runs") || !strings.Contains(md, "tidemark 900–2000 JetStream 950–1100") ||
		!strings.Contains(md, "acks=1: tidemark 60–80;") && !strings.Contains(md, "acks=1: tidemark 60–80.") || strings.Contains(md, "JetStream 0–0") {
		t.Fatalf("markdown does not say the rows are medians:\n%s", md)
	}
}

// A paced shape's figure is the run with the median p99: its throughput
// is the pace.
func TestPacedShapesGiveTheMedianP99(t *testing.T) {
	res := &Result{Rows: []Row{{Shape: Shape{Name: "batch-1k", Mode: Batch, Size: 1024, Records: 10}},
		{Shape: Shape{Name: "paced-1k", Mode: Paced, Size: 1024, PaceOf: "batch-1k", Fraction: 0.5, Seconds: 1, Runs: 3}}}}
	fake := &seqSide{figs: []Figure{{MsgsPerSec: 100},
		{MsgsPerSec: 50, P99: 69}, {MsgsPerSec: 51, P99: 9}, {MsgsPerSec: 49, P99: 12}}}
	measureTidemark(t, res, fake)
	if f := res.Rows[1].Tidemark; f.P99 != 12 || f.Runs != 3 || f.Rate != 50 {
		t.Fatalf("paced figure %+v, want the run with p99 12 of 3, paced at 50/s", f)
	}
}
