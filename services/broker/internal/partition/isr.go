package partition

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// isrEligible is F9's eligibility (Kafka's isReplicaIsrEligible): the broker
// is alive and not fenced or shutting down (KIP-841), and the epoch its
// fetches carry is the one it is registered with, so a broker that lost its
// disk and came back is not re-admitted on its old identity (KIP-903).
func (p *Partition) isrEligible(f *follower) bool {
	b := p.cfg.Brokers
	if b == nil {
		return true
	}
	if !b.IsrEligible(f.id) || !f.hasFetched {
		return false
	}
	if f.brokerEpoch == -1 {
		return true
	}
	registered, ok := b.BrokerEpoch(f.id)
	return !ok || registered == f.brokerEpoch
}

// maybeExpand is F9: a follower outside the ISR joins once its LEO reaches
// the HW and the start of the current leader epoch (KAFKA-7128: below the
// epoch start it may lack committed records the HW does not show yet), if
// it is eligible and no other change is in flight. The expansion counts in
// the maximal ISR at once, which only makes the HW stricter.
func (p *Partition) maybeExpand(f *follower) *Proposal {
	if p.pending != nil || slices.Contains(p.isr, f.id) || !p.isrEligible(f) {
		return nil
	}
	if f.leo < p.hw || p.epochStart == UndefinedOffset || f.leo < p.epochStart {
		return nil
	}
	pr := p.propose(ExpandISR, []int32{f.id}, withID(p.isr, f.id))
	pr.Reason = fmt.Sprintf("broker %d caught up: log end offset %d reached the HW %d and the leader epoch's start %d",
		f.id, f.leo, p.hw, p.epochStart)
	p.pending.Reason = pr.Reason
	return &pr
}

// ShrinkOutcome is the result of MaybeShrinkISR.
type ShrinkOutcome struct {
	// Blocked is set when a change is already in flight (one at a time, F7).
	Blocked bool
	// OutOfSync lists the ISR members found out of sync.
	OutOfSync []int32
	// Proposal is the shrink to send as AlterPartition, nil if none.
	Proposal *Proposal
}

// MaybeShrinkISR is F7, run periodically (Kafka: every
// replica.lag.time.max.ms / 2). A follower is out of sync iff its LEO is not
// the leader's and it has not been caught up for replica.lag.time.max.ms;
// that covers both a stuck follower (no fetches) and a slow one (fetches
// that never reach the LEO). The leader never removes itself. Until the
// shrink commits the HW still waits for the old ISR: a refused shrink must
// not have let it advance.
func (p *Partition) MaybeShrinkISR(now time.Time) ShrinkOutcome {
	if p.role != RoleLeader {
		return ShrinkOutcome{}
	}
	if p.pending != nil {
		return ShrinkOutcome{Blocked: true}
	}
	out := p.outOfSync(now.UnixMilli())
	if len(out) == 0 {
		return ShrinkOutcome{}
	}
	pr := p.propose(ShrinkISR, out, withoutIDs(p.isr, out))
	pr.Reason = p.outOfSyncReason(out, now.UnixMilli())
	p.pending.Reason = pr.Reason
	return ShrinkOutcome{OutOfSync: out, Proposal: &pr}
}

// outOfSyncReason names, for a shrink's log line, each replica found out
// of sync with what made it so: where it stands against the leader's log
// end and how long it has not caught up (or that it has not fetched in
// this leadership).
func (p *Partition) outOfSyncReason(out []int32, nowMs int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "not caught up within replica.lag.time.max.ms (%d ms) with the leader's log end offset %d (HW %d):", p.lagMs(), p.leo, p.hw)
	for i, id := range out {
		if i > 0 {
			b.WriteString(";")
		}
		f := p.followers[id]
		switch {
		case f == nil:
			fmt.Fprintf(&b, " broker %d unknown to the leader", id)
		case !f.hasFetched:
			fmt.Fprintf(&b, " broker %d no fetch in %d ms of this leadership", id, f.caughtUpAgeMs(nowMs))
		default:
			fmt.Fprintf(&b, " broker %d at offset %d, last caught up %d ms ago, last fetch %d ms ago", id, f.leo,
				f.caughtUpAgeMs(nowMs), nowMs-f.lastFetchMs)
		}
	}
	return b.String()
}

func (p *Partition) outOfSync(nowMs int64) []int32 {
	var out []int32
	for _, id := range p.isr {
		if id == p.cfg.LocalID {
			continue
		}
		f := p.followers[id]
		if f == nil || !f.caughtUp(p.leo, nowMs, p.lagMs()) {
			out = append(out, id)
		}
	}
	return out
}
