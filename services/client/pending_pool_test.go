package client

import (
	"testing"
	"time"
)

// A completed batch gives its list of pending records back for the next
// batch, cleared: reused, and holding no callback alive.
func TestCompletedBatchesGiveTheirPendingListsBack(t *testing.T) {
	p := &Producer{opts: ProducerOptions{BatchSize: 1 << 16}}
	reused := false
	// sync.Pool may drop a put (the race detector drops some on purpose).
	for range 20 {
		b := newBatch(time.Now(), time.Minute)
		b.recs = p.pendingRoom()
		for range 100 {
			b.recs = append(b.recs, pending{cb: func(Result, error) {}, size: 1})
		}
		first := &b.recs[0]
		p.recycle(b)
		if b.recs != nil {
			t.Fatal("a recycled batch still holds its pending list")
		}
		got := p.pendingRoom()
		if got == nil {
			continue
		}
		if len(got) != 0 || cap(got) < 100 {
			t.Fatalf("reused list has len %d, cap %d", len(got), cap(got))
		}
		for i, e := range got[:cap(got)] {
			if e.cb != nil {
				t.Fatalf("entry %d of a reused list still holds a callback", i)
			}
		}
		reused = reused || &got[:1][0] == first
		p.pendings.Put(&got)
	}
	if !reused {
		t.Fatal("no pending list was reused in 20 batches")
	}
}
