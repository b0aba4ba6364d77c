package election

import (
	"fmt"
	"slices"

	"tidemark.io/services/platform/kerr"
)

// Reassignment is a partition's replica set during a reassignment (KIP-455,
// F28): Replicas is RS, the target's replicas followed by the original ones
// (TRS then ORS, duplicates dropped, as Kafka orders it), Adding is AR =
// TRS−ORS and Removing is RR = ORS−TRS. Without a reassignment in flight
// Adding and Removing are empty and Replicas is the assignment.
type Reassignment struct {
	Replicas, Adding, Removing []int32
}

// Ongoing reports whether a reassignment is in flight.
func (r Reassignment) Ongoing() bool { return len(r.Adding) > 0 || len(r.Removing) > 0 }

// Origin is ORS = RS−AR: what a cancel reverts to.
func (r Reassignment) Origin() []int32 { return without(r.Replicas, r.Adding) }

// Target is TRS = RS−RR, in the order it was asked for.
func (r Reassignment) Target() []int32 { return without(r.Replicas, r.Removing) }

// ValidateTarget checks a requested replica list: not empty, no broker
// twice, every broker registered and not shutting down (a new replica must
// be able to start).
func ValidateTarget(target []int32, b Brokers) error {
	if len(target) == 0 {
		return kerr.New(kerr.InvalidReplicaAssignment, "the target replica list is empty")
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return kerr.New(kerr.InvalidReplicaAssignment, "broker %d appears twice in the target replicas %v", id, target)
		}
		if !b.Registered(id) {
			return kerr.New(kerr.InvalidReplicaAssignment, "broker %d in the target replicas %v is not registered", id, target)
		}
		if b.ShuttingDown[id] {
			return kerr.New(kerr.InvalidReplicaAssignment, "broker %d in the target replicas %v is shutting down", id, target)
		}
	}
	return nil
}

// StartReassignment plans a move to target from the current replica set. A
// reassignment already in flight is replaced: its original replicas stay the
// origin (Kafka's rule for a new target given during a move), so a replica
// it was adding that the new target drops is removed again.
func StartReassignment(cur Reassignment, target []int32) Reassignment {
	origin := cur.Origin()
	rs := slices.Clone(target)
	for _, id := range origin {
		if !slices.Contains(rs, id) {
			rs = append(rs, id)
		}
	}
	return Reassignment{Replicas: rs, Adding: without(target, origin), Removing: without(origin, target)}
}

// ReassignmentReady reports whether every target replica is in the ISR:
// phase B may run.
func ReassignmentReady(r Reassignment, s PartitionState) bool {
	for _, id := range r.Target() {
		if !s.InISR(id) {
			return false
		}
	}
	return true
}

// ReassignStart is phase A's state: the leader and ISR stay, the leader
// epoch goes up so every replica, the new ones included, learns the new
// replica set (Kafka's A1). Replicas outside the new set leave the ISR (a
// replaced reassignment's adding replicas), and a leader among them gives
// way as in ShrinkToReplicas.
func ReassignStart(s PartitionState, rs []int32, b Brokers) (Decision, error) {
	return shrinkTo(s, rs, b, fmt.Sprintf("reassignment started: replicas %v", rs))
}

// ShrinkToReplicas is phase B (and a cancel): the replica set becomes keep.
// The ISR loses the replicas outside keep; the leader stays if it is in
// keep and live, else the first replica of keep that is live and in the ISR
// leads (F19's reassignment election). The leader epoch goes up. An ISR left
// empty, or no eligible leader, is refused: nothing is written.
func ShrinkToReplicas(s PartitionState, keep []int32, b Brokers, reason string) (Decision, error) {
	return shrinkTo(s, keep, b, reason)
}

func shrinkTo(s PartitionState, keep []int32, b Brokers, reason string) (Decision, error) {
	isr := filterISR(s.ISR, func(id int32) bool { return slices.Contains(keep, id) })
	if len(isr) == 0 {
		return unchanged(s, reason), kerr.New(kerr.EligibleLeadersNotAvailable,
			"no member of the ISR %v is among the replicas %v", s.ISR, keep)
	}
	leader := s.Leader
	if !slices.Contains(keep, leader) || !b.Live(leader) || !slices.Contains(isr, leader) {
		leader = NoLeader
		for _, id := range keep {
			if b.Live(id) && slices.Contains(isr, id) {
				leader = id
				break
			}
		}
		if leader == NoLeader {
			return unchanged(s, reason), kerr.New(kerr.EligibleLeadersNotAvailable,
				"no live replica of %v is in the ISR %v", keep, isr)
		}
	}
	return controllerWrite(s, leader, isr, reason), nil
}

// without returns the members of xs not in drop, in order.
func without(xs, drop []int32) []int32 {
	out := make([]int32, 0, len(xs))
	for _, x := range xs {
		if !slices.Contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}
