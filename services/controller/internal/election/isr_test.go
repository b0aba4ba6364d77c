package election

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRemoveFromISR(t *testing.T) {
	tests := []struct {
		name    string
		in      PartitionState
		remove  []int32
		changed bool
		leader  int32
		isr     []int32
	}{
		{name: "follower", in: st(1, 1, 2, 3), remove: ids(2), changed: true, leader: 1, isr: ids(1, 3)},
		{name: "leader loses leadership", in: st(1, 1, 2, 3), remove: ids(1), changed: true, leader: NoLeader, isr: ids(2, 3)},
		{name: "all members: the leader stays as the last member",
			in: st(2, 1, 2, 3), remove: ids(1, 2, 3), changed: true, leader: NoLeader, isr: ids(2)},
		{name: "all members, no leader: the last ISR member stays",
			in: st(NoLeader, 3, 1), remove: ids(1, 3), changed: true, leader: NoLeader, isr: ids(1)},
		{name: "the last member of a leaderless ISR: nothing to write",
			in: st(NoLeader, 3), remove: ids(3), changed: false, leader: NoLeader, isr: ids(3)},
		{name: "sole member that leads: kept, but leaderless",
			in: st(3, 3), remove: ids(3), changed: true, leader: NoLeader, isr: ids(3)},
		{name: "not in the ISR", in: st(1, 1, 2), remove: ids(3), changed: false, leader: 1, isr: ids(1, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := RemoveFromISR(tt.in, tt.remove...)
			if d.Changed != tt.changed {
				t.Fatalf("changed = %v, want %v (%s)", d.Changed, tt.changed, d.Reason)
			}
			epoch := tt.in.LeaderEpoch
			if tt.changed {
				epoch++ // ZK mode: every controller ISR write bumps the leader epoch.
			}
			wantState(t, d, tt.in, tt.leader, epoch, tt.isr)
		})
	}
}

// TestRemoveFromISRNeverEmpties checks F19's invariant over random inputs:
// a non-empty ISR stays non-empty and only ever loses members.
func TestRemoveFromISRNeverEmpties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + r.IntN(5)
		isr := r.Perm(n)
		s := PartitionState{Leader: NoLeader, ISR: make([]int32, n)}
		for i, v := range isr {
			s.ISR[i] = int32(v)
		}
		if r.IntN(2) == 0 {
			s.Leader = s.ISR[r.IntN(n)]
		}
		var remove []int32
		for id := range int32(6) {
			if r.IntN(2) == 0 {
				remove = append(remove, id)
			}
		}
		d := RemoveFromISR(s, remove...)
		if len(d.State.ISR) == 0 {
			t.Fatalf("RemoveFromISR(%v, %v) emptied the ISR", s, remove)
		}
		for _, id := range d.State.ISR {
			if !s.InISR(id) {
				t.Fatalf("RemoveFromISR(%v, %v) added %d", s, remove, id)
			}
		}
		if slices.Contains(remove, d.State.Leader) {
			t.Fatalf("RemoveFromISR(%v, %v) kept removed leader %d", s, remove, d.State.Leader)
		}
	}
}

func st(leader int32, isr ...int32) PartitionState {
	return PartitionState{Leader: leader, LeaderEpoch: 4, ISR: isr, PartitionEpoch: 7}
}
