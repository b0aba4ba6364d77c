package election

import (
	"slices"
	"testing"

	"tidemark.io/services/platform/kerr"
)

// cluster returns a view in which the given brokers are registered, each with
// broker epoch 100+id.
func cluster(ids ...int32) Brokers {
	b := Brokers{Epochs: map[int32]int64{}, ShuttingDown: map[int32]bool{}}
	for _, id := range ids {
		b.Epochs[id] = 100 + int64(id)
	}
	return b
}

// stopping marks brokers as in controlled shutdown.
func (b Brokers) stopping(ids ...int32) Brokers {
	for _, id := range ids {
		b.ShuttingDown[id] = true
	}
	return b
}

func part(assign []int32, leader, leaderEpoch int32, isr ...int32) Partition {
	return Partition{
		Assignment: assign,
		State:      PartitionState{Leader: leader, LeaderEpoch: leaderEpoch, ISR: isr, PartitionEpoch: 7},
	}
}

func ids(v ...int32) []int32 { return v }

// wantCode fails the test unless err carries code (None meaning no error).
func wantCode(t *testing.T, err error, code kerr.Code) {
	t.Helper()
	if got := kerr.CodeOf(err); got != code {
		t.Fatalf("error = %v (code %v), want code %v", err, got, code)
	}
}

// wantState checks leader, leader epoch and ISR, and that the partition
// epoch was left for the store.
func wantState(t *testing.T, d Decision, in PartitionState, leader, leaderEpoch int32, isr []int32) {
	t.Helper()
	if d.State.Leader != leader || d.State.LeaderEpoch != leaderEpoch || !slices.Equal(d.State.ISR, isr) {
		t.Fatalf("state = %v, want leader=%d leaderEpoch=%d isr=%v (reason %q)", d.State, leader, leaderEpoch, isr, d.Reason)
	}
	if d.State.PartitionEpoch != in.PartitionEpoch {
		t.Fatalf("partition epoch = %d, want it unchanged at %d", d.State.PartitionEpoch, in.PartitionEpoch)
	}
}
