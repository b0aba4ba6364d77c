package benchcmp

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

// orderedSide records, in one list shared with the other system, which
// system ran which shape, and reports its own rate per shape.
type orderedSide struct {
	name string
	rate map[string]float64
	log  *[]string
	fail string // a shape whose runs fail
}

func (s *orderedSide) start(context.Context) error { return nil }
func (s *orderedSide) serverPIDs() []int           { return []int{os.Getpid()} }
func (s *orderedSide) stop()                       {}
func (s *orderedSide) run(_ context.Context, sh Shape) Figure {
	*s.log = append(*s.log, s.name+":"+sh.Name)
	if sh.Name == s.fail {
		return Figure{Err: "refused"}
	}
	return Figure{MsgsPerSec: s.rate[sh.Name], Rate: sh.Rate}
}

// With two systems, each shape's runs alternate between them, the first
// system first in one round and last in the next, before the next shape
// starts; each system's median and pace are its own, and a system whose
// run fails stops running that shape while the other goes on.
func TestTheSystemsRunsOfAShapeAlternate(t *testing.T) {
	res := &Result{Interleaved: true, EachRun: true}
	for _, s := range []Shape{
		{Name: "sync1-128", Mode: Sync, Size: 128, Records: 10, Runs: 3},
		{Name: "batch-1k", Mode: Batch, Size: 1024, Records: 10, Runs: 2},
		{Name: "paced-1k", Mode: Paced, Size: 1024, PaceOf: "batch-1k", Fraction: 0.5, Seconds: 2, Runs: 1},
	} {
		res.Rows = append(res.Rows, Row{Shape: s})
	}
	var log []string
	tm := &orderedSide{name: "t", rate: map[string]float64{"sync1-128": 3000, "batch-1k": 80000, "paced-1k": 40000}, log: &log}
	js := &orderedSide{name: "j", rate: map[string]float64{"sync1-128": 1500, "batch-1k": 30000}, log: &log, fail: "paced-1k"}
	var rssT, rssJ int64
	err := measure(context.Background(), io.Discard, t.TempDir(), res, 0, []*system{
		{name: "tidemark", mk: func(string, *os.File) (side, error) { return tm, nil }, figure: func(r *Row) *Figure { return &r.Tidemark }, peakRSS: &rssT},
		{name: "jetstream", mk: func(string, *os.File) (side, error) { return js, nil }, figure: func(r *Row) *Figure { return &r.JetStream }, peakRSS: &rssJ},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "t:warmup j:warmup " +
		"t:sync1-128 j:sync1-128 j:sync1-128 t:sync1-128 t:sync1-128 j:sync1-128 " +
		"t:batch-1k j:batch-1k j:batch-1k t:batch-1k " +
		"t:paced-1k j:paced-1k"
	if got := strings.Join(log, " "); got != want {
		t.Fatalf("runs in the order\n%s\nwant\n%s", got, want)
	}
	r := res.Rows
	if r[0].Tidemark.MsgsPerSec != 3000 || r[0].Tidemark.Runs != 3 || r[0].JetStream.MsgsPerSec != 1500 || r[0].JetStream.Runs != 3 {
		t.Fatalf("sync figures: %+v / %+v", r[0].Tidemark, r[0].JetStream)
	}
	if r[2].Tidemark.Rate != 40000 || r[2].JetStream.Err != "refused" {
		t.Fatalf("paced figures: %+v / %+v: want tidemark paced at half its own 80000/s and JetStream's failure", r[2].Tidemark, r[2].JetStream)
	}
	// Each system's servers (this process, for both) were read while the
	// other ran.
	if _, ok := res.IdleCPU["tidemark"]; !ok || len(res.IdleCPU) != 2 {
		t.Fatalf("idle CPU of the systems: %v", res.IdleCPU)
	}
	md := res.Markdown()
	for _, said := range []string{"Idle, tidemark's 3 brokers used", "and JetStream's 3 nats-servers", "the runs of each shape alternate between them", "Before each run of either system", "median of 3 runs of each system, alternating with the other system's"} {
		if !strings.Contains(md, said) {
			t.Errorf("the report does not say %q:\n%s", said, md)
		}
	}
}
