package ctrl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/placement"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// CreateTopics validates and creates topics (Kafka's CreateTopics). With
// timeout_ms it also waits, outside the loop, for the leaders to accept their
// LeaderAndIsr; a topic created whose leaders did not answer in time gets
// REQUEST_TIMED_OUT, as in Kafka.
func (a *Active) CreateTopics(ctx context.Context, req *adminv1.CreateTopicsRequest) (*adminv1.CreateTopicsResponse, error) {
	var resp *adminv1.CreateTopicsResponse
	var waits [][]<-chan error
	err := a.call(ctx, func() (err error) { resp, waits, err = a.createTopics(req); return err })
	if err != nil {
		return nil, err
	}
	if req.GetTimeoutMs() > 0 && !req.GetValidateOnly() {
		deadline := time.NewTimer(time.Duration(req.GetTimeoutMs()) * time.Millisecond)
		defer deadline.Stop()
		for i, acks := range waits {
			if !waitAll(ctx, deadline.C, acks) {
				r := resp.Results[i]
				r.ErrorCode = commonv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
				r.ErrorMessage = "topic created, but its leaders did not confirm within timeout_ms"
			}
		}
	}
	return resp, nil
}

// waitAll waits for every ack; false on timeout or cancellation.
func waitAll(ctx context.Context, deadline <-chan time.Time, acks []<-chan error) bool {
	for _, ch := range acks {
		select {
		case err := <-ch:
			if err != nil {
				return false
			}
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (a *Active) createTopics(req *adminv1.CreateTopicsRequest) (*adminv1.CreateTopicsResponse, [][]<-chan error, error) {
	count := map[string]int{}
	for _, s := range req.GetTopics() {
		count[s.GetName()]++
	}
	resp := &adminv1.CreateTopicsResponse{}
	waits := make([][]<-chan error, len(req.GetTopics()))
	for i, spec := range req.GetTopics() {
		res := &adminv1.CreateTopicResult{Name: spec.GetName()}
		resp.Results = append(resp.Results, res)
		if spec.GetName() == OffsetsTopic {
			setTopicErr(res, internalTopicRefusal("created"))
			continue
		}
		if count[spec.GetName()] > 1 {
			setTopicErr(res, kerr.BadField(kerr.InvalidRequest, "topics", "topic %q appears more than once in the request", spec.GetName()))
			continue
		}
		acks, err := a.createTopic(spec, req.GetValidateOnly(), res)
		if a.stopping() {
			return nil, nil, a.notControllerFor(err)
		}
		if err != nil {
			setTopicErr(res, err)
			continue
		}
		waits[i] = acks
	}
	return resp, waits, nil
}

func setTopicErr(res *adminv1.CreateTopicResult, err error) {
	ke := kerr.As(err)
	res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
}

// createTopic validates one topic in Kafka's order (name, existence, name
// collision, configs, assignment), then writes it and pushes it. It returns
// the acks of the LeaderAndIsr requests sent to the partitions' leaders.
func (a *Active) createTopic(spec *adminv1.TopicSpec, validateOnly bool, res *adminv1.CreateTopicResult) ([]<-chan error, error) {
	name := spec.GetName()
	if err := placement.ValidateTopicName(name); err != nil {
		return nil, err
	}
	if a.topics[name] != nil {
		return nil, kerr.New(kerr.TopicAlreadyExists, "topic %q already exists", name)
	}
	if err := placement.CheckCollision(name, slices.Collect(maps.Keys(a.topics))); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(spec.GetConfigs())) {
		if err := topicconfig.Validate(topicconfig.ScopeTopic, k, spec.GetConfigs()[k]); err != nil {
			return nil, err
		}
	}
	assignment, err := a.assign(spec)
	if err != nil {
		return nil, err
	}
	t := &topic{name: name, config: maps.Clone(spec.GetConfigs())}
	res.NumPartitions, res.ReplicationFactor = int32(len(assignment)), int32(len(assignment[0]))
	for p, reps := range assignment {
		res.Assignments = append(res.Assignments, &adminv1.ReplicaAssignment{Partition: int32(p), Replicas: slices.Clone(reps)})
	}
	res.Configs = a.topicConfigMap(t, -1)
	if validateOnly {
		return nil, nil
	}

	nt := metastore.NewTopic{Name: name, Replicas: map[int32][]int32{}, States: map[int32]metastore.PartitionState{},
		Config: t.config}
	for p, reps := range assignment {
		// The first live replica leads, the live replicas form the ISR,
		// leader epoch 0 (Kafka's NewPartition -> OnlinePartition).
		var live []int32
		for _, r := range reps {
			if b := a.brokers[r]; b != nil && !b.shuttingDown {
				live = append(live, r)
			}
		}
		if len(live) == 0 {
			return nil, kerr.New(kerr.InvalidReplicaAssignment, "partition %d: none of %v is live", p, reps)
		}
		nt.Replicas[int32(p)] = reps
		nt.States[int32(p)] = metastore.PartitionState{Leader: live[0], ISR: live}
	}
	ctx, cancel := a.writeCtx()
	mt, err := a.sess.CreateTopic(ctx, nt)
	cancel()
	if err != nil {
		a.refusedOrFatal("create topic "+name, err)
		return nil, err
	}
	t = newTopic(mt)
	a.topics[name] = t
	a.stateDirty = true
	a.log.Info("Created topic", "topic", name, "topic_id", t.id, "partitions", len(t.parts),
		"replication_factor", len(assignment[0]), "configs", t.config)
	a.event(controlv1.EventKind_EVENT_KIND_TOPIC_CREATED, func(ev *controlv1.ClusterEvent) {
		ev.Topic = name
		ev.Reason = fmt.Sprintf("topic %s created with %d partitions, replication factor %d", name, len(t.parts), len(assignment[0]))
	})
	acks := a.pushLeaderAndIsr(t.parts, nil)
	a.pushUpdateMetadata(t.parts, nil, false, nil)
	leaders := map[int32]bool{}
	for _, p := range t.parts {
		leaders[p.rec.State.Leader] = true
	}
	var out []<-chan error
	for id, ch := range acks {
		if leaders[id] {
			out = append(out, ch)
		}
	}
	return out, nil
}

// assign picks the topic's replicas: the explicit assignment if given
// (naming registered brokers), else Kafka's rack-aware round robin over the
// live brokers (not shutting down) with a random start.
func (a *Active) assign(spec *adminv1.TopicSpec) ([][]int32, error) {
	var live, registered []placement.Broker
	for _, id := range a.sortedBrokerIDs() {
		b := a.brokers[id]
		registered = append(registered, placement.Broker{ID: id, Rack: b.info.Rack})
		if !b.shuttingDown {
			live = append(live, placement.Broker{ID: id, Rack: b.info.Rack})
		}
	}
	if len(spec.GetAssignments()) > 0 {
		m := map[int32][]int32{}
		for _, ra := range spec.GetAssignments() {
			if _, dup := m[ra.GetPartition()]; dup {
				return nil, kerr.New(kerr.InvalidReplicaAssignment, "partition %d is assigned twice", ra.GetPartition())
			}
			m[ra.GetPartition()] = ra.GetReplicas()
		}
		return placement.ValidateAssignment(m, registered)
	}
	cfg := a.brokerConfig()
	n, rf := spec.GetNumPartitions(), spec.GetReplicationFactor()
	if n == 0 {
		n = cfg.NumPartitions
	}
	if rf == 0 {
		rf = cfg.DefaultReplicationFactor
	}
	opts := placement.RandomOptions(a.rng, len(live))
	opts.Racks = placement.RackEnforced
	return placement.AssignReplicas(live, int(n), int(rf), opts)
}
