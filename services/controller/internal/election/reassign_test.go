package election

import (
	"slices"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func TestReassignmentReplicaSets(t *testing.T) {
	cur := Reassignment{Replicas: []int32{1, 2, 3}}
	r := StartReassignment(cur, []int32{2, 3, 4})
	if !slices.Equal(r.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(r.Adding, []int32{4}) || !slices.Equal(r.Removing, []int32{1}) {
		t.Fatalf("start: %+v", r)
	}
	if !slices.Equal(r.Target(), []int32{2, 3, 4}) || !slices.Equal(r.Origin(), []int32{2, 3, 1}) || !r.Ongoing() {
		t.Errorf("target %v origin %v", r.Target(), r.Origin())
	}
	// A new target during the move keeps the original replicas as origin.
	r2 := StartReassignment(r, []int32{5, 2, 3})
	if !slices.Equal(r2.Replicas, []int32{5, 2, 3, 1}) || !slices.Equal(r2.Adding, []int32{5}) || !slices.Equal(r2.Removing, []int32{1}) {
		t.Errorf("replaced: %+v", r2)
	}
	// A reorder is no move.
	if r3 := StartReassignment(cur, []int32{3, 2, 1}); r3.Ongoing() || !slices.Equal(r3.Replicas, []int32{3, 2, 1}) {
		t.Errorf("reorder: %+v", r3)
	}
	if !ReassignmentReady(r, PartitionState{ISR: []int32{1, 2, 3, 4}}) || ReassignmentReady(r, PartitionState{ISR: []int32{1, 2, 3}}) {
		t.Error("ready only when the whole target is in the ISR")
	}
}

func TestReassignmentDecisions(t *testing.T) {
	b := Brokers{Epochs: map[int32]int64{1: 1, 2: 2, 3: 3, 4: 4}, ShuttingDown: map[int32]bool{}}
	s := PartitionState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2, 3, 4}, PartitionEpoch: 9}

	// Phase A keeps leader and ISR and bumps the leader epoch.
	d, err := ReassignStart(PartitionState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2, 3}}, []int32{2, 3, 4, 1}, b)
	if err != nil || d.State.Leader != 1 || d.State.LeaderEpoch != 6 || !slices.Equal(d.State.ISR, []int32{1, 2, 3}) {
		t.Errorf("start: %v %v", d.State, err)
	}
	// Phase B: the leader is outside the target, so the first target
	// replica in the ISR leads; RR leaves the ISR.
	d, err = ShrinkToReplicas(s, []int32{2, 3, 4}, b, "")
	if err != nil || d.State.Leader != 2 || d.State.LeaderEpoch != 6 || !slices.Equal(d.State.ISR, []int32{2, 3, 4}) {
		t.Errorf("complete: %v %v", d.State, err)
	}
	// A live leader inside the target stays.
	d, _ = ShrinkToReplicas(PartitionState{Leader: 3, LeaderEpoch: 5, ISR: []int32{1, 2, 3, 4}}, []int32{2, 3, 4}, b, "")
	if d.State.Leader != 3 {
		t.Errorf("leader moved needlessly: %v", d.State)
	}
	// A dead target head is passed over.
	dead := Brokers{Epochs: map[int32]int64{1: 1, 3: 3, 4: 4}, ShuttingDown: map[int32]bool{}}
	if d, _ := ShrinkToReplicas(s, []int32{2, 3, 4}, dead, ""); d.State.Leader != 3 {
		t.Errorf("dead head elected: %v", d.State)
	}
	// Never an empty ISR: refused, nothing changes.
	if _, err := ShrinkToReplicas(PartitionState{Leader: 1, ISR: []int32{1}}, []int32{2, 3}, b, ""); kerr.CodeOf(err) != kerr.EligibleLeadersNotAvailable {
		t.Errorf("empty ISR: %v", err)
	}
	for _, bad := range [][]int32{nil, {2, 2}, {2, 9}} {
		if err := ValidateTarget(bad, b); kerr.CodeOf(err) != kerr.InvalidReplicaAssignment {
			t.Errorf("target %v: %v", bad, err)
		}
	}
	sd := Brokers{Epochs: b.Epochs, ShuttingDown: map[int32]bool{4: true}}
	if err := ValidateTarget([]int32{2, 4}, sd); kerr.CodeOf(err) != kerr.InvalidReplicaAssignment {
		t.Errorf("shutting-down target: %v", err)
	}
}
