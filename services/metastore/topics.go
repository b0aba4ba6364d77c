package metastore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/kerr"
)

// Topic is a topic's metadata read at one revision.
type Topic struct {
	Name       string
	Assignment TopicAssignment
	// ModRevision is the assignment key's; 0 means the assignment is missing
	// (only seen transiently while applying watch events).
	ModRevision int64
	// Partitions holds each partition's state; a partition without one has
	// not been initialised yet (see CreateTopic).
	Partitions map[int32]PartitionRecord
	Config     map[string]string
	// Deletion is set while the topic is marked for deletion.
	Deletion *TopicDeletion
}

// NewTopic is what CreateTopic writes.
type NewTopic struct {
	Name string
	// TopicID is the topic's unique id; empty means a random one.
	TopicID string
	// Replicas maps each partition (0..n-1) to its replicas, preferred first.
	Replicas map[int32][]int32
	// States is the initial leader, leader epoch and ISR of every partition.
	// The controller and partition epochs are filled in.
	States map[int32]PartitionState
	// Config holds the topic's config overrides, if any.
	Config map[string]string
}

// CreateTopic writes a topic's assignment, config and initial partition
// states, failing with TOPIC_ALREADY_EXISTS if the topic exists.
//
// When everything fits in one transaction (MaxTxnOps) the create is atomic.
// Otherwise the first transaction writes the assignment, the config and as
// many states as fit, and later fenced transactions add the remaining states,
// each conditioned on the assignment being unchanged. If the controller loses
// office in between, the topic exists with some partitions lacking a state;
// the next controller finds them in LoadCluster and initialises them, the way
// Kafka's controller treats partitions in its NewPartition state.
func (s *Session) CreateTopic(ctx context.Context, t NewTopic) (*Topic, error) {
	if err := validateNewTopic(t); err != nil {
		return nil, err
	}
	if t.TopicID == "" {
		t.TopicID = newTopicID()
	}
	k := s.s.k
	asg := TopicAssignment{Version: assignmentVersion, TopicID: t.TopicID, Partitions: t.Replicas}
	head := []clientv3.Op{clientv3.OpPut(k.topic(t.Name), encode(asg))}
	if len(t.Config) > 0 {
		head = append(head, clientv3.OpPut(k.topicConfig(t.Name), encode(t.Config)))
	}
	parts := slices.Sorted(maps.Keys(t.States))
	states := make([]PartitionState, len(parts))
	puts := make([]clientv3.Op, len(parts))
	for i, p := range parts {
		st := t.States[p]
		st.ISR = nonNil(st.ISR)
		st.ControllerEpoch, st.PartitionEpoch = s.Epoch(), 0
		states[i] = st
		puts[i] = clientv3.OpPut(k.partitionState(t.Name, p), encode(st))
	}

	n := min(len(puts), s.s.maxOps-len(head))
	resp, err := s.commit(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.topic(t.Name)), "=", 0)},
		append(head, puts[:n]...),
		nil)
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, kerr.New(kerr.TopicAlreadyExists, "topic %q already exists", t.Name)
	}
	created := resp.Header.Revision
	out := &Topic{Name: t.Name, Assignment: asg, ModRevision: created, Config: t.Config,
		Partitions: make(map[int32]PartitionRecord, len(parts))}
	record := func(from, to int, rev int64) {
		for i := from; i < to; i++ {
			out.Partitions[parts[i]] = PartitionRecord{Topic: t.Name, Partition: parts[i], State: states[i], ModRevision: rev}
		}
	}
	record(0, n, created)
	for from := n; from < len(puts); from += s.s.maxOps {
		to := min(len(puts), from+s.s.maxOps)
		resp, err := s.commit(ctx,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k.topic(t.Name)), "=", created)},
			puts[from:to], nil)
		if err != nil {
			return nil, err
		}
		if !resp.Succeeded {
			return nil, kerr.New(kerr.UnknownTopicOrPartition, "topic %q changed while being created", t.Name)
		}
		record(from, to, resp.Header.Revision)
	}
	return out, nil
}

// DeleteTopic removes a topic's assignment, partition states, config and
// deletion mark in one fenced transaction. A topic that does not exist gets
// UNKNOWN_TOPIC_OR_PARTITION.
func (s *Session) DeleteTopic(ctx context.Context, name string) error {
	if err := checkTopic(name); err != nil {
		return err
	}
	k := s.s.k
	resp, err := s.commit(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.topic(name)), ">", 0)},
		[]clientv3.Op{
			clientv3.OpDelete(k.topic(name)),
			clientv3.OpDelete(k.topicSubtree(name), clientv3.WithPrefix()),
			clientv3.OpDelete(k.topicConfig(name)),
			clientv3.OpDelete(k.topicDeletion(name)),
		}, nil)
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return nil
}

// MarkTopicForDeletion records that a topic is to be deleted, so a deletion
// in progress survives a controller failover. DeleteTopic clears the mark.
func (s *Session) MarkTopicForDeletion(ctx context.Context, name string) error {
	if err := checkTopic(name); err != nil {
		return err
	}
	k := s.s.k
	resp, err := s.commit(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.topic(name)), ">", 0)},
		[]clientv3.Op{clientv3.OpPut(k.topicDeletion(name), encode(TopicDeletion{RequestedAt: s.s.stamp()}))},
		nil)
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return nil
}

// Topic reads one topic. A missing topic gets UNKNOWN_TOPIC_OR_PARTITION.
func (s *Store) Topic(ctx context.Context, name string) (*Topic, error) {
	if err := checkTopic(name); err != nil {
		return nil, err
	}
	k := s.k
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(k.topic(name)),
		clientv3.OpGet(k.topicSubtree(name), clientv3.WithPrefix()),
		clientv3.OpGet(k.topicConfig(name)),
		clientv3.OpGet(k.topicDeletion(name)),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("metastore: read topic %q: %w", name, err)
	}
	c := newCluster()
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			ev := s.decodeKV(EventPut, string(kv.Key), kv.ModRevision, kv)
			if ev.Err != nil {
				return nil, ev.Err
			}
			c.Apply(ev)
		}
	}
	t := c.Topics[name]
	if t == nil || t.ModRevision == 0 {
		return nil, kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return t, nil
}

// Topics reads every topic at one revision, and returns that revision.
func (s *Store) Topics(ctx context.Context) (map[string]*Topic, int64, error) {
	c, err := s.load(ctx, s.k.topicsDir(), s.k.configDir()+"topics/", s.k.deletionsDir())
	if err != nil {
		return nil, 0, err
	}
	return c.Topics, c.Revision, nil
}
