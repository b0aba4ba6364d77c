package partition

import (
	"fmt"
	"slices"
	"time"

	"tidemark.io/services/platform/kerr"
)

// RoleChange is the outcome of MakeLeader or MakeFollower.
type RoleChange struct {
	// Ignored is set when the state was not newer than what this replica
	// already has; Reason says why. Nothing changed.
	Ignored bool
	Reason  string
	// Older is set on an ignored state that is not the current one sent
	// again but an older one, or another decision under the same epochs.
	// Every state a broker applies was written to etcd first, so a
	// controller that loaded etcd can only send it older ones if etcd's
	// metadata went backwards (restored from an older snapshot).
	Older bool
	// NewLeaderEpoch is set when the leader epoch advanced. A leader must
	// then record (LeaderEpoch, EpochStartOffset) in the log's epoch cache
	// before any append (F12, KAFKA-7415); a follower must restart fetching
	// (StartFetching).
	NewLeaderEpoch bool
	// EpochStartOffset is the first offset of the new epoch (the LEO at
	// election), set for a leader with NewLeaderEpoch, else UndefinedOffset.
	EpochStartOffset int64
	// RoleChanged is set when this replica changed role.
	RoleChanged bool
	// HW is the leader's HW re-evaluation (the ISR may be down to the leader).
	HW HWUpdate
}

// MakeLeader applies a state naming this broker as leader.
//
// A state older than the current one is ignored, and so is one with the same
// leader epoch and no newer partition epoch (F22). A state with the same
// leader epoch but a newer partition epoch refreshes the assignment and ISR
// only: the controller (or a metadata update racing our own AlterPartition
// answer) changed the ISR without a new leader.
func (p *Partition) MakeLeader(s LeaderAndISR, localLEO int64, now time.Time) (RoleChange, error) {
	if s.Leader != p.cfg.LocalID {
		return RoleChange{}, kerr.New(kerr.InvalidRequest, "make-leader on broker %d names leader %d", p.cfg.LocalID, s.Leader)
	}
	if err := p.checkAssigned(s); err != nil {
		return RoleChange{}, err
	}
	if why, older := p.staleReason(s, RoleLeader); why != "" {
		return RoleChange{Ignored: true, Reason: why, Older: older, EpochStartOffset: UndefinedOffset}, nil
	}
	nowMs := now.UnixMilli()
	wasLeader := p.role == RoleLeader
	newEpoch := s.LeaderEpoch > p.leaderEpoch

	p.leo = localLEO
	p.clampHW()
	p.applyState(s, RoleLeader, !wasLeader, nowMs)

	rc := RoleChange{NewLeaderEpoch: newEpoch, RoleChanged: !wasLeader, EpochStartOffset: UndefinedOffset}
	if newEpoch {
		// F12/KAFKA-7415: the epoch starts at the LEO, recorded before any
		// append so that followers holding later epochs can truncate.
		p.epochStart = localLEO
		rc.EpochStartOffset = localLEO
		for _, f := range p.followers {
			f.reset(nowMs, localLEO, !wasLeader, slices.Contains(p.isr, f.id))
		}
	}
	rc.HW = p.maybeIncrementHW(nowMs)
	return rc, nil
}

// MakeFollower applies a state naming another broker as leader. The broker
// restarts fetching when NewLeaderEpoch is set (Kafka restarts fetchers on
// every new leader epoch, whether or not the leader moved).
func (p *Partition) MakeFollower(s LeaderAndISR, localLEO int64, now time.Time) (RoleChange, error) {
	if s.Leader == p.cfg.LocalID {
		return RoleChange{}, kerr.New(kerr.InvalidRequest, "make-follower on broker %d names itself as leader", p.cfg.LocalID)
	}
	if err := p.checkAssigned(s); err != nil {
		return RoleChange{}, err
	}
	if why, older := p.staleReason(s, RoleFollower); why != "" {
		return RoleChange{Ignored: true, Reason: why, Older: older, EpochStartOffset: UndefinedOffset}, nil
	}
	wasFollower := p.role == RoleFollower
	newEpoch := s.LeaderEpoch > p.leaderEpoch
	p.leo = localLEO
	p.clampHW()
	p.applyState(s, RoleFollower, true, now.UnixMilli())
	p.epochStart = UndefinedOffset
	return RoleChange{
		NewLeaderEpoch:   newEpoch,
		RoleChanged:      !wasFollower,
		EpochStartOffset: UndefinedOffset,
		HW:               HWUpdate{Before: p.hw, After: p.hw},
	}, nil
}

