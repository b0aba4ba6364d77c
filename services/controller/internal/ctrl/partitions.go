package ctrl

import (
	"context"
	"fmt"
	"slices"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/controller/internal/placement"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// CreatePartitions adds partitions to topics (Kafka's CreatePartitions):
// the count only grows, the new partitions get the topic's replication
// factor, placed as at creation (Kafka continues the round robin from the
// broker of partition 0's first replica), or as given.
// With timeout_ms it also waits, outside the loop, for the new partitions'
// leaders to accept their LeaderAndIsr (REQUEST_TIMED_OUT otherwise, the
// partitions being added all the same), as CreateTopics does.
func (a *Active) CreatePartitions(ctx context.Context, req *adminv1.CreatePartitionsRequest) (*adminv1.CreatePartitionsResponse, error) {
	var ans partitionsAnswer
	var waits [][]<-chan error
	err := a.call(ctx, func() error {
		err := errNoOutcome
		a.step(evCreatePartitions{req: req, reply: answerTo(&ans, &err)})
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
				r.ErrorMessage = "partitions added, but their leaders did not confirm within timeout_ms"
			}
		}
	}
	return resp, nil
}

// partitionsAnswer is the core's answer to CreatePartitions: the response
// and, per topic, the ack group of the new leaders' LeaderAndIsr.
type partitionsAnswer struct {
	resp   *adminv1.CreatePartitionsResponse
	groups []uint64
}

// createPartitions grows the request's topics one after the other, then
// answers.
func (c *core) createPartitions(req *adminv1.CreatePartitionsRequest, reply replyFunc) {
	resp := &adminv1.CreatePartitionsResponse{}
	specs := req.GetTopics()
	groups := make([]uint64, len(specs))
	count := map[string]int{}
	for _, s := range specs {
		count[s.GetName()]++
	}
	var next func(i int)
	next = func(i int) {
		if i == len(specs) {
			c.answer(reply, partitionsAnswer{resp: resp, groups: groups}, nil)
			return
		}
		spec := specs[i]
		res := &adminv1.CreatePartitionsResult{Name: spec.GetName()}
		resp.Results = append(resp.Results, res)
		done := func(group uint64, err error) {
			if c.stopping() {
				c.answer(reply, nil, c.notControllerFor(err))
				return
			}
			if err != nil {
				ke := kerr.As(err)
				res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
			}
			groups[i] = group
			next(i + 1)
		}
		if count[spec.GetName()] > 1 {
			// Every copy is refused, as Kafka does: the first one grew the
			// topic while the others were refused.
			done(0, kerr.BadField(kerr.InvalidRequest, "topics", "topic %q appears more than once in the request", spec.GetName()))
			return
		}
		c.addPartitions(spec, req.GetValidateOnly(), res, done)
	}
	next(0)
}

