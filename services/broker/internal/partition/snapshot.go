package partition

import (
	"slices"
	"time"
)

// FollowerView is the leader's view of one follower, for dashboards.
type FollowerView struct {
	ID    int32
	InISR bool
	// LogEndOffset is UndefinedOffset until the follower fetches in this
	// leadership.
	LogEndOffset   int64
	LogStartOffset int64
	LastCaughtUpMs int64
	LastFetchMs    int64
	// OffsetLag is the leader's LEO minus the follower's (Kafka's lag
	// metric), UndefinedOffset when the follower's LEO is unknown.
	OffsetLag int64
	// CaughtUpAgeMs is how long ago the follower was last caught up; for
	// one not caught up since this leadership began to track it (elected,
	// or the follower added), the time since then.
	CaughtUpAgeMs int64
	// CaughtUp is F7's test: not (yet) out of sync.
	CaughtUp bool
}

// Snapshot is a copy of a replica's state, for dashboards and debugging.
type Snapshot struct {
	LocalID                int32
	Role                   Role
	Leader                 int32
	LeaderEpoch            int32
	PartitionEpoch         int32
	LeaderEpochStartOffset int64
	Replicas               []int32
	ISR                    []int32
	MaximalISR             []int32
	// Pending is the AlterPartition in flight; AwaitingMetadata marks one
	// parked until new metadata arrives.
	Pending           *Proposal
	AwaitingMetadata  bool
	HighWatermark     int64
	LogEndOffset      int64
	LogStartOffset    int64
	ReplicationFactor int
	MinInsyncReplicas int
	EffectiveMinISR   int
	UnderMinISR       bool
	// Followers is set on the leader, in assignment order.
	Followers []FollowerView
}

// Snapshot returns a copy of the state; now dates the caught-up ages.
func (p *Partition) Snapshot(now time.Time) Snapshot {
	s := Snapshot{
		LocalID:                p.cfg.LocalID,
		Role:                   p.role,
		Leader:                 p.leader,
		LeaderEpoch:            p.leaderEpoch,
		PartitionEpoch:         p.partitionEpoch,
		LeaderEpochStartOffset: p.epochStart,
		Replicas:               slices.Clone(p.replicas),
		ISR:                    slices.Clone(p.isr),
		MaximalISR:             p.MaximalISR(),
		AwaitingMetadata:       p.awaitingMetadata,
		HighWatermark:          p.hw,
		LogEndOffset:           p.leo,
		LogStartOffset:         p.logStart,
		ReplicationFactor:      p.ReplicationFactor(),
		MinInsyncReplicas:      p.cfg.MinInsyncReplicas,
		EffectiveMinISR:        p.EffectiveMinISR(),
		UnderMinISR:            p.UnderMinISR(),
	}
	if p.pending != nil {
		pr := p.pending.clone()
		s.Pending = &pr
	}
	nowMs := now.UnixMilli()
	for _, id := range p.replicas {
		f := p.followers[id]
		if f == nil {
			continue
		}
		lag := UndefinedOffset
		if f.leo != UndefinedOffset {
			lag = p.leo - f.leo
		}
		s.Followers = append(s.Followers, FollowerView{
			ID:             id,
			InISR:          slices.Contains(p.isr, id),
			LogEndOffset:   f.leo,
			LogStartOffset: f.logStart,
			LastCaughtUpMs: f.lastCaughtUpMs,
			LastFetchMs:    f.lastFetchMs,
			OffsetLag:      lag,
			CaughtUpAgeMs:  f.caughtUpAgeMs(nowMs),
			CaughtUp:       f.caughtUp(p.leo, nowMs, p.lagMs()),
		})
	}
	return s
}
