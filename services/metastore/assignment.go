package metastore

import (
	"context"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/kerr"
)

// AssignmentUpdate changes a topic's assignment (its replicas and the
// adding/removing replicas of reassignments in flight) together with some of
// its partitions' states, in one fenced transaction. Reassignment steps and
// added partitions need both to move at once: a controller that fails over
// between the two would otherwise find an ISR naming replicas the
// assignment no longer has.
type AssignmentUpdate struct {
	Topic string
	// ModRevision is the assignment key's revision as read; compared.
	ModRevision int64
	Assignment  TopicAssignment
	// States are compare-and-set as in UpdatePartitionStates (ModRevision 0:
	// the state must not exist yet, as for a partition being added).
	States []PartitionUpdate
}

// AssignmentResult is what an AssignmentUpdate wrote.
type AssignmentResult struct {
	ModRevision int64
	Assignment  TopicAssignment
	States      []PartitionRecord
}

// UpdateAssignment writes an AssignmentUpdate. If the assignment or any
// state changed since it was read, nothing is written and the answer is
// INVALID_UPDATE_VERSION; a superseded session gets *ControllerMovedError.
// The caller keeps the whole update within MaxTxnOps-2 operations.
func (s *Session) UpdateAssignment(ctx context.Context, u AssignmentUpdate) (AssignmentResult, error) {
	if err := checkTopic(u.Topic); err != nil {
		return AssignmentResult{}, err
	}
	if 1+len(u.States) > s.s.maxOps-fenceCmps {
		return AssignmentResult{}, kerr.New(kerr.InvalidRequest, "topic %q: %d partition states in one assignment update; at most %d fit",
			u.Topic, len(u.States), s.s.maxOps-fenceCmps-1)
	}
	k := s.s.k
	asg := u.Assignment
	asg.Version = assignmentVersion
	asg.Partitions = maps.Clone(asg.Partitions)
	if len(asg.AddingReplicas) == 0 {
		asg.AddingReplicas = nil
	}
	if len(asg.RemovingReplicas) == 0 {
		asg.RemovingReplicas = nil
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k.topic(u.Topic)), "=", u.ModRevision)}
	ops := []clientv3.Op{clientv3.OpPut(k.topic(u.Topic), encode(asg))}
	next := make([]PartitionState, len(u.States))
	for i, pu := range u.States {
		if pu.Current.Topic != u.Topic {
			return AssignmentResult{}, kerr.New(kerr.InvalidRequest, "partition state of topic %q in an update of %q", pu.Current.Topic, u.Topic)
		}
		key := k.partitionState(u.Topic, pu.Current.Partition)
		st := pu.Next
		st.ISR = nonNil(slices.Clone(st.ISR))
		st.ControllerEpoch = s.Epoch()
		if pu.Current.ModRevision == 0 {
			st.PartitionEpoch = 0
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		} else {
			st.PartitionEpoch = pu.Current.State.PartitionEpoch + 1
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", pu.Current.ModRevision))
		}
		next[i] = st
		ops = append(ops, clientv3.OpPut(key, encode(st)))
	}
	resp, err := s.commit(ctx, cmps, ops, nil)
	if err != nil {
		return AssignmentResult{}, err
	}
	if !resp.Succeeded {
		return AssignmentResult{}, kerr.New(kerr.InvalidUpdateVersion,
			"topic %q: the assignment or a partition state changed since it was read (assignment revision %d)", u.Topic, u.ModRevision)
	}
	rev := resp.Header.Revision
	out := AssignmentResult{ModRevision: rev, Assignment: asg}
	for i, pu := range u.States {
		out.States = append(out.States, PartitionRecord{Topic: u.Topic, Partition: pu.Current.Partition, State: next[i], ModRevision: rev})
	}
	return out, nil
}
