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
	var resp *adminv1.CreatePartitionsResponse
	var waits [][]<-chan error
	err := a.call(ctx, func() (err error) { resp, waits, err = a.createPartitions(req); return err })
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
				r.ErrorMessage = "partitions added, but their leaders did not confirm within timeout_ms"
			}
		}
	}
	return resp, nil
}

func (a *Active) createPartitions(req *adminv1.CreatePartitionsRequest) (*adminv1.CreatePartitionsResponse, [][]<-chan error, error) {
	resp := &adminv1.CreatePartitionsResponse{}
	waits := make([][]<-chan error, len(req.GetTopics()))
	seen := map[string]bool{}
	for i, spec := range req.GetTopics() {
		res := &adminv1.CreatePartitionsResult{Name: spec.GetName()}
		resp.Results = append(resp.Results, res)
		var err error
		if seen[spec.GetName()] {
			err = kerr.BadField(kerr.InvalidRequest, "topics", "topic %q appears more than once in the request", spec.GetName())
		} else {
			waits[i], err = a.addPartitions(spec, req.GetValidateOnly(), res)
		}
		seen[spec.GetName()] = true
		if a.stopping() {
			return nil, nil, a.notControllerFor(err)
		}
		if err != nil {
			ke := kerr.As(err)
			res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
		}
	}
	return resp, waits, nil
}

// addPartitions grows one topic; it returns the acks of the new leaders'
// LeaderAndIsr.
func (a *Active) addPartitions(spec *adminv1.CreatePartitionsTopic, validateOnly bool, res *adminv1.CreatePartitionsResult) ([]<-chan error, error) {
	t := a.topics[spec.GetName()]
	if t == nil || t.deleting {
		return nil, kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", spec.GetName())
	}
	have, want := int32(len(t.parts)), spec.GetCount()
	if want <= have {
		return nil, kerr.BadField(kerr.InvalidPartitions, "count", "topic %q has %d partitions; the count must be raised above that, got %d",
			t.name, have, want)
	}
	if err := errReassigning(t); err != nil {
		return nil, err
	}
	rf := len(t.parts[0].reassignment().Target())
	added, err := a.placeNewPartitions(t, spec, int(want-have), rf)
	if err != nil {
		return nil, err
	}
	for i, reps := range added {
		res.Assignments = append(res.Assignments, &adminv1.ReplicaAssignment{Partition: have + int32(i), Replicas: slices.Clone(reps)})
	}
	if validateOnly {
		return nil, nil
	}
	for i, reps := range added {
		id := have + int32(i)
		t.parts = append(t.parts, &partition{t: t, id: id, replicas: slices.Clone(reps),
			rec: metastore.PartitionRecord{Topic: t.name, Partition: id}})
	}
	// The assignment first; the states follow as for a creation cut short
	// (initStates), which a new controller also finishes at load.
	ctx, cancel := a.writeCtx()
	wr, err := a.sess.UpdateAssignment(ctx, metastore.AssignmentUpdate{Topic: t.name, ModRevision: t.modRev,
		Assignment: t.assignmentWith(-1, election.Reassignment{})})
	cancel()
	if err != nil {
		t.parts = t.parts[:have]
		if !a.refusedOrFatal("add partitions to "+t.name, err) {
			a.refreshTopic(t)
		}
		return nil, err
	}
	t.modRev = wr.ModRevision
	a.stateDirty = true
	a.log.Info("Added partitions", "topic", t.name, "from", have, "to", want, "assignment", added)
	a.event(controlv1.EventKind_EVENT_KIND_TOPIC_CREATED, func(ev *controlv1.ClusterEvent) {
		ev.Topic = t.name
		ev.Reason = fmt.Sprintf("topic %s grew from %d to %d partitions", t.name, have, want)
	})
	written, err := a.initStates(t.parts[have:])
	if err != nil {
		return nil, err
	}
	acks := a.pushLeaderAndIsr(written, nil)
	a.pushUpdateMetadata(written, nil, false, nil)
	// One request (and one ack) per broker: wait for each new leader once.
	leaders := map[int32]bool{}
	for _, p := range written {
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

// placeNewPartitions is the new partitions' replicas: the request's, checked
// like a reassignment target with the topic's replication factor, or
// Kafka's round robin over the live brokers.
func (a *Active) placeNewPartitions(t *topic, spec *adminv1.CreatePartitionsTopic, n, rf int) ([][]int32, error) {
	if len(spec.GetAssignments()) > 0 {
		if len(spec.GetAssignments()) != n {
			return nil, kerr.BadField(kerr.InvalidReplicaAssignment, "assignments",
				"%d assignments given for %d new partitions", len(spec.GetAssignments()), n)
		}
		view := a.view()
		out := make([][]int32, n)
		for i, ra := range spec.GetAssignments() {
			if err := election.ValidateTarget(ra.GetReplicas(), view); err != nil {
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
	for _, id := range a.sortedBrokerIDs() {
		if b := a.brokers[id]; !b.shuttingDown {
			live = append(live, placement.Broker{ID: id, Rack: b.info.Rack})
		}
	}
	opts := placement.RandomOptions(a.rng, len(live))
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
