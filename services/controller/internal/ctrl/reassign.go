package ctrl

import (
	"context"
	"slices"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// Partition reassignment (KIP-455, F28). Every step writes the topic's
// assignment and the partition's state in one fenced transaction, then
// pushes:
//
//   - start (phase A): RS = TRS+ORS, AR and RR recorded, the leader epoch
//     bumped; LeaderAndIsr to RS, so the adding replicas create their logs
//     and follow. They join the ISR through the leader's usual expansion
//     (AlterPartition).
//   - complete (phase B), once TRS is in the ISR: the leader moves into TRS
//     if it is outside it, the ISR and RS shrink to TRS; LeaderAndIsr to TRS,
//     StopReplica (delete) to RR.
//   - cancel: RS and the ISR go back to ORS; StopReplica (delete) to AR.
//
// A new controller finds AR/RR in etcd (load) and carries on from there.

const causeReassign cause = "reassignment"

// reassignment is the partition's replica set as KIP-455 describes it.
func (p *partition) reassignment() election.Reassignment {
	return election.Reassignment{Replicas: slices.Clone([]int32(p.replicas)),
		Adding: slices.Clone(p.adding), Removing: slices.Clone(p.removing)}
}

func (p *partition) reassigning() bool { return len(p.adding) > 0 || len(p.removing) > 0 }

// assignmentWith is the topic's assignment as etcd holds it, with partition
// id given r (or every partition as it is, for id -1).
func (t *topic) assignmentWith(id int32, r election.Reassignment) metastore.TopicAssignment {
	asg := metastore.TopicAssignment{TopicID: t.id, Partitions: map[int32][]int32{},
		AddingReplicas: map[int32][]int32{}, RemovingReplicas: map[int32][]int32{}}
	for _, p := range t.parts {
		reps, add, rem := []int32(p.replicas), p.adding, p.removing
		if p.id == id {
			reps, add, rem = r.Replicas, r.Adding, r.Removing
		}
		asg.Partitions[p.id] = slices.Clone(reps)
		if len(add) > 0 {
			asg.AddingReplicas[p.id] = slices.Clone(add)
		}
		if len(rem) > 0 {
			asg.RemovingReplicas[p.id] = slices.Clone(rem)
		}
	}
	return asg
}

// AlterPartitionReassignments starts, replaces or cancels reassignments.
func (a *Active) AlterPartitionReassignments(ctx context.Context, req *adminv1.AlterPartitionReassignmentsRequest) (*adminv1.AlterPartitionReassignmentsResponse, error) {
	var resp *adminv1.AlterPartitionReassignmentsResponse
	err := a.call(ctx, func() (err error) { resp, err = a.alterReassignments(req); return err })
	return resp, err
}

func (a *Active) alterReassignments(req *adminv1.AlterPartitionReassignmentsRequest) (*adminv1.AlterPartitionReassignmentsResponse, error) {
	resp := &adminv1.AlterPartitionReassignmentsResponse{}
	seen := map[election.TopicPartition]bool{}
	for _, it := range req.GetPartitions() {
		res := &adminv1.ReassignmentResult{Topic: it.GetTopic(), Partition: it.GetPartition()}
		resp.Results = append(resp.Results, res)
		tp := election.TopicPartition{Topic: it.GetTopic(), Partition: it.GetPartition()}
		p := a.lookup(tp.Topic, tp.Partition)
		var err error
		switch {
		case seen[tp]:
			err = kerr.BadField(kerr.InvalidRequest, "partitions", "partition %s appears more than once in the request", tp)
		case p == nil || !p.hasState():
			err = kerr.New(kerr.UnknownTopicOrPartition, "unknown partition %s", tp)
		case p.t.deleting:
			err = kerr.New(kerr.UnknownTopicOrPartition, "topic %q is being deleted", tp.Topic)
		case len(it.GetReplicas()) == 0:
			err = a.cancelReassignment(p)
		default:
			err = a.startReassignment(p, it.GetReplicas())
		}
		seen[tp] = true
		if a.stopping() {
			return nil, a.notControllerFor(err)
		}
		if err != nil {
			ke := kerr.As(err)
			res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
		}
	}
	return resp, nil
}

// startReassignment is phase A. A target equal to the current replicas
// changes nothing; a new target during a move replaces it (ORS stays).
func (a *Active) startReassignment(p *partition, target []int32) error {
	view := a.view()
	if err := election.ValidateTarget(target, view); err != nil {
		return err
	}
	cur := p.reassignment()
	next := election.StartReassignment(cur, target)
	if slices.Equal(next.Replicas, cur.Replicas) && slices.Equal(next.Adding, cur.Adding) && slices.Equal(next.Removing, cur.Removing) {
		return nil
	}
	d, err := election.ReassignStart(p.state(), next.Replicas, a.viewFor(p, view))
	if err != nil {
		return err
	}
	// Replicas a replaced reassignment was adding that the new one drops.
	var dropped []int32
	for _, id := range cur.Replicas {
		if !slices.Contains(next.Replicas, id) {
			dropped = append(dropped, id)
		}
	}
	if err := a.writeReassignStep(p, next, d); err != nil {
		return err
	}
	a.log.Info("Reassignment started", "partition", p.tp().String(), "replicas", next.Replicas,
		"adding", next.Adding, "removing", next.Removing, "target", target, "leader_epoch", p.rec.State.LeaderEpoch)
	a.pushChanges([]*partition{p})
	for _, id := range dropped {
		a.pushStopReplica(id, []*partition{p}, true)
	}
	a.maybeCompleteReassignments([]*partition{p})
	return nil
}

// maybeCompleteReassignments runs phase B for each partition whose whole
// target is in the ISR.
func (a *Active) maybeCompleteReassignments(parts []*partition) {
	for _, p := range parts {
		if a.stopping() {
			return
		}
		if !p.reassigning() || !election.ReassignmentReady(p.reassignment(), p.state()) {
			continue
		}
		r := p.reassignment()
		target := r.Target()
		d, err := election.ShrinkToReplicas(p.state(), target, a.viewFor(p, a.view()), "reassignment complete")
		if err != nil {
			// Retried at the partition's next ISR change.
			a.log.Warn("Reassignment cannot complete yet", "partition", p.tp().String(), "err", err)
			continue
		}
		if err := a.writeReassignStep(p, election.Reassignment{Replicas: target}, d); err != nil {
			continue
		}
		a.log.Info("Reassignment complete", "partition", p.tp().String(), "replicas", target,
			"removed", r.Removing, "leader", p.rec.State.Leader, "leader_epoch", p.rec.State.LeaderEpoch)
		a.pushChanges([]*partition{p})
		for _, id := range r.Removing {
			a.pushStopReplica(id, []*partition{p}, true)
		}
	}
}

// cancelReassignment reverts a partition to its original replicas (Kafka's
// revert: RS = ORS, the adding replicas leave the ISR and are deleted).
func (a *Active) cancelReassignment(p *partition) error {
	r := p.reassignment()
	if !r.Ongoing() {
		return kerr.New(kerr.NoReassignmentInProgress, "partition %s has no reassignment in progress", p.tp())
	}
	origin := r.Origin()
	d, err := election.ShrinkToReplicas(p.state(), origin, a.viewFor(p, a.view()), "reassignment cancelled")
	if err != nil {
		return err
	}
	if err := a.writeReassignStep(p, election.Reassignment{Replicas: origin}, d); err != nil {
		return err
	}
	a.log.Info("Reassignment cancelled", "partition", p.tp().String(), "replicas", origin,
		"removed", r.Adding, "leader", p.rec.State.Leader, "leader_epoch", p.rec.State.LeaderEpoch)
	a.pushChanges([]*partition{p})
	for _, id := range r.Adding {
		a.pushStopReplica(id, []*partition{p}, true)
	}
	return nil
}

// resumeReassignments is the new term's look at reassignments in flight:
// their replicas already got LeaderAndIsr with the whole replica set, so
// only a move whose target is already in the ISR needs a step now.
func (a *Active) resumeReassignments() {
	var moving []*partition
	for _, p := range a.allPartitions() {
		if p.reassigning() {
			moving = append(moving, p)
			a.log.Info("Resuming reassignment", "partition", p.tp().String(), "replicas", []int32(p.replicas),
				"adding", p.adding, "removing", p.removing, "isr", p.rec.State.ISR)
		}
	}
	a.maybeCompleteReassignments(moving)
}

// writeReassignStep writes a partition's new replica set and state in one
// fenced transaction and applies them to the model. A conflict (the keys
// changed behind the controller) reloads the topic; a failed or fenced
// write ends the term.
func (a *Active) writeReassignStep(p *partition, r election.Reassignment, d election.Decision) error {
	ctx, cancel := a.writeCtx()
	res, err := a.sess.UpdateAssignment(ctx, metastore.AssignmentUpdate{
		Topic: p.t.name, ModRevision: p.t.modRev, Assignment: p.t.assignmentWith(p.id, r),
		States: []metastore.PartitionUpdate{{Current: p.rec, Next: metastore.PartitionState{
			Leader: d.State.Leader, LeaderEpoch: d.State.LeaderEpoch, ISR: d.State.ISR}}},
	})
	cancel()
	if err != nil {
		if a.refusedOrFatal("reassign "+p.tp().String(), err) {
			return err
		}
		a.refreshTopic(p.t)
		return err
	}
	old := p.rec.State
	p.t.modRev = res.ModRevision
	p.rec = res.States[0]
	p.replicas, p.adding, p.removing = slices.Clone(r.Replicas), slices.Clone(r.Adding), slices.Clone(r.Removing)
	a.stateDirty = true
	if p.rec.State.Leader != old.Leader {
		a.record(change{p: p, d: d, cause: causeReassign}, old)
	}
	return nil
}

// refreshTopic re-reads a topic whose keys changed under the controller.
func (a *Active) refreshTopic(t *topic) {
	ctx, cancel := a.writeCtx()
	mt, err := a.d.Store.Topic(ctx, t.name)
	cancel()
	if err != nil {
		a.log.Warn("cannot re-read topic after a conflict", "topic", t.name, "err", err)
		return
	}
	fresh := newTopic(mt)
	t.modRev, t.config = fresh.modRev, fresh.config
	for _, np := range fresh.parts {
		np.t = t
	}
	t.parts = fresh.parts
	a.stateDirty = true
}

// ListPartitionReassignments lists the reassignments in flight.
func (a *Active) ListPartitionReassignments(ctx context.Context, req *adminv1.ListPartitionReassignmentsRequest) (*adminv1.ListPartitionReassignmentsResponse, error) {
	var resp *adminv1.ListPartitionReassignmentsResponse
	err := a.call(ctx, func() (err error) { resp, err = a.listReassignments(req); return err })
	return resp, err
}

// listReassignments answers for the partitions asked (all when none): an
// unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an unknown partition of a
// known topic is left out (KRaft's rule).
func (a *Active) listReassignments(req *adminv1.ListPartitionReassignmentsRequest) (*adminv1.ListPartitionReassignmentsResponse, error) {
	var parts []*partition
	if len(req.GetPartitions()) == 0 {
		parts = a.allPartitions()
	} else {
		for _, tp := range req.GetPartitions() {
			if a.topics[tp.GetTopic()] == nil {
				return nil, kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", tp.GetTopic())
			}
			if p := a.lookup(tp.GetTopic(), tp.GetPartition()); p != nil && !slices.Contains(parts, p) {
				parts = append(parts, p)
			}
		}
		sortPartitions(parts)
	}
	resp := &adminv1.ListPartitionReassignmentsResponse{}
	for _, p := range parts {
		if !p.reassigning() {
			continue
		}
		s := p.rec.State
		o := &adminv1.OngoingReassignment{Topic: p.t.name, Partition: p.id, Replicas: slices.Clone([]int32(p.replicas)),
			AddingReplicas: slices.Clone(p.adding), RemovingReplicas: slices.Clone(p.removing), Leader: s.Leader,
			Isr: slices.Clone(s.ISR)}
		lead := a.progressOf(p, s.Leader)
		for _, id := range p.adding {
			mp := &adminv1.ReplicaMoveProgress{BrokerId: id, InIsr: slices.Contains(s.ISR, id), BytesLeft: -1}
			if rp := a.progressOf(p, id); rp != nil {
				mp.LogEndOffset, mp.SizeBytes = rp.GetLogEndOffset(), rp.GetSizeBytes()
			}
			if lead != nil {
				mp.LeaderLogEndOffset, mp.LeaderSizeBytes = lead.GetLogEndOffset(), lead.GetSizeBytes()
				if a.progressOf(p, id) != nil {
					mp.BytesLeft = max(0, mp.LeaderSizeBytes-mp.SizeBytes)
				}
			}
			o.Progress = append(o.Progress, mp)
		}
		resp.Reassignments = append(resp.Reassignments, o)
	}
	return resp, nil
}

// errReassigning refuses changes to a topic with partitions being moved.
func errReassigning(t *topic) error {
	for _, p := range t.parts {
		if p.reassigning() {
			return kerr.New(kerr.ReassignmentInProgress, "topic %q: partition %d is being reassigned", t.name, p.id)
		}
	}
	return nil
}
