package ctrl

import (
	"testing"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

func TestRingKeepsTheNewest(t *testing.T) {
	r := newRing(3)
	if evs, last := r.since(0); len(evs) != 0 || last != 0 {
		t.Fatalf("empty ring = %v, %d", evs, last)
	}
	for i := range 5 {
		r.add(&controlv1.ClusterEvent{Partition: int32(i + 1)})
	}
	evs, last := r.since(0)
	if last != 5 || len(evs) != 3 || evs[0].Partition != 3 || evs[2].Partition != 5 {
		t.Fatalf("since(0) = %v, %d", evs, last)
	}
	evs, _ = r.since(4)
	if len(evs) != 1 || evs[0].Partition != 5 {
		t.Fatalf("since(4) = %v", evs)
	}
	if evs, _ := r.since(5); len(evs) != 0 {
		t.Fatalf("since(5) = %v", evs)
	}
}
