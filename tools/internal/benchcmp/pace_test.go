package benchcmp

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

func (f *fakeSide) serverPIDs() []int { return []int{os.Getpid()} }

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
	var rss int64
	err := measure(context.Background(), io.Discard, "fake", t.TempDir(), res, 0,
		func(string, *os.File) (side, error) { return fake, nil },
		func(r *Row) *Figure { return &r.Tidemark }, nil, &rss)
	if err != nil {
		t.Fatal(err)
	}
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
