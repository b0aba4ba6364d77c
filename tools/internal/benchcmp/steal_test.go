package benchcmp

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeProcStat(t *testing.T, path string, total, steal uint64) {
	t.Helper()
	// user nice system idle iowait irq softirq steal guest guest_nice:
	// the total is spread over user and idle, guest is already in user.
	user := (total - steal) / 2
	idle := total - steal - user
	line := fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 %d 77 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2 3\n", user, idle, steal)
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadCPUTicks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stat")
	if err := os.WriteFile(p, []byte("cpu  177638 0 73257 336814 3979 0 13804 8982 0 0\ncpu0 89814 0 37084 168088 900 0 6981 4435 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readCPUTicks(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuTicks{total: 614474, steal: 8982}); got != want {
		t.Fatalf("got %+v, want %+v (guest time is not counted twice)", got, want)
	}
	for _, bad := range []string{"cpu0 1 2 3 4 5 6 7 8\n", "cpu  1 2 3\n", "cpu  1 2 x 4 5 6 7 8\n"} {
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readCPUTicks(p); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
	if _, err := readCPUTicks(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("a missing file read without an error")
	}
}

func TestStealPct(t *testing.T) {
	if pct, ok := stealPct(cpuTicks{1000, 10}, cpuTicks{3000, 110}); !ok || pct != 5 {
		t.Fatalf("100 stolen of 2000: got %v, %v; want 5%%", pct, ok)
	}
	if _, ok := stealPct(cpuTicks{1000, 10}, cpuTicks{1000, 10}); ok {
		t.Fatal("no time passed, yet a share was given")
	}
}

// stealingSide moves the machine's /proc/stat on by 1000 ticks per run,
// with the given ticks stolen in each, and reports the given rates.
type stealingSide struct {
	fakeSide
	t            *testing.T
	path         string
	total, steal uint64
	steals       []uint64
	rates        []float64
	n            int
}

func (s *stealingSide) run(_ context.Context, sh Shape) Figure {
	if sh.Name == "warmup" {
		return Figure{MsgsPerSec: 1}
	}
	i := s.n
	s.n++
	s.total += 1000
	s.steal += s.steals[i]
	writeProcStat(s.t, s.path, s.total, s.steal)
	return Figure{MsgsPerSec: s.rates[i]}
}

func TestEveryRunsStealIsMeasuredAndTheHighestKept(t *testing.T) {
	old := procStatPath
	t.Cleanup(func() { procStatPath = old })
	procStatPath = filepath.Join(t.TempDir(), "stat")
	writeProcStat(t, procStatPath, 50000, 500)
	sd := &stealingSide{t: t, path: procStatPath, total: 50000, steal: 500,
		steals: []uint64{20, 150, 5}, rates: []float64{2000, 1200, 2100}}
	res := &Result{Rows: []Row{{Shape: Shape{Name: "sync1-128", Mode: Sync, Runs: 3}}}}
	measureTidemark(t, res, sd)
	f := res.Rows[0].Tidemark
	// The median by throughput is the 2000/s run, which had 2% stolen; the
	// slow run met 15%.
	if f.MsgsPerSec != 2000 || !f.StealMeasured || math.Abs(f.StealPct-2) > 1e-9 || math.Abs(f.MaxStealPct-15) > 1e-9 {
		t.Fatalf("figure %+v: want the 2000/s run with steal 2%% and max 15%%", f)
	}
	md := (&Result{Rows: []Row{{Shape: Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1},
		Tidemark:  Figure{MsgsPerSec: 2000, ServerCPU: 400e3, ClientCPU: 100e3, StealPct: 2, MaxStealPct: 15, StealMeasured: true},
		JetStream: Figure{MsgsPerSec: 1900, ServerCPU: 600e3, ClientCPU: 150e3}}}}).Markdown()
	if !strings.Contains(md, "| 2.0 (max 15.0) / – |") || !strings.Contains(md, "host steal, % of CPU time") {
		t.Fatalf("the CPU table does not give the steal:\n%s", md)
	}
}
