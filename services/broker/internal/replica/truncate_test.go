package replica

import (
	"fmt"
	"testing"
)

// A follower told to truncate below its log start (an unclean election
// chose a replica whose log ends there) gets a log that starts at the new
// end; the replica state's copy of the log start must come down with it, or
// as leader it would refuse fetches between the two as out of range, and a
// follower told to resume there would ask again for ever.
func TestTruncationBelowTheLogStartLowersTheStatesLogStart(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1}, nil)
	for i := range 10 {
		if err := e.produceOne(fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	r := e.replica()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.log.AdvanceLogStartOffset(8, r.log.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	r.state.SetLogStartOffset(r.log.LogStartOffset())
	f := &fetcher{m: e.m}
	f.truncateLocked(&fetchState{r: r, epoch: 1}, 3, "a leader whose log ends at 3")
	if got, want := r.state.LogStartOffset(), r.log.LogStartOffset(); got != want || want != 3 {
		t.Fatalf("log start: the state says %d, the log %d (want 3)", got, want)
	}
	if hw := r.state.HighWatermark(); hw != 3 {
		t.Fatalf("HW %d after truncating to 3", hw)
	}
}
