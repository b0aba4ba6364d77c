//go:build linux

package parkedfs

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/parktest"
)

// BenchmarkOthersDuringRemove measures, side by side, whether the rest of a
// busy GOMAXPROCS-1 process runs while one goroutine removes a 16 MiB file
// whose blocks are on the device (a retired segment). A busy goroutine (it
// yields, never sleeps, as a loaded broker's do) notes the time on each
// turn. first-run-ms is how long after the removal began it next ran (the
// mean over iterations): a plain unlink holds the only P until the
// runtime's sysmon takes it back; a parked one lets it run at once.
// max-gap-ms is its longest gap between turns over the removal (the worst
// iteration), which also counts the kernel's own pauses of the thread.
// remove-ms is the removal itself: on a file system mounted with discard it
// waits for the device to trim the freed blocks.
func BenchmarkOthersDuringRemove(b *testing.B) {
	for _, c := range []struct {
		name   string
		remove func(string) error
	}{{"plain", os.Remove}, {"parked", Remove}} {
		b.Run(c.name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			dir := parktest.DiskDir(b)
			var firstRuns, removals, worstGap time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				n++
				p := writtenFile(b, dir, "segment"+strconv.Itoa(n), 16<<20)
				b.StartTimer()
				// As in a loaded broker, the runtime's sysmon has had nothing
				// to take back for a while, and sleeps its longest between looks.
				t, err := parktest.OthersDuring(30*time.Millisecond, func() error { return c.remove(p) })
				if err != nil {
					b.Fatal(err)
				}
				firstRuns += t.FirstRun
				removals += t.Took
				worstGap = max(worstGap, t.MaxGap)
			}
			per := float64(b.N) * 1e6
			b.ReportMetric(float64(firstRuns)/per, "first-run-ms")
			b.ReportMetric(float64(worstGap)/1e6, "max-gap-ms")
			b.ReportMetric(float64(removals)/per, "remove-ms")
		})
	}
}
