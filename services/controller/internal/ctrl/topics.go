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

// CreateTopics validates and creates topics (Kafka's CreateTopics): the
// core decides (createTopics). With timeout_ms it also waits, outside the
// loop, for the leaders to accept their LeaderAndIsr; a topic created whose
// leaders did not answer in time gets REQUEST_TIMED_OUT, as in Kafka.
func (a *Active) CreateTopics(ctx context.Context, req *adminv1.CreateTopicsRequest) (*adminv1.CreateTopicsResponse, error) {
	var ans createAnswer
	var waits [][]<-chan error
	err := a.call(ctx, func() error {
		err := errNoOutcome
		a.step(evCreateTopics{req: req, reply: answerTo(&ans, &err)})
		waits = a.takeGroups(ans.groups)
		return err
	})
	if err != nil {
		return nil, err
	}
	resp := ans.resp
	if req.GetTimeoutMs() > 0 && !req.GetValidateOnly() {
		// A context, not a timer: its Done stays closed for every wait
		// after the first that times out (a timer fires once, and the
		// next topics' waits had no deadline left).
		wctx, cancel := context.WithTimeout(ctx, time.Duration(req.GetTimeoutMs())*time.Millisecond)
		defer cancel()
		for i, acks := range waits {
			if !waitAll(wctx, acks) {
				r := resp.Results[i]
				r.ErrorCode = commonv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
				r.ErrorMessage = "topic created, but its leaders did not confirm within timeout_ms"
			}
		}
	}
	return resp, nil
}

// takeGroups takes the outcomes of the pushes of each ack group (0: none).
func (a *Active) takeGroups(groups []uint64) [][]<-chan error {
	out := make([][]<-chan error, len(groups))
	for i, g := range groups {
		if g != 0 {
			out[i] = a.groups[g]
			delete(a.groups, g)
		}
	}
	return out
}

// createAnswer is the core's answer to CreateTopics (and CreatePartitions'
// groups): the response, and for each topic the ack group of its leaders'
// LeaderAndIsr (0 when nothing was pushed).
type createAnswer struct {
	resp   *adminv1.CreateTopicsResponse
	groups []uint64
}

