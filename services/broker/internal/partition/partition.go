package partition

import (
	"slices"
	"time"

	"tidemark.io/services/platform/kerr"
)

// Partition is one replica of one partition on this broker.
type Partition struct {
	cfg Config

	role           Role
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32 // AR, in assignment order
	adding         []int32 // those a reassignment in flight is adding
	isr            []int32 // last committed ISR, sorted

	// pending is the one AlterPartition in flight (F7, F9, F10);
	// awaitingMetadata marks one the controller rejected for good.
	pending          *Proposal
	awaitingMetadata bool
	seq              uint64

	// epochStart is the first offset of the current leader epoch while
	// leader (KAFKA-7128), UndefinedOffset otherwise.
	epochStart int64

	hw, leo, logStart int64
	followers         map[int32]*follower

	// leaderEnd is what a follower learned from its leader's settled
	// truncation answer (OnLeaderEpochEnd), for consumers reading here.
	leaderEnd leaderEpochEnd
}

// New returns a replica with no role yet, over a log in the given state.
func New(cfg Config, log LogState) *Partition {
	p := &Partition{
		cfg:            cfg.withDefaults(),
		leader:         -1,
		leaderEpoch:    UndefinedEpoch,
		partitionEpoch: -1,
		epochStart:     UndefinedOffset,
		logStart:       log.LogStartOffset,
		leo:            log.LogEndOffset,
		hw:             log.HighWatermark,
	}
	p.clampHW()
	return p
}

// clampHW keeps the HW inside [logStart, LEO], as Kafka's updateHighWatermark.
func (p *Partition) clampHW() {
	p.hw = min(max(p.hw, p.logStart), p.leo)
}

func (p *Partition) lagMs() int64 { return p.cfg.ReplicaLagTimeMax.Milliseconds() }

// Role returns this replica's role.
func (p *Partition) Role() Role { return p.role }

// IsLeader reports whether this replica is the leader.
func (p *Partition) IsLeader() bool { return p.role == RoleLeader }

// Leader returns the leader's broker id, -1 when unknown.
func (p *Partition) Leader() int32 { return p.leader }

// LeaderEpoch returns the current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch }

// PartitionEpoch returns the current partition epoch.
func (p *Partition) PartitionEpoch() int32 { return p.partitionEpoch }

// EpochStartOffset returns the first offset of the current leader epoch
// while leading (UndefinedOffset otherwise).
func (p *Partition) EpochStartOffset() int64 { return p.epochStart }

// HighWatermark returns the HW.
func (p *Partition) HighWatermark() int64 { return p.hw }

// LogEndOffset returns the local LEO as last reported.
func (p *Partition) LogEndOffset() int64 { return p.leo }

// LogStartOffset returns the local log start offset as last reported.
func (p *Partition) LogStartOffset() int64 { return p.logStart }

// ISR returns the last committed ISR.
func (p *Partition) ISR() []int32 { return slices.Clone(p.isr) }

// Replicas returns the assignment.
func (p *Partition) Replicas() []int32 { return slices.Clone(p.replicas) }

// ReplicationFactor is the number of replicas less those a reassignment in
// flight is adding, which are not expected in the ISR yet (Kafka's
// OngoingReassignmentState.replicationFactor, which UnderReplicatedPartitions
// compares the ISR with).
func (p *Partition) ReplicationFactor() int {
	n := 0
	for _, id := range p.replicas {
		if !slices.Contains(p.adding, id) {
			n++
		}
	}
	return n
}

// MaximalISR is the ISR the leader uses for the HW and acks=all: the
// committed ISR plus a replica whose expansion is in flight. A shrink in
// flight does not count until it commits (F5, F7, KIP-497).
func (p *Partition) MaximalISR() []int32 { return slices.Clone(p.maximalISR()) }

// maximalISR is MaximalISR without the copy, for reading in place: the HW
// and produce checks run on every write.
func (p *Partition) maximalISR() []int32 {
	if p.pending != nil && p.pending.Kind == ExpandISR {
		return p.pending.To
	}
	return p.isr
}

// InSyncFollowersFetchedSince reports whether this leader's maximal ISR
// holds another replica and every other member fetched from it, at this
// leader epoch, at or after sinceMs (a fetch naming a newer epoch is
// refused before it is recorded). A follower that heard of another leader
// stops fetching here, so this is the evidence a leader whose lease etcd
// has not confirmed needs to keep serving (replica.Fence).
func (p *Partition) InSyncFollowersFetchedSince(sinceMs int64) bool {
	if p.role != RoleLeader {
		return false
	}
	others := 0
	for _, id := range p.maximalISR() {
		if id == p.cfg.LocalID {
			continue
		}
		f := p.followers[id]
		if f == nil || f.lastFetchMs < sinceMs {
			return false
		}
		others++
	}
	return others > 0
}

// Pending returns the AlterPartition in flight, if any, and whether it is
// parked until new metadata arrives (F10).
func (p *Partition) Pending() (Proposal, bool, bool) {
	if p.pending == nil {
		return Proposal{}, false, false
	}
	return p.pending.clone(), p.awaitingMetadata, true
}

// SetLogStartOffset records a new local log start offset (retention,
// DeleteRecords, a follower following the leader's start).
func (p *Partition) SetLogStartOffset(offset int64) {
	p.logStart = offset
	p.clampHW()
}

// SetMinInsyncReplicas applies a changed min.insync.replicas. Lowering it may
// release a HW held by KAFKA-15583, so the leader re-evaluates the HW.
func (p *Partition) SetMinInsyncReplicas(n int, now time.Time) HWUpdate {
	if n <= 0 {
		n = 1
	}
	p.cfg.MinInsyncReplicas = n
	return p.maybeIncrementHW(now.UnixMilli())
}

// notLeader builds NOT_LEADER_OR_FOLLOWER with a hint naming the leader we
// know of, so a client can go there without a metadata round trip.
func (p *Partition) notLeader(format string, args ...any) error {
	e := kerr.New(kerr.NotLeaderOrFollower, format, args...)
	p.addLeaderHint(e)
	return e
}

func (p *Partition) addLeaderHint(e *kerr.Error) {
	if p.leader >= 0 {
		e.Leader = &kerr.LeaderHint{ID: p.leader, LeaderEpoch: p.leaderEpoch}
	}
}
