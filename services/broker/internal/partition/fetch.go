package partition

import (
	"slices"
	"time"

	"tidemark.io/services/platform/kerr"
)

// NoEpoch is the "field absent" value of CurrentLeaderEpoch, LastFetchedEpoch
// and broker epochs in requests.
const NoEpoch = -1

// ValidateRead checks the CurrentLeaderEpoch of a fetch or list-offsets
// request (F3, KIP-320): an older epoch is FENCED_LEADER_EPOCH (the sender
// is a zombie), a newer one UNKNOWN_LEADER_EPOCH (we have not seen it yet).
// requireLeader is set for requests only the leader may serve; consumers
// may read from a follower (KIP-392).
func (p *Partition) ValidateRead(currentLeaderEpoch int32, requireLeader bool) error {
	if currentLeaderEpoch != NoEpoch {
		switch {
		case currentLeaderEpoch < p.leaderEpoch:
			e := kerr.New(kerr.FencedLeaderEpoch, "request leader epoch %d is older than the current leader epoch %d", currentLeaderEpoch, p.leaderEpoch)
			p.addLeaderHint(e)
			return e
		case currentLeaderEpoch > p.leaderEpoch:
			e := kerr.New(kerr.UnknownLeaderEpoch, "request leader epoch %d is newer than the current leader epoch %d", currentLeaderEpoch, p.leaderEpoch)
			p.addLeaderHint(e)
			return e
		}
	}
	if p.role == RoleNone || (requireLeader && p.role != RoleLeader) {
		return p.notLeader("broker %d is not the leader (leader %d, leader epoch %d)", p.cfg.LocalID, p.leader, p.leaderEpoch)
	}
	return nil
}

// ValidateFetch checks a follower's fetch before the log read (F3): the
// epoch, that we lead, and that the sender is an assigned follower. An
// unknown replica gets UNKNOWN_LEADER_EPOCH when it sent an epoch (it may be
// a replica added by a reassignment we have not seen yet, so it retries),
// NOT_LEADER_OR_FOLLOWER when it sent none.
func (p *Partition) ValidateFetch(replicaID, currentLeaderEpoch int32) error {
	if err := p.ValidateRead(currentLeaderEpoch, true); err != nil {
		return err
	}
	if replicaID == p.cfg.LocalID || !slices.Contains(p.replicas, replicaID) {
		code := kerr.NotLeaderOrFollower
		if currentLeaderEpoch != NoEpoch {
			code = kerr.UnknownLeaderEpoch
		}
		e := kerr.New(code, "replica %d is not a follower in assignment %s at leader epoch %d", replicaID, FormatIDs(p.replicas), p.leaderEpoch)
		p.addLeaderHint(e)
		return e
	}
	return nil
}

// CheckDivergence is F13 (KIP-595 truncation on fetch) on the leader, for a
// fetch that sent LastFetchedEpoch; it uses this replica's log start offset.
// On a follower (a consumer's KIP-392 read) the epochs the leader told it
// it does not have count too (OnLeaderEpochEnd). See DivergingEpoch.
func (p *Partition) CheckDivergence(lastFetchedEpoch int32, fetchOffset int64, epochs EpochSource) (EpochEndOffset, bool, error) {
	if p.role == RoleFollower && p.leaderEnd.known && p.leaderEnd.leaderEpoch == p.leaderEpoch {
		epochs = withLeaderEnd{EpochSource: epochs, end: p.leaderEnd}
	}
	return DivergingEpoch(lastFetchedEpoch, fetchOffset, p.logStart, epochs)
}

