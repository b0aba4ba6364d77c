//go:build linux

package aiofsync

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tidemark.io/services/broker/internal/parktest"
)

// BenchmarkOthersDuringFsync measures, side by side, whether the rest of a
// busy GOMAXPROCS-1 process runs while one goroutine flushes a 4 KiB file
// (a checkpoint) queued behind 32 MiB of another file's writeback, as a
// broker's checkpoints are behind its segments' writeback. A
// busy goroutine (it yields, never sleeps, as a loaded broker's do) notes
// the time on each turn. first-run-ms is how long after the fsync began it
// next ran (the mean over iterations): a plain fsync holds the only P
// until the runtime's sysmon takes it back, which a busy process's sysmon
// does 10-20 ms later; a parked one lets it run at once. max-gap-ms is its
// longest gap between turns over the fsync (the worst iteration), which
// also counts the kernel's own pauses of the thread.
func BenchmarkOthersDuringFsync(b *testing.B) {
	for _, c := range []struct {
		name string
		sync func(*os.File) error
	}{{"plain", (*os.File).Sync}, {"parked", Sync}} {
		b.Run(c.name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			dir := parktest.DiskDir(b)
			var firstRuns, fsyncs, worstGap time.Duration
			for b.Loop() {
				b.StopTimer()
				segment := dirtyFile(b, dir, 32<<20)
				f := dirtyFile(b, dir, 4<<10)
				if err := unix.SyncFileRange(int(segment.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t, err := parktest.OthersDuring(0, func() error { return c.sync(f) })
				if err != nil {
					b.Fatal(err)
				}
				firstRuns += t.FirstRun
				fsyncs += t.Took
				worstGap = max(worstGap, t.MaxGap)
				for _, f := range []*os.File{f, segment} {
					f.Close()
					os.Remove(f.Name())
				}
			}
			n := float64(b.N) * 1e6
			b.ReportMetric(float64(firstRuns)/n, "first-run-ms")
			b.ReportMetric(float64(worstGap)/1e6, "max-gap-ms")
			b.ReportMetric(float64(fsyncs)/n, "fsync-ms")
		})
	}
}