func (p *Partition) checkAssigned(s LeaderAndISR) error {
	if !slices.Contains(s.Replicas, p.cfg.LocalID) {
		return kerr.New(kerr.UnknownTopicOrPartition, "broker %d is not in the assignment %s", p.cfg.LocalID, FormatIDs(s.Replicas))
	}
	return nil
}

// staleReason says why s is not newer than the current state, or "";
// older is set when s is older than the current state, or names another
// leader under the current epochs, rather than being the current state
// again or one an ISR change of this leader overtook.
func (p *Partition) staleReason(s LeaderAndISR, role Role) (why string, older bool) {
	switch {
	case s.PartitionEpoch < p.partitionEpoch:
		// The same leader in the same leader epoch is a state sent before
		// an ISR change the leader has since committed (AlterPartition's
		// answer does not queue behind the controller's requests, so a
		// full push after a failover can arrive after it): ignored, as
		// Kafka does. Any other older state came from etcd going back.
		overtaken := s.LeaderEpoch == p.leaderEpoch && s.Leader == p.leader
		return fmt.Sprintf("partition epoch %d is older than the current %d", s.PartitionEpoch, p.partitionEpoch), !overtaken
	case s.LeaderEpoch < p.leaderEpoch:
		return fmt.Sprintf("leader epoch %d is older than the current %d", s.LeaderEpoch, p.leaderEpoch), true
	case s.LeaderEpoch > p.leaderEpoch:
		return "", false
	case s.PartitionEpoch == p.partitionEpoch:
		if s.Leader != p.leader && p.role != RoleNone {
			return fmt.Sprintf("leader %d in leader epoch %d and partition epoch %d differs from the current leader %d under the same epochs",
				s.Leader, s.LeaderEpoch, s.PartitionEpoch, p.leader), true
		}
		return fmt.Sprintf("leader epoch %d and partition epoch %d are not newer than the current ones", s.LeaderEpoch, s.PartitionEpoch), false
	case p.role != role || s.Leader != p.leader:
		return fmt.Sprintf("leader %d in leader epoch %d differs from the current leader %d without a new leader epoch", s.Leader, s.LeaderEpoch, p.leader), false
	}
	return "", false
}

// applyState installs assignment, ISR and epochs. Any AlterPartition in
// flight is dropped: the new state supersedes it (Kafka overwrites its
// partition state the same way), and a late answer is then ignored.
func (p *Partition) applyState(s LeaderAndISR, role Role, freshFollowers bool, nowMs int64) {
	p.role = role
	p.leader = s.Leader
	p.leaderEpoch = s.LeaderEpoch
	p.partitionEpoch = s.PartitionEpoch
	p.replicas = slices.Clone(s.Replicas)
	p.adding = slices.Clone(s.Adding)
	p.isr = distinctIDs(s.ISR)
	p.pending = nil
	p.awaitingMetadata = false

	if role != RoleLeader {
		p.followers = nil
		return
	}
	if freshFollowers || p.followers == nil {
		p.followers = make(map[int32]*follower, len(s.Replicas))
	}
	for id := range p.followers {
		if !slices.Contains(s.Replicas, id) {
			delete(p.followers, id)
		}
	}
	for _, id := range s.Replicas {
		if id != p.cfg.LocalID && p.followers[id] == nil {
			p.followers[id] = newFollower(id, nowMs)
		}
	}
}
