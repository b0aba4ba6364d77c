package logstore

import (
	"fmt"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// BenchmarkFileCache measures a 1 KiB produce and a 1 KiB read from a
// log's oldest segment when the files' descriptors are cached (hit) and
// when every operation must open them again (miss: a one-handle cache and
// two logs used in turn). It reports the opens per operation; the time
// difference is the cost of an open(2) (and of the evicted handle's
// close) on this machine.
func BenchmarkFileCache(b *testing.B) {
	for _, op := range []string{"produce", "read"} {
		for _, mode := range []string{"hit", "miss"} {
			b.Run(op+"/"+mode, func(b *testing.B) {
				max := 0
				if mode == "miss" {
					max = 1
				}
				files := NewFileCache(max)
				cfg := DefaultConfig()
				if op == "read" {
					cfg.SegmentBytes = 16 << 10
				}
				dir := b.TempDir()
				var ls [2]*Log
				for i := range ls {
					l, err := Open(Options{FS: vfs.OS, Files: files, Dir: fmt.Sprintf("%s/bench-%d", dir, i), Config: cfg})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { l.Close() })
					ls[i] = l
					if op == "read" {
						for n := range 64 { // four segments of 16 KiB
							if _, err := l.AppendAsLeader(taggedBatch(i, n, 1, 1000), 0); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
				batch := taggedBatch(0, 0, 1, 1000)
				waitIdle(files)
				before := files.Stats()
				b.SetBytes(int64(len(batch)))
				b.ResetTimer()
				for n := range b.N {
					l := ls[n%2]
					if op == "produce" {
						if _, err := l.AppendAsLeader(batch, 0); err != nil {
							b.Fatal(err)
						}
						continue
					}
					res, err := l.Read(0, 1, l.LogEndOffset())
					if err != nil || len(res.Records) == 0 {
						b.Fatalf("read: %d bytes, %v", len(res.Records), err)
					}
				}
				b.StopTimer()
				st := files.Stats()
				b.ReportMetric(float64(st.Misses-before.Misses)/float64(b.N), "opens/op")
			})
		}
	}
}
