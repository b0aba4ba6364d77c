package logstore

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// TestConcurrentAppendReadFlushTruncate hammers one log from several
// goroutines (run it with -race). Readers must only ever see whole, valid,
// contiguous batches below the LEO they started with.
func TestConcurrentAppendReadFlushTruncate(t *testing.T) {
	for _, fs := range []string{"mem", "os"} {
		t.Run(fs, func(t *testing.T) {
			cfg := smallConfig()
			cfg.SegmentBytes = 16 << 10
			opts := Options{FS: newMem(t), Dir: testDir, Config: cfg}
			if fs == "os" {
				opts.FS, opts.Dir = nil, t.TempDir()+"/t-0"
			}
			l := openLogOpts(t, opts)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var appends, reads, upkeep atomic.Int64
			fail := make(chan error, 16)
			report := func(err error) {
				select {
				case fail <- err:
				default:
				}
			}
			for w := range 2 {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := l.AppendAsLeader(plain(1+i%4, 50+w*30, int64(i)).build(), 0); err != nil {
							report(err)
							return
						}
						appends.Add(1)
					}
				})
			}
			for range 3 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						leo := l.LogEndOffset()
						from := l.LogStartOffset() + (leo-l.LogStartOffset())/2
						res, err := l.Read(from, 4096, leo)
						if err != nil {
							if kerr.CodeOf(err) == kerr.OffsetOutOfRange {
								continue // the log was truncated or trimmed meanwhile
							}
							report(err)
							return
						}
						prev := int64(-1)
						for b, err := range recordbatch.All(res.Records) {
							if err != nil {
								report(err)
								return
							}
							if err := b.Validate(); err != nil {
								report(err)
								return
							}
							if b.LastOffset() >= leo || (prev >= 0 && b.BaseOffset() != prev) {
								report(errors.New("batch beyond the LEO or not contiguous"))
								return
							}
							prev = b.NextOffset()
						}
						reads.Add(1)
					}
				})
			}
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
					var err error
					switch i % 5 {
					case 0, 1, 2:
						err = l.Flush()
					case 3:
						_, err = l.TruncateTo(l.LogEndOffset() * 9 / 10)
					case 4:
						_, err = l.DeleteOldSegments(l.RecoveryPoint() / 2)
					}
					if err != nil {
						report(err)
						return
					}
					upkeep.Add(1)
				}
			})
			// At least 700 ms, and then until each kind of work has been done
			// (every flush, truncation and deletion meeting appends and
			// reads): on a loaded machine 700 ms once held fewer than 100
			// appends, and a flush of the os log can take seconds there.
			enough := func() bool { return appends.Load() >= 300 && reads.Load() >= 300 && upkeep.Load() >= 5 }
			for start, end := time.Now(), time.Now().Add(60*time.Second); time.Since(start) < 700*time.Millisecond || !enough(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(end) || len(fail) > 0 {
					break
				}
			}
			close(stop)
			wg.Wait()
			select {
			case err := <-fail:
				t.Fatal(err)
			default:
			}
			if !enough() {
				t.Fatalf("too little work in 60 s: %d appends, %d reads, %d flushes, truncations and deletions", appends.Load(), reads.Load(), upkeep.Load())
			}
			readAll(t, l, l.LogStartOffset(), l.LogEndOffset(), 1<<20)
		})
	}
}
