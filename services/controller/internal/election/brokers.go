package election

import "fmt"

// OnBrokerFailure computes one partition's new state after brokers have
// failed; b is the view without them. If the leader has no registration any
// more, the offline election runs (F19/F20). If no replica can be elected, or
// the leader survived, the dead replicas leave the ISR, which is never
// emptied and loses its leader if the leader died (F19).
//
// A leader that is registered but shutting down is left to the controlled
// shutdown path: Kafka re-runs the offline election for it on any broker
// failure, which with unclean election enabled can hand a gracefully
// stopping broker's partition to an out-of-sync replica.
func OnBrokerFailure(p Partition, b Brokers, allowUnclean bool) Decision {
	s := p.State
	if !b.Registered(s.Leader) {
		if d, err := ElectOffline(p, b, allowUnclean); err == nil {
			return d
		}
	}
	var dead []int32
	for _, id := range s.ISR {
		if !b.Registered(id) {
			dead = append(dead, id)
		}
	}
	if len(dead) == 0 {
		return unchanged(s, "no failed replica in the ISR and leader unaffected")
	}
	return RemoveFromISR(s, dead...)
}

// OnBrokerReturn computes one partition's new state after brokers have
// registered again; b is the view with them. A partition with a registered
// leader is unchanged: a returning follower rejoins the ISR through its
// leader's AlterPartition once caught up (F9), and a returning preferred
// replica gets its leadership back through the rebalance (F21). A partition
// without one gets the offline election, which may now succeed (F19/F20).
func OnBrokerReturn(p Partition, b Brokers, allowUnclean bool) Decision {
	s := p.State
	if b.Registered(s.Leader) {
		return unchanged(s, fmt.Sprintf("leader %d is registered", s.Leader))
	}
	d, err := ElectOffline(p, b, allowUnclean)
	if err != nil {
		return unchanged(s, "still offline: "+err.Error())
	}
	return d
}

// OnControlledShutdown computes one partition's new state when broker id asks
// for a controlled shutdown (Kafka's doControlledShutdown). Partitions with a
// single replica are left alone: there is nowhere to move them. If id leads,
// leadership moves to another live ISR member and the shutting-down brokers
// leave the ISR; if no member can take over, the error says so and the broker
// keeps leading. If id is a follower in the ISR, it is removed (never
// emptying the ISR). id is treated as shutting down whether or not b says so.
func OnControlledShutdown(p Partition, b Brokers, id int32) (Decision, error) {
	s := p.State
	if len(p.Assignment) <= 1 || !p.Assignment.Contains(id) {
		return unchanged(s, fmt.Sprintf("broker %d: nothing to move", id)), nil
	}
	b = b.withShuttingDown(id)
	if s.Leader == id {
		return ElectControlledShutdown(p, b)
	}
	if s.InISR(id) {
		d := RemoveFromISR(s, id)
		d.Reason = fmt.Sprintf("controlled shutdown of follower %d: %s", id, d.Reason)
		return d, nil
	}
	return unchanged(s, fmt.Sprintf("broker %d is neither leader nor in ISR %v", id, s.ISR)), nil
}
