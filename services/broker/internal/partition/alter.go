package partition

import (
	"fmt"
	"time"

	"tidemark.io/services/platform/kerr"
)

// AlterPartitionResult is the controller's answer to one AlterPartition.
type AlterPartitionResult struct {
	// Error is kerr.None on success.
	Error kerr.Code
	// On success: the committed state.
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// AlterAction is what HandleAlterPartition did.
type AlterAction int

const (
	// AlterIgnored: the answer is for a proposal no longer in flight, or
	// carries a state older than ours. Nothing changed.
	AlterIgnored AlterAction = iota
	// AlterCommitted: the new ISR and partition epoch are in effect.
	AlterCommitted
	// AlterReverted: the controller refused the change for good
	// (INELIGIBLE_REPLICA); back to the last committed ISR.
	AlterReverted
	// AlterAwaitMetadata: our state is out of date (fenced, stale version,
	// ...). The change stays parked, blocking others, until new metadata
	// replaces it; do not resend.
	AlterAwaitMetadata
	// AlterRetry: an unexpected error; resend Resend.
	AlterRetry
)

func (a AlterAction) String() string {
	switch a {
	case AlterIgnored:
		return "ignored"
	case AlterCommitted:
		return "committed"
	case AlterReverted:
		return "reverted"
	case AlterAwaitMetadata:
		return "await-metadata"
	case AlterRetry:
		return "retry"
	}
	return fmt.Sprintf("AlterAction(%d)", int(a))
}

// AlterOutcome is the result of HandleAlterPartition.
type AlterOutcome struct {
	Action AlterAction
	// Reason explains the action for the log.
	Reason string
	// Resend is the request to send again when Action is AlterRetry.
	Resend *AlterPartitionRequest
	// Kind is the direction of the change when Action is AlterCommitted.
	Kind ChangeKind
	HW   HWUpdate
}

// HandleAlterPartition applies the controller's answer to req (F10, Kafka's
// handleAlterPartitionUpdate / handleAlterPartitionError).
func (p *Partition) HandleAlterPartition(req AlterPartitionRequest, res AlterPartitionResult, now time.Time) AlterOutcome {
	out := AlterOutcome{HW: HWUpdate{Before: p.hw, After: p.hw}}
	if p.role != RoleLeader || p.pending == nil || p.pending.Request.Seq != req.Seq || p.awaitingMetadata {
		// State moved on (new metadata, a new proposal): the answer is stale.
		out.Reason = "the proposal is no longer in flight"
		return out
	}
	if res.Error == kerr.None {
		return p.commitAlter(res, now)
	}
	// Kafka's AlterPartition rules (revert, wait for metadata, resend),
	// not the kerr table's client retry policy: INVALID_UPDATE_VERSION and
	// NEW_LEADER_ELECTED are final to a client but mean "wait for the
	// controller's push" here.
	switch res.Error {
	case kerr.IneligibleReplica:
		// The controller says our partition epoch is right and the request
		// was not applied, so the last committed state is exact.
		out.Action = AlterReverted
		out.Reason = fmt.Sprintf("controller refused %q with %s; ISR stays %s", p.pending.LogLine(), res.Error, FormatIDs(p.isr))
		p.pending = nil
		// The maximal ISR may have shrunk back: re-evaluate.
		out.HW = p.maybeIncrementHW(now.UnixMilli())
	case kerr.FencedLeaderEpoch, kerr.InvalidUpdateVersion, kerr.UnknownTopicOrPartition,
		kerr.InvalidRequest, kerr.NewLeaderElected:
		out.Action = AlterAwaitMetadata
		out.Reason = fmt.Sprintf("controller answered %s: waiting for new metadata", res.Error)
		p.awaitingMetadata = true
	default:
		// Includes STALE_BROKER_EPOCH and NOT_CONTROLLER: the broker stamps
		// its current registration and finds the controller on each send.
		out.Action = AlterRetry
		out.Reason = fmt.Sprintf("controller answered %s: retrying", res.Error)
		r := p.pending.clone().Request
		out.Resend = &r
	}
	return out
}

func (p *Partition) commitAlter(res AlterPartitionResult, now time.Time) AlterOutcome {
	out := AlterOutcome{HW: HWUpdate{Before: p.hw, After: p.hw}}
	// Kafka leaves the change pending in both cases below; nothing but new
	// metadata can end it, so it is parked as such.
	switch {
	case res.LeaderEpoch != p.leaderEpoch:
		out.Action = AlterAwaitMetadata
		out.Reason = fmt.Sprintf("answer is for leader epoch %d, ours is %d: waiting for new metadata", res.LeaderEpoch, p.leaderEpoch)
		p.awaitingMetadata = true
		return out
	case res.PartitionEpoch < p.partitionEpoch:
		out.Reason = fmt.Sprintf("answer's partition epoch %d is older than ours, %d", res.PartitionEpoch, p.partitionEpoch)
		p.awaitingMetadata = true
		return out
	}
	// A newer partition epoch is the change applied; an equal one means the
	// controller already had this state. Either way the change is over.
	out.Kind = p.pending.Kind
	p.isr = distinctIDs(res.ISR)
	p.partitionEpoch = res.PartitionEpoch
	p.pending = nil
	out.Action = AlterCommitted
	out.Reason = fmt.Sprintf("ISR updated to %s and partition epoch updated to %d", FormatIDs(p.isr), p.partitionEpoch)
	if p.UnderMinISR() {
		out.Reason += " (under-min-isr)"
	}
	out.HW = p.maybeIncrementHW(now.UnixMilli())
	return out
}
