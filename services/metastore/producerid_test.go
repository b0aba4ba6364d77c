package metastore

import (
	"slices"
	"sync"
	"testing"
)

func TestProducerIDBlocksNeverOverlap(t *testing.T) {
	srv, _ := startStore(t)
	ctx := testCtx(t)
	const workers, each = 8, 10
	var (
		mu     sync.Mutex
		starts []int64
		wg     sync.WaitGroup
	)
	errs := make(chan error, workers)
	for range workers {
		s := newStore(t, srv.Client(t)) // one client each: real contention
		wg.Go(func() {
			for range each {
				first, count, err := s.AllocateProducerIDBlock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if count != ProducerIDBlockSize {
					t.Errorf("block size %d", count)
				}
				mu.Lock()
				starts = append(starts, first)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(starts)
	if len(starts) != workers*each {
		t.Fatalf("%d blocks, want %d", len(starts), workers*each)
	}
	// Sorted starts must be exactly 0, 1000, 2000, ...: disjoint and gapless.
	for i, first := range starts {
		if first != int64(i)*ProducerIDBlockSize {
			t.Fatalf("block %d starts at %d: blocks overlap or skip (%v)", i, first, starts)
		}
	}
}
