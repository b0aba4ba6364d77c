package partition

import "fmt"

// Undefined values, as Kafka's OffsetsForLeaderEpoch uses them.
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
	// NoReplica is the preferred-read-replica answer "read from the leader".
	NoReplica int32 = -1
)

// Role is what this replica currently is.
type Role int

const (
	RoleNone Role = iota
	RoleLeader
	RoleFollower
)

func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// LeaderAndISR is the partition state the controller publishes (the
// LeaderAndIsr request of ZK mode, a partition record in KRaft).
type LeaderAndISR struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// Replicas is the assignment (AR) in preference order.
	Replicas []int32
	ISR      []int32
	// Adding are the replicas among Replicas that a reassignment in flight
	// is adding (KIP-455).
	Adding []int32
}

// LogState is what the log store knows about the local log at load time.
type LogState struct {
	LogStartOffset int64
	LogEndOffset   int64
	// HighWatermark is the checkpointed HW; it is clamped to
	// [LogStartOffset, LogEndOffset] like Kafka's updateHighWatermark.
	HighWatermark int64
}

// EpochEndOffset is a leader epoch and the end offset of that epoch: the
// answer to OffsetsForLeaderEpoch and the DivergingEpoch of a fetch response.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

func (e EpochEndOffset) String() string {
	return fmt.Sprintf("epoch %d end %d", e.Epoch, e.EndOffset)
}

// EpochSource is the part of a log's leader-epoch cache (F12) this package
// reads. The log store implements it.
type EpochSource interface {
	// EndOffsetFor returns the largest epoch <= epoch that the cache holds
	// and the end offset of that epoch: the start offset of the next epoch,
	// or the LEO for the latest epoch. When epoch is older than every entry
	// it returns (epoch, start offset of the first entry). It returns
	// (UndefinedEpoch, UndefinedOffset) when the answer is unknown: an empty
	// cache, an undefined epoch, or an epoch newer than the latest.
	EndOffsetFor(epoch int32) (int32, int64)
	// LatestEpoch returns the newest epoch in the cache, UndefinedEpoch if empty.
	LatestEpoch() int32
}

// HWUpdate reports a high watermark before and after an event.
type HWUpdate struct {
	Before, After int64
	// HeldByMinISR is set when a leader did not try to advance the HW
	// because its ISR is smaller than min.insync.replicas (KAFKA-15583).
	HeldByMinISR bool
}

// Advanced reports whether the HW moved up; the broker then re-checks parked
// produce and fetch requests (F17, F18).
func (u HWUpdate) Advanced() bool { return u.After > u.Before }

// Changed reports whether the HW moved at all (a follower's may go down).
func (u HWUpdate) Changed() bool { return u.After != u.Before }
