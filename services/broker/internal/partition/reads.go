package partition

import (
	"slices"
	"time"
)

// MaxReadableOffset is the exclusive end of what a consumer may read from
// this replica: the HW, on the leader and on a follower serving follower
// fetching, whose HW lags the leader's (F6, F26). A read above it returns no
// records, not an error. Follower fetches read up to the LEO instead.
func (p *Partition) MaxReadableOffset() int64 { return p.hw }

// PreferredReadReplica picks the replica a consumer in clientRack should
// read from (F26, KIP-392, Kafka's RackAwareReplicaSelector): among the
// leader and the ISR followers that hold fetchOffset (LEO >= fetchOffset >=
// their log start), those in the client's rack; the leader if it is one of
// them, else the most caught-up (highest LEO, then most recently caught up,
// then highest id, as Kafka's comparator). It returns NoReplica when the
// answer is the leader or nothing qualifies: the fetch response's
// PreferredReadReplica is -1 then, meaning "keep reading from the leader".
// Only the leader answers; rackOf maps a broker id to its rack.
func (p *Partition) PreferredReadReplica(clientRack string, fetchOffset int64, rackOf func(int32) string, now time.Time) int32 {
	if p.role != RoleLeader || clientRack == "" || rackOf(p.cfg.LocalID) == clientRack {
		return NoReplica
	}
	nowMs := now.UnixMilli()
	best := NoReplica
	var bestLEO, bestAge int64
	for _, id := range p.replicas {
		f := p.followers[id]
		if f == nil || !slices.Contains(p.isr, id) || rackOf(id) != clientRack {
			continue
		}
		if f.leo < fetchOffset || f.logStart > fetchOffset {
			continue
		}
		age := nowMs - f.lastCaughtUpMs
		if best == NoReplica || f.leo > bestLEO ||
			(f.leo == bestLEO && (age < bestAge || (age == bestAge && id > best))) {
			best, bestLEO, bestAge = id, f.leo, age
		}
	}
	return best
}