// addPartitions grows one topic: the assignment is written first
// (effWriteAssignment), then the new partitions' states (initStates), then
// they are pushed. then gets the ack group of the new leaders'
// LeaderAndIsr, or the error.
func (c *core) addPartitions(spec *adminv1.CreatePartitionsTopic, validateOnly bool, res *adminv1.CreatePartitionsResult, then func(uint64, error)) {
	t := c.topics[spec.GetName()]
	if t == nil || t.deleting {
		then(0, kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", spec.GetName()))
		return
	}
	if t.name == OffsetsTopic {
		// Its partition count is fixed: a group's coordinator is
		// PartitionFor(group, N), so more partitions would move most
		// groups away from their committed offsets.
		then(0, kerr.New(kerr.InvalidPartitions, "%s is an internal topic: its partition count cannot be changed", OffsetsTopic))
		return
	}
	have, want := int32(len(t.parts)), spec.GetCount()
	if want > placement.MaxPartitions {
		then(0, kerr.BadField(kerr.InvalidPartitions, "count", "number of partitions must be at most %d, got %d", placement.MaxPartitions, want))
		return
	}
	if want <= have {
		then(0, kerr.BadField(kerr.InvalidPartitions, "count", "topic %q has %d partitions; the count must be raised above that, got %d",
			t.name, have, want))
		return
	}
	if err := errReassigning(t); err != nil {
		then(0, err)
		return
	}
	if have == 0 {
		then(0, kerr.New(kerr.InvalidPartitions, "topic %q has no partitions in its assignment", t.name))
		return
	}
	rf := len(t.parts[0].reassignment().Target())
	added, err := c.placeNewPartitions(t, spec, int(want-have), rf)
	if err != nil {
		then(0, err)
		return
	}
	for i, reps := range added {
		res.Assignments = append(res.Assignments, &adminv1.ReplicaAssignment{Partition: have + int32(i), Replicas: slices.Clone(reps)})
	}
	if validateOnly {
		then(0, nil)
		return
	}
	for i, reps := range added {
		id := have + int32(i)
		t.parts = append(t.parts, &partition{t: t, id: id, replicas: slices.Clone(reps),
			rec: metastore.PartitionRecord{Topic: t.name, Partition: id}})
	}
	// The assignment first; the states follow as for a creation cut short
	// (initStates), which a new controller also finishes at load.
	what := "add partitions to " + t.name
	c.await(effWriteAssignment{what: what, update: metastore.AssignmentUpdate{Topic: t.name, ModRevision: t.modRev,
		Assignment: t.assignmentWith(-1, election.Reassignment{})}}, what, func(ev event) {
		r := ev.(evAssignmentResult)
		if r.err != nil {
			t.parts = t.parts[:have]
			if !c.refusedOrFatal(what, r.err, r.resigning) {
				c.refreshTopic(t, func() { then(0, r.err) })
				return
			}
			then(0, r.err)
			return
		}
		t.modRev = r.res.ModRevision
		c.stateDirty = true
		c.log.Info("Added partitions", "topic", t.name, "from", have, "to", want, "assignment", added)
		c.emitEvent(controlv1.EventKind_EVENT_KIND_TOPIC_CREATED, func(ev *controlv1.ClusterEvent) {
			ev.Topic = t.name
			ev.Reason = fmt.Sprintf("topic %s grew from %d to %d partitions", t.name, have, want)
		})
		c.initStates(t.parts[have:], func(written []*partition, err error) {
			if err != nil {
				then(0, err)
				return
			}
			group := c.pushLeaderAndIsrAwaited(written)
			c.pushUpdateMetadata(written, nil, false, nil)
			then(group, nil)
		})
	})
}

// placeNewPartitions is the new partitions' replicas: the request's, checked
// as CreateTopics checks an assignment, with the topic's replication factor,
// or Kafka's round robin over the live brokers.
func (c *core) placeNewPartitions(t *topic, spec *adminv1.CreatePartitionsTopic, n, rf int) ([][]int32, error) {
	if len(spec.GetAssignments()) > 0 {
		if len(spec.GetAssignments()) != n {
			return nil, kerr.BadField(kerr.InvalidReplicaAssignment, "assignments",
				"%d assignments given for %d new partitions", len(spec.GetAssignments()), n)
		}
		out := make([][]int32, n)
		for i, ra := range spec.GetAssignments() {
			if err := c.checkNewReplicas(int32(len(t.parts)+i), ra.GetReplicas()); err != nil {
				return nil, err
			}
			if len(ra.GetReplicas()) != rf {
				return nil, kerr.New(kerr.InvalidReplicaAssignment, "new partition %d has %d replicas; the topic's replication factor is %d",
					len(t.parts)+i, len(ra.GetReplicas()), rf)
			}
			out[i] = slices.Clone(ra.GetReplicas())
		}
		return out, nil
	}
	var live []placement.Broker
	for _, id := range c.sortedBrokerIDs() {
		if b := c.brokers[id]; !b.shuttingDown {
			live = append(live, placement.Broker{ID: id, Rack: b.info.Rack})
		}
	}
	opts := placement.RandomOptions(c.rng, len(live))
	opts.Racks = placement.RackEnforced
	opts.FirstPartition = int32(len(t.parts))
	// Kafka starts at the broker of partition 0's first replica.
	if first := t.parts[0].replicas.Preferred(); first >= 0 {
		for i, b := range live {
			if b.ID >= first {
				opts.StartIndex = i
				break
			}
		}
	}
	return placement.AssignReplicas(live, n, rf, opts)
}

// checkNewReplicas checks a new partition's requested replicas as
// CreateTopics does: registered brokers, none twice, and at least one that
// may lead. Like Kafka, a replica shutting down is accepted beside a live
// one: it is left out of the first ISR and catches up once it is back.
func (c *core) checkNewReplicas(p int32, reps []int32) error {
	if len(reps) == 0 {
		return kerr.New(kerr.InvalidReplicaAssignment, "partition %d has no replicas", p)
	}
	for i, id := range reps {
		if slices.Contains(reps[:i], id) {
			return kerr.New(kerr.InvalidReplicaAssignment, "partition %d lists broker %d twice in %v", p, id, reps)
		}
		if !c.registered(id) {
			return kerr.New(kerr.InvalidReplicaAssignment, "partition %d names unknown broker %d in %v", p, id, reps)
		}
	}
	if len(c.liveReplicas(reps)) == 0 {
		return kerr.New(kerr.InvalidReplicaAssignment, "partition %d: none of %v is live", p, reps)
	}
	return nil
}
