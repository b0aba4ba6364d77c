// Package election holds the controller's pure partition decisions: leader
// election (offline, preferred, controlled shutdown, unclean), ISR changes the
// controller makes itself, validation of a leader's AlterPartition request and
// the auto leader rebalance plan.
//
// Every function here is deterministic and side-effect free: it reads a
// partition's assignment and state plus the controller's view of the brokers,
// and returns the state the controller should write. Writing it (with the
// conditional update that bumps the partition epoch) is the store's job.
package election

import (
	"fmt"
	"slices"
)

// NoLeader is the leader id of a partition that has no leader (F19).
const NoLeader int32 = -1

// Assignment is a partition's replica list in preference order; its head is
// the preferred leader (F21).
type Assignment []int32

// Preferred returns the preferred replica, or NoLeader for an empty assignment.
func (a Assignment) Preferred() int32 {
	if len(a) == 0 {
		return NoLeader
	}
	return a[0]
}

// Contains reports whether broker id holds a replica.
func (a Assignment) Contains(id int32) bool { return slices.Contains(a, id) }

// PartitionState is the leader-and-ISR record of one partition, as in ZK
// mode's /brokers/topics/<t>/partitions/<p>/state.
type PartitionState struct {
	Leader      int32
	LeaderEpoch int32
	ISR         []int32
	// PartitionEpoch is the version of the stored record (ZK's zkVersion).
	// Decisions copy it unchanged; the store bumps it on every write.
	PartitionEpoch int32
}

// InISR reports whether broker id is in the ISR.
func (s PartitionState) InISR(id int32) bool { return slices.Contains(s.ISR, id) }

// Clone returns a copy that shares no memory with s.
func (s PartitionState) Clone() PartitionState {
	s.ISR = slices.Clone(s.ISR)
	return s
}

func (s PartitionState) String() string {
	return fmt.Sprintf("{leader=%d leaderEpoch=%d isr=%v partitionEpoch=%d}",
		s.Leader, s.LeaderEpoch, s.ISR, s.PartitionEpoch)
}

// Partition is everything a decision reads about one partition.
type Partition struct {
	Assignment Assignment
	State      PartitionState
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Brokers is the controller's view of the cluster at one moment.
type Brokers struct {
	// Epochs maps every broker with a live registration to its broker epoch
	// (F23: the creation revision of its lease-bound registration key).
	// Brokers in controlled shutdown are still here.
	Epochs map[int32]int64
	// ShuttingDown holds brokers in controlled shutdown. They stay registered
	// but may neither lead nor be added to an ISR (F19, KIP-841).
	ShuttingDown map[int32]bool
	// LostLog holds registered brokers whose replica of the partition
	// decided on has no log: a replaced log dir may have held it (the
	// broker reports it offline, so it is not in Epochs). Only an unclean
	// election may pick one, to lead from an empty log (Decision.EmptyLog).
	LostLog map[int32]bool
}

// Registered reports whether id has a live registration (shutting down or not).
func (b Brokers) Registered(id int32) bool {
	_, ok := b.Epochs[id]
	return ok
}

// Live reports whether id is registered and not shutting down: Kafka's
// "online" replica, the only kind that may be elected leader.
func (b Brokers) Live(id int32) bool { return b.Registered(id) && !b.ShuttingDown[id] }

// withShuttingDown returns a copy of b with id also marked as shutting down.
func (b Brokers) withShuttingDown(id int32) Brokers {
	sd := make(map[int32]bool, len(b.ShuttingDown)+1)
	for k, v := range b.ShuttingDown {
		sd[k] = v
	}
	sd[id] = true
	return Brokers{Epochs: b.Epochs, ShuttingDown: sd, LostLog: b.LostLog}
}

// Decision is the outcome of one decision function.
type Decision struct {
	// State is the state to write. When Changed is false it equals the input.
	State PartitionState
	// Changed is false when nothing needs writing.
	Changed bool
	// Unclean marks a leader elected from outside the ISR (F20): data the
	// old ISR acknowledged may be lost. Count it as an unclean election.
	Unclean bool
	// EmptyLog marks an unclean election of a replica whose log was lost:
	// it leads from an empty log, and every record of the partition is
	// lost. It is also Unclean.
	EmptyLog bool
	// Reason is a short human-readable account, for logs and events.
	Reason string
}

// unchanged is the Decision that writes nothing.
func unchanged(s PartitionState, reason string) Decision {
	return Decision{State: s.Clone(), Reason: reason}
}

// controllerWrite builds a change made by the controller. In ZK mode every
// controller write of leader-and-ISR bumps the leader epoch, whether it moves
// the leader or only shrinks the ISR (LeaderAndIsr.newLeaderAndIsr), so
// brokers act on the new state and fence the old one.
func controllerWrite(old PartitionState, leader int32, isr []int32, reason string) Decision {
	return Decision{
		State: PartitionState{
			Leader:         leader,
			LeaderEpoch:    old.LeaderEpoch + 1,
			ISR:            isr,
			PartitionEpoch: old.PartitionEpoch,
		},
		Changed: true,
		Reason:  reason,
	}
}

// filterISR returns the members of isr for which keep is true, in ISR order.
func filterISR(isr []int32, keep func(int32) bool) []int32 {
	out := make([]int32, 0, len(isr))
	for _, id := range isr {
		if keep(id) {
			out = append(out, id)
		}
	}
	return out
}
