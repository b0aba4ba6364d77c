package benchcmp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSpreadMinMedianMax(t *testing.T) {
	for _, c := range []struct {
		in               []time.Duration
		min, median, max time.Duration
	}{
		{nil, 0, 0, 0},
		{[]time.Duration{7}, 7, 7, 7},
		{[]time.Duration{30, 10, 20}, 10, 20, 30},
		{[]time.Duration{40, 10, 30, 20}, 10, 25, 40},
	} {
		f := FailoverFigure{Recoveries: c.in}
		f.spread()
		if f.Min != c.min || f.Median != c.median || f.Max != c.max {
			t.Errorf("%v: got min %v median %v max %v, want %v %v %v", c.in, f.Min, f.Median, f.Max, c.min, c.median, c.max)
		}
		if len(c.in) == 3 && c.in[0] != 30 {
			t.Errorf("spread reordered the recoveries: %v", c.in)
		}
	}
}

func TestCountLogLostAndDuplicated(t *testing.T) {
	for _, c := range []struct {
		name             string
		acked, read      []int64
		lost, duplicated int
	}{
		{"clean", []int64{0, 1, 2}, []int64{0, 1, 2}, 0, 0},
		// A failed write may still be in the log: neither lost nor a duplicate.
		{"failed write present", []int64{0, 2}, []int64{0, 1, 2}, 0, 0},
		{"acknowledged write missing", []int64{0, 1, 2, 3}, []int64{0, 2}, 2, 0},
		{"retried write appended twice", []int64{0, 1, 2}, []int64{0, 1, 1, 1, 2, 2}, 0, 2},
		{"empty log", []int64{5}, nil, 1, 0},
	} {
		lost, dup := countLog(c.acked, c.read)
		if lost != c.lost || dup != c.duplicated {
			t.Errorf("%s: got lost %d duplicated %d, want %d %d", c.name, lost, dup, c.lost, c.duplicated)
		}
	}
}

func TestFailoverValueRoundTrip(t *testing.T) {
	for _, seq := range []int64{0, 7, 1234567890} {
		v := failoverValue(seq)
		if len(v) != failoverValueSize {
			t.Fatalf("value %d is %d bytes, want %d", seq, len(v), failoverValueSize)
		}
		got, err := parseFailoverValue(v)
		if err != nil || got != seq {
			t.Fatalf("parsed %q as %d, %v; want %d", v, got, err, seq)
		}
	}
	if _, err := parseFailoverValue([]byte("not a number")); err == nil {
		t.Fatal("a foreign value parsed")
	}
}

func TestMarkdownFailoverTable(t *testing.T) {
	r := &Result{Started: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC), Machine: "2 × test CPU", Failover: &Failover{
		Tidemark: FailoverFigure{Kills: 3, Recoveries: []time.Duration{1, 2, 3}, Min: 500 * time.Millisecond,
			Median: time.Second, Max: 2 * time.Second, Acked: 900},
		JetStream: FailoverFigure{Kills: 2, Acked: 800, Failed: 1, Duplicated: 1, Err: "kill 3: no write | acknowledged"},
	}}
	r.Failover.JetStream.Recoveries = []time.Duration{1, 2}
	r.Failover.JetStream.Min, r.Failover.JetStream.Median, r.Failover.JetStream.Max = time.Second, 2*time.Second, 4*time.Second
	md := r.Markdown()
	requireLines(t, md,
		"| leaders killed | 3 | 2 | |",
		"| writes succeed again after, min | 500.00 ms | 1000.00 ms | 0.50 |",
		"| writes succeed again after, median | 1000.00 ms | 2000.00 ms | 0.50 |",
		"| writes succeed again after, max | 2000.00 ms | 4000.00 ms | 0.50 |",
		"| writes acknowledged | 900 | 800 | |",
		"| writes failed (error after retries) | 0 | 1 | |",
		"| acknowledged writes lost | 0 | 0 | |",
		"| writes duplicated | 0 | 1 | |",
		"| JetStream stopped early | kill 3: no write / acknowledged | | |")
	if strings.Contains(md, "tidemark stopped early") {
		t.Errorf("a run without error shows one:\n%s", md)
	}
	r.Failover.JetStream = FailoverFigure{Err: "creating stream: timeout"}
	if md := r.Markdown(); !strings.Contains(md, "| writes succeed again after, min | 500.00 ms | – | – |") {
		t.Errorf("a system without recoveries shows figures:\n%s", md)
	}
	r.Failover = nil
	if md := r.Markdown(); strings.Contains(md, "failover") {
		t.Errorf("a run without kills shows a failover table:\n%s", md)
	}
}

// fakeCluster is a failover target in memory: a kill moves the leadership
// to the next node at once, as an election would; dupe appends one value
// twice, as a retry without idempotence would.
type fakeCluster struct {
	mu      sync.Mutex
	log     []int64
	leaderN int
	down    map[string]bool
	dupe    int64
}

func (c *fakeCluster) write(_ context.Context, seq int64) error {
	time.Sleep(100 * time.Microsecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, seq)
	if seq == c.dupe {
		c.log = append(c.log, seq)
	}
	return nil
}

func (c *fakeCluster) settled(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.down) > 0 {
		return errors.New("a node is down")
	}
	return nil
}

func (c *fakeCluster) leader(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("node-%d", c.leaderN%3), nil
}

func (c *fakeCluster) kill(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down[name] = true
	c.leaderN++
	return nil
}

func (c *fakeCluster) restart(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.down[name] {
		return fmt.Errorf("%s is running", name)
	}
	delete(c.down, name)
	return nil
}

func (c *fakeCluster) readBack(context.Context) ([]int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log), nil
}

func TestRunFailoverCountsEveryKill(t *testing.T) {
	c := &fakeCluster{down: map[string]bool{}, dupe: 10}
	var out strings.Builder
	f := runFailover(context.Background(), &out, "fake", c, 3)
	if f.Err != "" {
		t.Fatal(f.Err)
	}
	if f.Kills != 3 || len(f.Recoveries) != 3 || f.Min > f.Median || f.Median > f.Max || f.Min <= 0 {
		t.Fatalf("kills %d, recoveries %v (min %v median %v max %v)", f.Kills, f.Recoveries, f.Min, f.Median, f.Max)
	}
	if f.Acked < 150 || f.Failed != 0 || f.Lost != 0 || f.Duplicated != 1 {
		t.Fatalf("acked %d failed %d lost %d duplicated %d", f.Acked, f.Failed, f.Lost, f.Duplicated)
	}
	if n := strings.Count(out.String(), "writes acknowledged again after"); n != 3 {
		t.Fatalf("%d kills reported:\n%s", n, out.String())
	}
}
