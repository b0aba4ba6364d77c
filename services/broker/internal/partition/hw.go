package partition

import (
	"slices"
	"time"
)

// EffectiveMinISR is min(min.insync.replicas, replication factor): a topic
// may set a min ISR its assignment can never reach (F16). The replicas a
// reassignment is adding do not count: a one-replica topic with a min ISR
// of 2, moved to another broker, would otherwise hold its HW (and refuse
// acks=all writes) for the whole copy, or as long as the new replica's
// broker is down.
func (p *Partition) EffectiveMinISR() int {
	return min(p.cfg.MinInsyncReplicas, p.ReplicationFactor())
}

// UnderMinISR reports whether this leader's committed ISR is smaller than
// the effective min ISR. Like Kafka it counts the committed ISR, not the
// maximal one: an expansion that may still be refused must not release the
// HW, and a shrink in flight has not yet made the ISR smaller.
func (p *Partition) UnderMinISR() bool {
	return p.role == RoleLeader && len(p.isr) < p.EffectiveMinISR()
}

// OnLocalAppend records the local LEO after an append. On the leader the HW
// is re-evaluated (F5: with a one-member ISR an append alone commits).
func (p *Partition) OnLocalAppend(newLEO int64, now time.Time) HWUpdate {
	p.leo = newLEO
	if p.role != RoleLeader {
		return HWUpdate{Before: p.hw, After: p.hw}
	}
	return p.maybeIncrementHW(now.UnixMilli())
}

// ReevaluateHW is F5 on time alone, run with the ISR expiration (every
// replica.lag.time.max.ms / 2): a follower outside the ISR holds the HW back
// only while it is caught up, and once it has not been for
// replica.lag.time.max.ms (it stopped fetching) it no longer counts. On a
// quiet partition no fetch or append re-evaluates the HW after that, and
// it stayed below the LEO with the acks=all writes it held.
func (p *Partition) ReevaluateHW(now time.Time) HWUpdate {
	return p.maybeIncrementHW(now.UnixMilli())
}

// maybeIncrementHW is F5 (Kafka's maybeIncrementLeaderHW). The HW is the
// smallest LEO among the leader and
//   - every member of the maximal ISR, and
//   - every follower that is caught up and ISR-eligible but not yet in the
//     ISR, so a rejoining follower is not left forever behind the HW;
//
// it only ever moves up, and not at all while the committed ISR is smaller
// than the effective min ISR (KAFKA-15583, KIP-966).
func (p *Partition) maybeIncrementHW(nowMs int64) HWUpdate {
	u := HWUpdate{Before: p.hw, After: p.hw}
	if p.role != RoleLeader {
		return u
	}
	if p.UnderMinISR() {
		u.HeldByMinISR = true
		return u
	}
	maximal := p.maximalISR()
	newHW := p.leo
	for _, id := range p.replicas {
		f := p.followers[id]
		if f == nil || f.leo >= newHW {
			continue
		}
		if slices.Contains(maximal, id) || (f.caughtUp(p.leo, nowMs, p.lagMs()) && p.isrEligible(f)) {
			newHW = f.leo
		}
	}
	if newHW > p.hw {
		p.hw = newHW
	}
	u.After = p.hw
	return u
}
