package history

import (
	"fmt"
	"slices"
	"time"
)

// Record is one record of a replica's log.
type Record struct {
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
}

// ReplicaState is one replica's log as read once everything was quiet.
type ReplicaState struct {
	Broker int32 `json:"broker"`
	// Readable is false when the replica could not be read (its broker
	// down): the checker then compares only the others, and liveness
	// counts the partition as not whole.
	Readable bool `json:"readable"`
	// LogStart is the first offset still in the log (retention deletes
	// below it); Records holds [LogStart, LEO) in offset order.
	LogStart int64    `json:"log_start"`
	LEO      int64    `json:"leo"`
	HW       int64    `json:"hw"`
	Records  []Record `json:"records"`
}

// PartitionState is a partition once everything was quiet.
type PartitionState struct {
	TP TP `json:"tp"`
	// Leader and ISR as the controller describes them; Leader -1 when none.
	Leader   int32          `json:"leader"`
	ISR      []int32        `json:"isr"`
	Replicas []ReplicaState `json:"replicas"` // one per assigned replica
	// MinInsyncReplicas is the topic's min.insync.replicas, when known: a
	// leader whose ISR is smaller may not advance its HW (KAFKA-15583), so
	// HW < LEO there is no violation of its own.
	MinInsyncReplicas int32 `json:"min_insync_replicas,omitempty"`
	// LiveAt is when the runner first observed the partition whole after
	// the faults stopped (Live held); zero when it never did.
	LiveAt time.Time `json:"live_at,omitzero"`
	// Adding and Removing are the replicas of a reassignment still in
	// flight: a partition is not whole until its reassignment completed.
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

// Final is the cluster once everything was quiet.
type Final struct {
	// FaultsStopped is when the last fault was healed.
	FaultsStopped time.Time        `json:"faults_stopped"`
	Partitions    []PartitionState `json:"partitions"`
}

// Live reports whether the partition is whole: a leader, no reassignment
// in flight, every assigned replica readable and in the ISR, HW = LEO on every replica and the same
// LEO everywhere. When not, the reason says what is missing. A runner calls
// it on each observation after the faults stop to set LiveAt.
func (p PartitionState) Live() (bool, string) {
	if p.Leader < 0 {
		return false, "no leader"
	}
	if len(p.Replicas) == 0 {
		return false, "no replica observed"
	}
	if !slices.ContainsFunc(p.Replicas, func(r ReplicaState) bool { return r.Broker == p.Leader }) {
		return false, fmt.Sprintf("leader %d is not one of the replicas", p.Leader)
	}
	if len(p.Adding)+len(p.Removing) > 0 {
		return false, fmt.Sprintf("reassignment in flight (adding %v, removing %v)", p.Adding, p.Removing)
	}
	leo := int64(-1)
	for _, r := range p.Replicas {
		switch {
		case !r.Readable:
			return false, fmt.Sprintf("replica %d not readable", r.Broker)
		case !slices.Contains(p.ISR, r.Broker):
			return false, fmt.Sprintf("replica %d not in ISR %v", r.Broker, p.ISR)
		case r.HW != r.LEO:
			return false, fmt.Sprintf("replica %d HW %d < LEO %d", r.Broker, r.HW, r.LEO)
		case leo >= 0 && r.LEO != leo:
			return false, fmt.Sprintf("replica %d LEO %d differs from %d", r.Broker, r.LEO, leo)
		}
		leo = r.LEO
	}
	return true, ""
}

// authority is the replica whose log stands for the partition's: the
// leader's when readable, else the readable replica with the highest HW.
func (p PartitionState) authority() (ReplicaState, bool) {
	var best ReplicaState
	found := false
	for _, r := range p.Replicas {
		if !r.Readable {
			continue
		}
		if r.Broker == p.Leader {
			return r, true
		}
		if !found || r.HW > best.HW || (r.HW == best.HW && r.LEO > best.LEO) {
			best, found = r, true
		}
	}
	return best, found
}
