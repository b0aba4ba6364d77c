package cli

import (
	"encoding/binary"
	"testing"
	"time"
)

func stamped(at time.Time) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, uint64(at.UnixNano()))
	return v
}

// The consumer of perf e2e counts only records sent once the gate opened.
func TestWarmupGateCountsOnlyRecordsSentAfterItOpened(t *testing.T) {
	var g warmupGate
	t0 := time.Unix(100, 0)
	if _, ok := g.measured(stamped(t0)); ok {
		t.Fatal("a record read before the warm-up ended was measured")
	}
	g.open(t0.Add(time.Second))
	if _, ok := g.measured(stamped(t0.Add(999 * time.Millisecond))); ok {
		t.Fatal("a warm-up record read after the gate opened was measured")
	}
	sent, ok := g.measured(stamped(t0.Add(time.Second)))
	if !ok || !sent.Equal(t0.Add(time.Second)) {
		t.Fatalf("the first measured record: %v %v", sent, ok)
	}
}