// DivergingEpoch decides whether a follower's log diverges from the leader's.
// The leader looks up the end of lastFetchedEpoch in its own epoch cache;
// when it knows only an older epoch, or that epoch ends before fetchOffset,
// the follower has records the leader does not. The fetch then returns the
// leader's (epoch, end offset) as DivergingEpoch with no records, and the
// follower's fetch state is not updated. An unknown end offset, or a fetch
// offset below the log start, is OFFSET_OUT_OF_RANGE.
func DivergingEpoch(lastFetchedEpoch int32, fetchOffset, logStart int64, epochs EpochSource) (EpochEndOffset, bool, error) {
	if lastFetchedEpoch == NoEpoch {
		return EpochEndOffset{}, false, nil
	}
	epoch, end := epochs.EndOffsetFor(lastFetchedEpoch)
	if epoch == UndefinedEpoch || end == UndefinedOffset {
		return EpochEndOffset{}, false, kerr.New(kerr.OffsetOutOfRange, "cannot determine the end offset of last fetched epoch %d", lastFetchedEpoch)
	}
	if fetchOffset < logStart {
		return EpochEndOffset{}, false, kerr.New(kerr.OffsetOutOfRange, "fetch offset %d is below the log start offset %d", fetchOffset, logStart)
	}
	if epoch < lastFetchedEpoch || end < fetchOffset {
		return EpochEndOffset{Epoch: epoch, EndOffset: end}, true, nil
	}
	return EpochEndOffset{}, false, nil
}

// FollowerFetch is what the leader learned from one follower fetch that
// returned records (or none) without error or divergence.
type FollowerFetch struct {
	ReplicaID int32
	// BrokerEpoch is the fetch's ReplicaEpoch (KIP-903), NoEpoch if absent.
	BrokerEpoch int64
	// FetchOffset is the follower's LEO.
	FetchOffset int64
	// LogStartOffset is the follower's log start, UndefinedOffset if unknown.
	LogStartOffset int64
	// LeaderLEO is the leader's LEO read before the log read (F8).
	LeaderLEO int64
}

// FetchOutcome is the result of UpdateFollowerFetch.
type FetchOutcome struct {
	HW HWUpdate
	// Proposal is an ISR expansion to send as AlterPartition, nil if none.
	Proposal *Proposal
	// LogStartMoved: the follower's log start changed, which may raise the
	// low watermark a DeleteRecords request waits for.
	LogStartMoved bool
}

// UpdateFollowerFetch records a follower fetch on the leader: F8's
// caught-up bookkeeping, the follower's LEO, then maybe an ISR expansion
// (F9) and, if the follower's LEO moved, a HW re-evaluation (F5).
func (p *Partition) UpdateFollowerFetch(ff FollowerFetch, now time.Time) (FetchOutcome, error) {
	if p.role != RoleLeader {
		return FetchOutcome{}, p.notLeader("broker %d is no longer the leader (leader %d, leader epoch %d)", p.cfg.LocalID, p.leader, p.leaderEpoch)
	}
	f := p.followers[ff.ReplicaID]
	if f == nil {
		e := kerr.New(kerr.UnknownLeaderEpoch, "replica %d is not a follower in assignment %s at leader epoch %d", ff.ReplicaID, FormatIDs(p.replicas), p.leaderEpoch)
		p.addLeaderHint(e)
		return FetchOutcome{}, e
	}
	if ff.FetchOffset > ff.LeaderLEO {
		// The log read would have failed; nothing was learned.
		return FetchOutcome{}, kerr.New(kerr.OffsetOutOfRange, "fetch offset %d is beyond the leader's log end offset %d", ff.FetchOffset, ff.LeaderLEO)
	}
	if err := p.checkBrokerEpoch(ff.ReplicaID, ff.BrokerEpoch); err != nil {
		return FetchOutcome{}, err
	}
	nowMs := now.UnixMilli()
	prevLEO, prevStart := f.leo, f.logStart
	f.recordFetch(ff.FetchOffset, ff.LogStartOffset, ff.LeaderLEO, nowMs, ff.BrokerEpoch)

	out := FetchOutcome{Proposal: p.maybeExpand(f), HW: HWUpdate{Before: p.hw, After: p.hw}, LogStartMoved: f.logStart != prevStart}
	if f.leo != prevLEO {
		out.HW = p.maybeIncrementHW(nowMs)
	}
	return out, nil
}

// checkBrokerEpoch rejects a fetch from an earlier incarnation of a broker
// that has since registered again (KIP-380, KIP-903).
func (p *Partition) checkBrokerEpoch(id int32, brokerEpoch int64) error {
	if brokerEpoch == NoEpoch || p.cfg.Brokers == nil {
		return nil
	}
	if registered, ok := p.cfg.Brokers.BrokerEpoch(id); ok && registered > brokerEpoch {
		return kerr.New(kerr.NotLeaderOrFollower, "stale fetch from broker %d: broker epoch %d, registered epoch %d", id, brokerEpoch, registered)
	}
	return nil
}
