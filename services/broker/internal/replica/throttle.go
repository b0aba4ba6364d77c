package replica

import (
	"slices"
	"time"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/quota"
	"tidemark.io/services/topicconfig"
)

// Replication throttles (KIP-73), as Kafka applies them:
//
//   - on the leader, a partition listed in leader.replication.throttled.replicas
//     for this broker is answered with no records to a follower outside the
//     ISR while leader.replication.throttled.rate is exceeded;
//   - on a follower, a partition listed in follower.replication.throttled.replicas
//     for this broker that is not in sync is left out of the fetch while
//     follower.replication.throttled.rate is exceeded. In sync is Kafka's
//     PartitionFetchState.isReplicaInSync: the last answer that brought
//     records (or the first of the leader epoch) left the log at or past
//     the leader's HW. The HW never passes an ISR member's LEO, so a member
//     of the ISR is in sync from its first answer on; before that answer
//     (just after a new leader epoch) it is unknown, and held like one
//     that is behind, as in Kafka.
//
// The bytes of every listed partition count towards the rate, in sync or
// not; only replicas that are behind are held back, so the ISR's own
// replication (and so the HW and acks=all writes) is not slowed.
// throttleBackoff is the follower's pause when the throttle holds back
// every partition of a fetch.
const throttleBackoff = 50 * time.Millisecond

type throttles struct {
	leader, follower *quota.Replication
	// parsed caches the throttled-replicas lists, read on every fetch.
	parsed *listCache
}

func newThrottles(now func() time.Time) throttles {
	return throttles{leader: quota.NewReplication(now), follower: quota.NewReplication(now),
		parsed: &listCache{m: map[string]topicconfig.ThrottledReplicas{}}}
}

// listCache maps a list's text to its parsed form; it holds the distinct
// values of two topic configs, and starts over past a bound.
type listCache struct {
	mu lockorder.Mutex[lockorder.Leaf]
	m  map[string]topicconfig.ThrottledReplicas
}

func (c *listCache) get(list string) (topicconfig.ThrottledReplicas, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[list]; ok {
		return t, true
	}
	t, err := topicconfig.ParseThrottledReplicas(list)
	if err != nil {
		return t, false // validated before it was stored; never here
	}
	if len(c.m) >= 1024 {
		c.m = map[string]topicconfig.ThrottledReplicas{}
	}
	c.m[list] = t
	return t, true
}

// leaderQuota and followerQuota return the throttle with the broker's
// current settings applied (they may change with every UpdateMetadata).
func (m *Manager) leaderQuota() *quota.Replication {
	bc := m.BrokerConfig()
	m.throttles.leader.Set(bc.LeaderReplicationThrottledRate, int(bc.ReplicationQuotaWindowNum),
		time.Duration(bc.ReplicationQuotaWindowSizeSeconds)*time.Second)
	return m.throttles.leader
}

func (m *Manager) followerQuota() *quota.Replication {
	bc := m.BrokerConfig()
	m.throttles.follower.Set(bc.FollowerReplicationThrottledRate, int(bc.ReplicationQuotaWindowNum),
		time.Duration(bc.ReplicationQuotaWindowSizeSeconds)*time.Second)
	return m.throttles.follower
}

// listedLocked reports whether this broker's replica of r is in a
// throttled-replicas list; r.mu is held (r.cfg changes under it).
func (m *Manager) listedLocked(r *Replica, list string) bool {
	if list == "" {
		return false
	}
	t, ok := m.throttles.parsed.get(list)
	return ok && t.Has(r.tp.Partition, m.opts.BrokerID)
}

// leaderThrottleLocked reports, for a follower's fetch on the leader,
// whether the partition is throttled (its bytes count) and whether this
// fetch must go without records now.
func (m *Manager) leaderThrottleLocked(r *Replica, follower int32) (listed, hold bool) {
	if !m.listedLocked(r, r.cfg.LeaderReplicationThrottledReplicas) {
		return false, false
	}
	if slices.Contains(r.state.ISR(), follower) {
		return true, false
	}
	return true, m.leaderQuota().Exceeded()
}

// followerThrottleLocked is the same on the follower, for a partition that
// is (inSync) or is not in sync with its leader (fetchState.inSync).
func (m *Manager) followerThrottleLocked(r *Replica, inSync bool) (listed, hold bool) {
	if !m.listedLocked(r, r.cfg.FollowerReplicationThrottledReplicas) {
		return false, false
	}
	if inSync {
		return true, false
	}
	return true, m.followerQuota().Exceeded()
}

// ReplicationRates are the measured throttled bytes/s, leader and follower
// side (metrics and tests).
func (m *Manager) ReplicationRates() (leader, follower float64) {
	return m.throttles.leader.Rate(), m.throttles.follower.Rate()
}
