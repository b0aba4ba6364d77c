package metastore

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/kerr"
)

// PartitionState reads one partition's state. A missing state gets
// UNKNOWN_TOPIC_OR_PARTITION.
func (s *Store) PartitionState(ctx context.Context, topic string, partition int32) (PartitionRecord, error) {
	if err := checkTopic(topic); err != nil {
		return PartitionRecord{}, err
	}
	key := s.k.partitionState(topic, partition)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return PartitionRecord{}, fmt.Errorf("metastore: read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return PartitionRecord{}, kerr.New(kerr.UnknownTopicOrPartition, "topic %q partition %d has no state", topic, partition)
	}
	ev := s.decodeKV(EventPut, key, resp.Kvs[0].ModRevision, resp.Kvs[0])
	if ev.Err != nil {
		return PartitionRecord{}, ev.Err
	}
	return *ev.State, nil
}

// PartitionUpdate replaces one partition's state if it is still the one the
// caller read.
type PartitionUpdate struct {
	// Current is the state as read. Its Topic and Partition name the key and
	// its ModRevision is compared; ModRevision 0 means the state must not
	// exist yet (initialising a partition).
	Current PartitionRecord
	// Next holds the leader, leader epoch and ISR to write. ControllerEpoch
	// is set to the session's epoch and PartitionEpoch to
	// Current.State.PartitionEpoch+1 (0 when initialising).
	Next PartitionState
}

// PartitionConflict is an update refused because the state had changed.
type PartitionConflict struct {
	Topic     string
	Partition int32
	// Expected is the ModRevision the update named.
	Expected int64
	// Current is the state now, nil if there is none.
	Current *PartitionRecord
}

// Err describes the conflict as INVALID_UPDATE_VERSION.
func (c PartitionConflict) Err() error {
	if c.Current == nil {
		return kerr.New(kerr.InvalidUpdateVersion, "topic %q partition %d: expected revision %d, but the state does not exist",
			c.Topic, c.Partition, c.Expected)
	}
	return kerr.New(kerr.InvalidUpdateVersion, "topic %q partition %d: expected revision %d, found revision %d (partition epoch %d)",
		c.Topic, c.Partition, c.Expected, c.Current.ModRevision, c.Current.State.PartitionEpoch)
}

// UpdateResult reports a batch of partition updates.
type UpdateResult struct {
	// Updated holds the states written, with their new ModRevisions.
	Updated []PartitionRecord
	// Conflicts holds the updates refused by compare-and-set, with the
	// current states so the caller can refresh and decide again.
	Conflicts []PartitionConflict
}

// UpdatePartitionState writes one partition's state by compare-and-set on
// its ModRevision. A conflict returns INVALID_UPDATE_VERSION; a superseded
// session returns *ControllerMovedError.
func (s *Session) UpdatePartitionState(ctx context.Context, u PartitionUpdate) (PartitionRecord, error) {
	res, err := s.UpdatePartitionStates(ctx, []PartitionUpdate{u})
	if err != nil {
		return PartitionRecord{}, err
	}
	if len(res.Conflicts) > 0 {
		return PartitionRecord{}, res.Conflicts[0].Err()
	}
	return res.Updated[0], nil
}

// UpdatePartitionStates writes many partitions' states. Each update is a
// compare-and-set on its key's ModRevision, and every transaction is fenced.
//
// etcd caps a transaction at MaxTxnOps operations (128 by default), so the
// updates go in chunks of MaxTxnOps-2 (the fence takes two compares). Each
// chunk is atomic; a chunk with conflicts is retried without the conflicting
// updates, which are reported in Conflicts, the way Kafka's controller
// handles per-partition version conflicts. On a *ControllerMovedError the
// result still reports what earlier chunks wrote.
func (s *Session) UpdatePartitionStates(ctx context.Context, updates []PartitionUpdate) (UpdateResult, error) {
	var res UpdateResult
	seen := make(map[string]bool, len(updates))
	for _, u := range updates {
		if err := checkTopic(u.Current.Topic); err != nil {
			return res, err
		}
		if u.Current.Partition < 0 {
			return res, kerr.New(kerr.InvalidPartitions, "topic %q: partition %d", u.Current.Topic, u.Current.Partition)
		}
		key := s.s.k.partitionState(u.Current.Topic, u.Current.Partition)
		if seen[key] {
			return res, kerr.New(kerr.InvalidRequest, "topic %q partition %d is updated twice in one batch",
				u.Current.Topic, u.Current.Partition)
		}
		seen[key] = true
	}
	chunk := s.s.maxOps - fenceCmps
	for from := 0; from < len(updates); from += chunk {
		to := min(len(updates), from+chunk)
		if err := s.updateChunk(ctx, updates[from:to], &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// updateChunk commits one transaction's worth of updates, dropping
// conflicting ones and retrying until the rest commit. Every retry removes at
// least one update, so it ends.
func (s *Session) updateChunk(ctx context.Context, pending []PartitionUpdate, res *UpdateResult) error {
	k := s.s.k
	for len(pending) > 0 {
		cmps := make([]clientv3.Cmp, len(pending))
		puts := make([]clientv3.Op, len(pending))
		gets := make([]clientv3.Op, len(pending))
		next := make([]PartitionState, len(pending))
		for i, u := range pending {
			key := k.partitionState(u.Current.Topic, u.Current.Partition)
			st := u.Next
			st.ISR = nonNil(st.ISR)
			st.ControllerEpoch = s.Epoch()
			if u.Current.ModRevision == 0 {
				st.PartitionEpoch = 0
				cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
			} else {
				st.PartitionEpoch = u.Current.State.PartitionEpoch + 1
				cmps[i] = clientv3.Compare(clientv3.ModRevision(key), "=", u.Current.ModRevision)
			}
			next[i] = st
			puts[i] = clientv3.OpPut(key, encode(st))
			gets[i] = clientv3.OpGet(key)
		}
		resp, err := s.commit(ctx, cmps, puts, gets)
		if err != nil {
			return err
		}
		if resp.Succeeded {
			for i, u := range pending {
				res.Updated = append(res.Updated, PartitionRecord{Topic: u.Current.Topic,
					Partition: u.Current.Partition, State: next[i], ModRevision: resp.Header.Revision})
			}
			return nil
		}
		kept := pending[:0:0]
		for i, u := range pending {
			c := PartitionConflict{Topic: u.Current.Topic, Partition: u.Current.Partition, Expected: u.Current.ModRevision}
			var curRev int64
			if kvs := resp.Responses[fenceCmps+i].GetResponseRange().GetKvs(); len(kvs) > 0 {
				ev := s.s.decodeKV(EventPut, string(kvs[0].Key), kvs[0].ModRevision, kvs[0])
				if ev.Err != nil {
					return ev.Err
				}
				c.Current, curRev = ev.State, kvs[0].ModRevision
			}
			if curRev != u.Current.ModRevision {
				res.Conflicts = append(res.Conflicts, c)
			} else {
				kept = append(kept, u)
			}
		}
		if len(kept) == len(pending) {
			return errors.New("metastore: partition update refused but no conflict found")
		}
		pending = kept
	}
	return nil
}
