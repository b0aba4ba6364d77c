package broker

import "testing"

// Ids come from the block in hand, then from the spare fetched ahead; the
// prefetcher is asked once under a tenth of a block is left, and not while
// a spare is held.
func TestProducerIDsFetchAhead(t *testing.T) {
	p := newProducerIDs(nil) // no controller: Next must not need one
	p.installLocked(0, 20)
	asked := func() bool {
		select {
		case <-p.kick:
			return true
		default:
			return false
		}
	}
	for want := int64(1); want <= 17; want++ { // id 0 is skipped
		if id, err := p.Next(t.Context()); err != nil || id != want {
			t.Fatalf("Next = %d, %v; want %d", id, err, want)
		}
	}
	if asked() {
		t.Fatal("asked to fetch ahead with 2 of 20 ids left")
	}
	if id, _ := p.Next(t.Context()); id != 18 || !asked() {
		t.Fatalf("id %d: the prefetcher must be asked once 1 of 20 ids is left", id)
	}
	p.installLocked(100, 120)
	if got := p.held(); got != 21 {
		t.Fatalf("held %d, want 1 + a spare of 20", got)
	}
	for _, want := range []int64{19, 100, 101} {
		if id, err := p.Next(t.Context()); err != nil || id != want {
			t.Fatalf("Next = %d, %v; want %d", id, err, want)
		}
	}
	if asked() {
		t.Fatal("asked to fetch ahead with 18 of 20 ids left")
	}
}
