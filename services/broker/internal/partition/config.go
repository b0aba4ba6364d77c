package partition

import (
	"fmt"
	"time"
)

// DefaultReplicaLagTimeMax is replica.lag.time.max.ms's default (KIP-537).
const DefaultReplicaLagTimeMax = 30 * time.Second

// TruncationMode selects how a follower decides what to cut from its log
// when it starts following a new leader epoch.
type TruncationMode int

const (
	// TruncateLeaderEpoch is the default: the follower keeps its log and
	// lets the leader detect divergence from leader epochs (F12, F13,
	// KIP-101, KIP-279, KIP-595).
	TruncateLeaderEpoch TruncationMode = iota
	// TruncateHighWatermark is Kafka's rule before 0.11: truncate to the
	// follower's own HW and fetch from there, with no epoch checks. It loses
	// acknowledged records in KIP-101's scenarios; it exists so the broker
	// can reproduce that loss on demand.
	TruncateHighWatermark
)

func (m TruncationMode) String() string {
	switch m {
	case TruncateLeaderEpoch:
		return "leader-epoch"
	case TruncateHighWatermark:
		return "high-watermark"
	}
	return fmt.Sprintf("TruncationMode(%d)", int(m))
}

// ParseTruncationMode parses "leader-epoch" or "high-watermark".
func ParseTruncationMode(s string) (TruncationMode, error) {
	switch s {
	case "leader-epoch", "":
		return TruncateLeaderEpoch, nil
	case "high-watermark":
		return TruncateHighWatermark, nil
	}
	return 0, fmt.Errorf("unknown truncation mode %q (want leader-epoch or high-watermark)", s)
}

// Brokers is the broker's view of cluster membership, which decides who may
// join an ISR. Implementations must answer from memory (no I/O): they are
// consulted on every follower fetch.
type Brokers interface {
	// IsrEligible reports whether broker id may be in an ISR: registered,
	// alive, not fenced and not in controlled shutdown (F9, KIP-841).
	IsrEligible(id int32) bool
	// BrokerEpoch returns the epoch broker id is registered with. ok is
	// false when the view does not track epochs; the epoch checks of
	// KIP-380/KIP-903 are then skipped.
	BrokerEpoch(id int32) (epoch int64, ok bool)
}

// Config is the static configuration of one replica.
type Config struct {
	// LocalID is this broker's id.
	LocalID int32
	// ReplicaLagTimeMax is replica.lag.time.max.ms (F7); zero means the default.
	ReplicaLagTimeMax time.Duration
	// MinInsyncReplicas is min.insync.replicas (F16); zero means 1.
	MinInsyncReplicas int
	// Truncation is the follower truncation mode; the zero value is the
	// leader-epoch mode.
	Truncation TruncationMode
	// Brokers answers ISR eligibility. Nil means every broker is eligible
	// and broker epochs are not checked.
	Brokers Brokers
}

func (c Config) withDefaults() Config {
	if c.ReplicaLagTimeMax <= 0 {
		c.ReplicaLagTimeMax = DefaultReplicaLagTimeMax
	}
	if c.MinInsyncReplicas <= 0 {
		c.MinInsyncReplicas = 1
	}
	return c
}
