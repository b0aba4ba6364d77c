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
			var appends, reads atomic.Int64
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
				}
			})
			time.Sleep(700 * time.Millisecond)
			close(stop)
			wg.Wait()
			select {
			case err := <-fail:
				t.Fatal(err)
			default:
			}
			if appends.Load() < 100 || reads.Load() < 100 {
				t.Fatalf("too little work: %d appends, %d reads", appends.Load(), reads.Load())
			}
			readAll(t, l, l.LogStartOffset(), l.LogEndOffset(), 1<<20)
		})
	}
}
