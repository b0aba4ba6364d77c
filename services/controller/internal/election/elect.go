package election

import (
	"fmt"

	"tidemark.io/services/platform/kerr"
)

// ElectOffline elects a leader for a partition whose leader is gone (F19,
// F20). The leader is the first replica in assignment order that is live and
// in the ISR; the new ISR is the live members of the old one. If there is
// none and allowUnclean is set, the first live assigned replica leads and the
// ISR becomes just that replica; the Decision is then marked Unclean. With no
// live replica at all, a replica whose log was lost (Brokers.LostLog) leads
// from an empty log: marked Unclean and EmptyLog.
//
// It does not look at the current leader: call it only for a partition whose
// leader is not live. It fails with ELIGIBLE_LEADERS_NOT_AVAILABLE when no
// replica can lead.
func ElectOffline(p Partition, b Brokers, allowUnclean bool) (Decision, error) {
	// Unclean election is for when no ISR member is alive (F20). An ISR
	// member in controlled shutdown is alive and holds every committed
	// record: electing an out-of-sync replica now would make it truncate
	// them. The partition waits; once that member is gone, unclean election
	// may run. (An operator's ElectLeaders UNCLEAN still may: ElectUnclean.)
	for _, id := range p.State.ISR {
		if b.Registered(id) {
			allowUnclean = false
		}
	}
	return electOffline(p, b, allowUnclean)
}

func electOffline(p Partition, b Brokers, allowUnclean bool) (Decision, error) {
	s := p.State
	for _, id := range p.Assignment {
		if b.Live(id) && s.InISR(id) {
			isr := filterISR(s.ISR, b.Live)
			return controllerWrite(s, id, isr,
				fmt.Sprintf("offline election: replica %d elected from ISR %v (leader was %d)", id, s.ISR, s.Leader)), nil
		}
	}
	if allowUnclean {
		for _, id := range p.Assignment {
			if b.Live(id) {
				d := controllerWrite(s, id, []int32{id},
					fmt.Sprintf("unclean election: no live ISR member in %v; out-of-sync replica %d elected (leader was %d)", s.ISR, id, s.Leader))
				d.Unclean = true
				return d, nil
			}
		}
		// Last, a replica with no log left: nothing it could lose remains
		// anywhere, and leading from empty is what unclean election means
		// for it. An out-of-sync replica with records, above, loses less.
		for _, id := range p.Assignment {
			if b.LostLog[id] && !b.ShuttingDown[id] {
				d := controllerWrite(s, id, []int32{id},
					fmt.Sprintf("unclean election: no live replica in %v has a log; replica %d, whose log was lost with a replaced log dir, "+
						"leads from an empty log: every record of the partition is lost (leader was %d, ISR %v)", []int32(p.Assignment), id, s.Leader, s.ISR))
				d.Unclean, d.EmptyLog = true, true
				return d, nil
			}
		}
		return Decision{}, kerr.New(kerr.EligibleLeadersNotAvailable,
			"no assigned replica of %v is live (ISR %v)", []int32(p.Assignment), s.ISR)
	}
	return Decision{}, kerr.New(kerr.EligibleLeadersNotAvailable,
		"no live ISR member: assignment %v, ISR %v, live replicas %v; unclean leader election is disabled",
		[]int32(p.Assignment), s.ISR, liveReplicas(p.Assignment, b))
}

// ElectPreferred moves leadership to the preferred replica, the head of the
// assignment, if it is live and in the ISR (F19, F21). The ISR is unchanged.
// A partition already led by its preferred replica gets ELECTION_NOT_NEEDED;
// one whose preferred replica cannot lead gets PREFERRED_LEADER_NOT_AVAILABLE.
func ElectPreferred(p Partition, b Brokers) (Decision, error) {
	s := p.State
	pref := p.Assignment.Preferred()
	if pref == NoLeader {
		return Decision{}, kerr.New(kerr.PreferredLeaderNotAvailable, "partition has no assigned replicas")
	}
	if s.Leader == pref {
		return Decision{}, kerr.New(kerr.ElectionNotNeeded, "preferred replica %d is already the leader", pref)
	}
	if !b.Live(pref) {
		return Decision{}, kerr.New(kerr.PreferredLeaderNotAvailable,
			"preferred replica %d is not live (leader %d, ISR %v)", pref, s.Leader, s.ISR)
	}
	if !s.InISR(pref) {
		return Decision{}, kerr.New(kerr.PreferredLeaderNotAvailable,
			"preferred replica %d is not in the ISR %v (leader %d)", pref, s.ISR, s.Leader)
	}
	return controllerWrite(s, pref, s.Clone().ISR,
		fmt.Sprintf("preferred election: leadership moves from %d to preferred replica %d", s.Leader, pref)), nil
}

// ElectControlledShutdown elects a leader that is live, in the ISR and not
// shutting down, first in assignment order (F19), and removes every
// shutting-down broker from the ISR (Kafka's ControlledShutdown strategy).
// Call it for a partition led by a shutting-down broker. It fails with
// ELIGIBLE_LEADERS_NOT_AVAILABLE when no other ISR member can take over; the
// leader then stays where it is until the broker goes away.
func ElectControlledShutdown(p Partition, b Brokers) (Decision, error) {
	s := p.State
	for _, id := range p.Assignment {
		if b.Live(id) && s.InISR(id) {
			isr := filterISR(s.ISR, func(r int32) bool { return !b.ShuttingDown[r] })
			return controllerWrite(s, id, isr,
				fmt.Sprintf("controlled shutdown: leadership moves from %d to %d", s.Leader, id)), nil
		}
	}
	return Decision{}, kerr.New(kerr.EligibleLeadersNotAvailable,
		"no ISR member outside the shutting-down brokers can lead: assignment %v, ISR %v, live replicas %v",
		[]int32(p.Assignment), s.ISR, liveReplicas(p.Assignment, b))
}

// ElectUnclean is the ElectLeaders request with election type UNCLEAN
// (KIP-460). As in Kafka, it only acts on a partition without a live leader
// (ELECTION_NOT_NEEDED otherwise), and it still prefers a clean choice: it
// runs the offline election with unclean election allowed, so a live ISR
// member wins over an out-of-sync replica. With no live assigned replica it
// fails with ELIGIBLE_LEADERS_NOT_AVAILABLE.
func ElectUnclean(p Partition, b Brokers) (Decision, error) {
	s := p.State
	if s.Leader != NoLeader && b.Live(s.Leader) {
		return Decision{}, kerr.New(kerr.ElectionNotNeeded, "partition already has live leader %d", s.Leader)
	}
	return electOffline(p, b, true)
}

// liveReplicas lists the assigned replicas that are live, for error messages.
func liveReplicas(a Assignment, b Brokers) []int32 {
	out := []int32{}
	for _, id := range a {
		if b.Live(id) {
			out = append(out, id)
		}
	}
	return out
}
