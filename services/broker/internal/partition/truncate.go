package partition

import "fmt"

// Truncation is a follower's truncation decision.
type Truncation struct {
	// Offset is the offset to truncate the log to (no-op at or above the LEO).
	Offset int64
	// Done is false when the leader answered with an epoch this follower
	// does not have (KIP-279): after truncating, ask again with the latest
	// epoch left in the local cache (the next fetch's LastFetchedEpoch).
	Done bool
}

func (t Truncation) String() string {
	if t.Done {
		return fmt.Sprintf("truncate to %d, done", t.Offset)
	}
	return fmt.Sprintf("truncate to %d, ask again", t.Offset)
}

// TruncationFor is Kafka's getOffsetTruncationState (F12, KIP-101, KIP-279).
// leader is the leader's (epoch, end offset) for the epoch the follower asked
// about; local is the follower's epoch cache; leo and hw are the follower's.
//
//   - The leader does not know the end offset: fall back to the HW.
//   - The leader sent no epoch (pre-KIP-279 answer): min(leader end, LEO).
//   - The follower has no epoch <= the leader's: min(leader end, LEO).
//   - The follower's nearest epoch is older than the leader's (the follower
//     never saw it): truncate to the end of that older epoch and ask again.
//   - Otherwise: min(leader end, follower end of that epoch, LEO).
func TruncationFor(leader EpochEndOffset, local EpochSource, leo, hw int64) Truncation {
	switch {
	case leader.EndOffset == UndefinedOffset:
		return Truncation{Offset: min(hw, leo), Done: true}
	case leader.Epoch == UndefinedEpoch:
		return Truncation{Offset: min(leader.EndOffset, leo), Done: true}
	}
	epoch, end := local.EndOffsetFor(leader.Epoch)
	switch {
	case epoch == UndefinedEpoch || end == UndefinedOffset:
		return Truncation{Offset: min(leader.EndOffset, leo), Done: true}
	case epoch != leader.Epoch:
		return Truncation{Offset: min(end, leo), Done: false}
	}
	return Truncation{Offset: min(leader.EndOffset, end, leo), Done: true}
}

// OutOfRangeKind is a follower's way out of OFFSET_OUT_OF_RANGE.
type OutOfRangeKind int

const (
	// ResumeAt: keep the log and fetch from Offset.
	ResumeAt OutOfRangeKind = iota
	// TruncateToLeaderEnd: the leader's log is shorter (an unclean election);
	// truncate to Offset, the leader's LEO, and fetch from there.
	TruncateToLeaderEnd
	// TruncateFully: the log ends before the leader's log start; empty it,
	// start it at Offset and fetch from there.
	TruncateFully
)

func (k OutOfRangeKind) String() string {
	switch k {
	case ResumeAt:
		return "resume"
	case TruncateToLeaderEnd:
		return "truncate-to-leader-end"
	case TruncateFully:
		return "truncate-fully"
	}
	return fmt.Sprintf("OutOfRangeKind(%d)", int(k))
}

// OutOfRangeAction is the decision of OutOfRange.
type OutOfRangeAction struct {
	Kind   OutOfRangeKind
	Offset int64
}

func (a OutOfRangeAction) String() string { return fmt.Sprintf("%s at %d", a.Kind, a.Offset) }

// OutOfRange is F14 (Kafka's fetchOffsetAndTruncate): what a follower does
// when the leader answers OFFSET_OUT_OF_RANGE, given its LEO and the leader's
// LEO and log start offset.
func OutOfRange(followerLEO, leaderLEO, leaderLogStart int64) OutOfRangeAction {
	switch {
	case leaderLEO < followerLEO:
		return OutOfRangeAction{Kind: TruncateToLeaderEnd, Offset: leaderLEO}
	case leaderLogStart > followerLEO:
		return OutOfRangeAction{Kind: TruncateFully, Offset: leaderLogStart}
	}
	return OutOfRangeAction{Kind: ResumeAt, Offset: followerLEO}
}
