package election

import (
	"fmt"
	"slices"
)

// RemoveFromISR drops the given replicas from the ISR, as the controller does
// for dead or shutting-down replicas (F19, ReplicaStateMachine's
// removeReplicasFromIsr). It never empties the ISR: when every member would
// go, one stays, so the partition remembers which replica must return for a
// clean election. The one kept is the leader if it was in the ISR (it has the
// longest log among the in-sync replicas), otherwise the last ISR member.
// A removed leader becomes NoLeader.
//
// Unlike Kafka, which writes (and bumps the leader epoch) even when removing
// the last member changes nothing, a removal with no effect returns an
// unchanged Decision.
func RemoveFromISR(s PartitionState, replicas ...int32) Decision {
	gone := func(id int32) bool { return slices.Contains(replicas, id) }

	isr := filterISR(s.ISR, func(id int32) bool { return !gone(id) })
	if len(isr) == 0 && len(s.ISR) > 0 {
		keep := s.ISR[len(s.ISR)-1]
		if s.InISR(s.Leader) {
			keep = s.Leader
		}
		isr = []int32{keep}
	}
	leader := s.Leader
	if gone(leader) {
		leader = NoLeader
	}
	if leader == s.Leader && slices.Equal(isr, s.ISR) {
		return unchanged(s, fmt.Sprintf("replicas %v: nothing to remove from ISR %v", replicas, s.ISR))
	}
	return controllerWrite(s, leader, isr,
		fmt.Sprintf("replicas %v removed from ISR %v -> %v (leader %d -> %d)", replicas, s.ISR, isr, s.Leader, leader))
}