// waitAll waits for every ack; false when one failed or ctx ended first
// (its deadline is the request's timeout_ms).
func waitAll(ctx context.Context, acks []<-chan error) bool {
	for _, ch := range acks {
		select {
		case err := <-ch:
			if err != nil {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// createTopics creates the request's topics one after the other (each an
// awaited fenced write), then answers.
func (c *core) createTopics(req *adminv1.CreateTopicsRequest, reply replyFunc) {
	count := map[string]int{}
	for _, s := range req.GetTopics() {
		count[s.GetName()]++
	}
	specs := req.GetTopics()
	resp := &adminv1.CreateTopicsResponse{}
	groups := make([]uint64, len(specs))
	var next func(i int)
	next = func(i int) {
		if i == len(specs) {
			c.answer(reply, createAnswer{resp: resp, groups: groups}, nil)
			return
		}
		spec := specs[i]
		res := &adminv1.CreateTopicResult{Name: spec.GetName()}
		resp.Results = append(resp.Results, res)
		switch {
		case spec.GetName() == OffsetsTopic:
			setTopicErr(res, internalTopicRefusal("created"))
			next(i + 1)
		case count[spec.GetName()] > 1:
			setTopicErr(res, kerr.BadField(kerr.InvalidRequest, "topics", "topic %q appears more than once in the request", spec.GetName()))
			next(i + 1)
		default:
			c.createTopic(spec, req.GetValidateOnly(), res, func(group uint64, err error) {
				if c.stopping() {
					c.answer(reply, nil, c.notControllerFor(err))
					return
				}
				if err != nil {
					setTopicErr(res, err)
				}
				groups[i] = group
				next(i + 1)
			})
		}
	}
	next(0)
}

func setTopicErr(res *adminv1.CreateTopicResult, err error) {
	ke := kerr.As(err)
	res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
}

// createTopic validates one topic in Kafka's order (name, existence, name
// collision, configs, assignment), then writes it (effCreateTopic) and
// pushes it. then gets the ack group of the LeaderAndIsr requests sent to
// the partitions' leaders, or the error.
func (c *core) createTopic(spec *adminv1.TopicSpec, validateOnly bool, res *adminv1.CreateTopicResult, then func(uint64, error)) {
	name := spec.GetName()
	fail := func(err error) { then(0, err) }
	if err := topicconfig.ValidateTopicName(name); err != nil {
		fail(err)
		return
	}
	if c.topics[name] != nil {
		fail(kerr.New(kerr.TopicAlreadyExists, "topic %q already exists", name))
		return
	}
	if err := placement.CheckCollision(name, slices.Collect(maps.Keys(c.topics))); err != nil {
		fail(err)
		return
	}
	for _, k := range slices.Sorted(maps.Keys(spec.GetConfigs())) {
		if err := topicconfig.Validate(topicconfig.ScopeTopic, k, spec.GetConfigs()[k]); err != nil {
			fail(err)
			return
		}
	}
	// The overrides together, over the broker layers (Kafka's
	// LogConfig.validateValues); broker layers etcd holds were checked
	// key by key when written, so only their valid keys count.
	_, layers, _ := topicconfig.WithoutInvalid(nil, c.dynLayers(-1))
	if err := topicconfig.ValidateTopic(spec.GetConfigs(), layers...); err != nil {
		fail(err)
		return
	}
	assignment, err := c.assign(spec)
	if err != nil {
		fail(err)
		return
	}
	t := &topic{name: name, config: maps.Clone(spec.GetConfigs())}
	nt := metastore.NewTopic{Name: name, Replicas: map[int32][]int32{}, States: map[int32]metastore.PartitionState{},
		Config: t.config}
	for p, reps := range assignment {
		// The first live replica leads, the live replicas form the ISR,
		// leader epoch 0 (Kafka's NewPartition -> OnlinePartition).
		// Checked before validate_only answers, so it answers as the
		// creation would.
		live := c.liveReplicas(reps)
		if len(live) == 0 {
			fail(kerr.New(kerr.InvalidReplicaAssignment, "partition %d: none of %v is live", p, reps))
			return
		}
		nt.Replicas[int32(p)] = reps
		nt.States[int32(p)] = metastore.PartitionState{Leader: live[0], ISR: live}
	}
	res.NumPartitions, res.ReplicationFactor = int32(len(assignment)), int32(len(assignment[0]))
	for p, reps := range assignment {
		res.Assignments = append(res.Assignments, &adminv1.ReplicaAssignment{Partition: int32(p), Replicas: slices.Clone(reps)})
	}
	res.Configs = c.topicConfigs(t, -1)
	if validateOnly {
		then(0, nil)
		return
	}
	what := "create topic " + name
	c.await(effCreateTopic{what: what, topic: nt}, what, func(ev event) {
		r := ev.(evCreateTopicResult)
		if r.err != nil {
			c.refusedOrFatal(what, r.err, r.resigning)
			fail(r.err)
			return
		}
		t := newTopic(r.topic)
		c.topics[name] = t
		c.stateDirty = true
		c.log.Info("Created topic", "topic", name, "topic_id", t.id, "partitions", len(t.parts),
			"replication_factor", len(assignment[0]), "configs", t.config)
		c.emitEvent(controlv1.EventKind_EVENT_KIND_TOPIC_CREATED, func(ev *controlv1.ClusterEvent) {
			ev.Topic = name
			ev.Reason = fmt.Sprintf("topic %s created with %d partitions, replication factor %d", name, len(t.parts), len(assignment[0]))
		})
		group := c.pushLeaderAndIsrAwaited(t.parts)
		c.pushUpdateMetadata(t.parts, nil, false, nil)
		then(group, nil)
	})
}

// assign picks the topic's replicas: the explicit assignment if given
// (naming registered brokers), else Kafka's rack-aware round robin over the
// live brokers (not shutting down) with a random start drawn from c.rng.
func (c *core) assign(spec *adminv1.TopicSpec) ([][]int32, error) {
	var live, registered []placement.Broker
	for _, id := range c.sortedBrokerIDs() {
		b := c.brokers[id]
		registered = append(registered, placement.Broker{ID: id, Rack: b.info.Rack})
		if !b.shuttingDown {
			live = append(live, placement.Broker{ID: id, Rack: b.info.Rack})
		}
	}
	if len(spec.GetAssignments()) > 0 {
		if spec.GetNumPartitions() != 0 || spec.GetReplicationFactor() != 0 {
			// Kafka's answer: the counts would be silently ignored.
			return nil, kerr.BadField(kerr.InvalidRequest, "num_partitions",
				"both num_partitions or replication_factor (%d, %d) and assignments were given: give one or the other",
				spec.GetNumPartitions(), spec.GetReplicationFactor())
		}
		m := map[int32][]int32{}
		for _, ra := range spec.GetAssignments() {
			if _, dup := m[ra.GetPartition()]; dup {
				return nil, kerr.New(kerr.InvalidReplicaAssignment, "partition %d is assigned twice", ra.GetPartition())
			}
			m[ra.GetPartition()] = ra.GetReplicas()
		}
		return placement.ValidateAssignment(m, registered)
	}
	cfg := c.brokerConfig()
	n, rf := spec.GetNumPartitions(), spec.GetReplicationFactor()
	if n == 0 {
		n = cfg.NumPartitions
	}
	if rf == 0 {
		rf = cfg.DefaultReplicationFactor
	}
	opts := placement.RandomOptions(c.rng, len(live))
	opts.Racks = placement.RackEnforced
	return placement.AssignReplicas(live, int(n), int(rf), opts)
}
