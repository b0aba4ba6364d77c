package benchcmp

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procStatPath is the kernel's account of every CPU's time.
var procStatPath = "/proc/stat"

// cpuTicks is the machine's CPU time so far, all CPUs together, in clock
// ticks: all of it, and the part stolen (a vCPU had work and the
// hypervisor ran something else: another guest, its own threads).
type cpuTicks struct {
	total, steal uint64
}

// readCPUTicks reads the "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal [guest guest_nice]. Guest time is already
// counted in user, so the total is the first eight fields.
func readCPUTicks(path string) (cpuTicks, error) {
	f, err := os.Open(path)
	if err != nil {
		return cpuTicks{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		if len(fields) < 9 {
			return cpuTicks{}, fmt.Errorf("%s: the cpu line has %d fields, want user to steal (8)", path, len(fields)-1)
		}
		var t cpuTicks
		for i, s := range fields[1:9] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTicks{}, fmt.Errorf("%s: cpu field %d: %w", path, i+1, err)
			}
			t.total += v
			if i == 7 {
				t.steal = v
			}
		}
		return t, nil
	}
	if err := sc.Err(); err != nil {
		return cpuTicks{}, err
	}
	return cpuTicks{}, fmt.Errorf("%s has no cpu line", path)
}

// stealPct is the share of the machine's CPU time between a and b that
// the hypervisor took; ok is false when no time passed.
func stealPct(a, b cpuTicks) (pct float64, ok bool) {
	if b.total <= a.total || b.steal < a.steal {
		return 0, false
	}
	return 100 * float64(b.steal-a.steal) / float64(b.total-a.total), true
}

// stealCell is a row's steal for the CPU table: the figure's own run and,
// when the row had several, the highest of them.
func stealCell(f Figure) string {
	if f.Err != "" || !f.StealMeasured {
		return "–"
	}
	s := fmt.Sprintf("%.1f", f.StealPct)
	if f.MaxStealPct > f.StealPct+0.05 {
		s += fmt.Sprintf(" (max %.1f)", f.MaxStealPct)
	}
	return s
}
