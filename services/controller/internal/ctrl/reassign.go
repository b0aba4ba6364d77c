package ctrl

import (
	"context"
	"slices"
	"time"

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
//     (AlterPartition). A new target during a move replaces it; the
//     replicas the old move was adding that the new one drops leave RS and
//     get StopReplica (delete), and a leader among them yields first.
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
//
// A cancel that takes the leadership back from an adding replica, or a new
// target that drops the adding replica that leads, waits for it to yield
// (handoff.go), so the answer may come from a later step.
func (a *Active) AlterPartitionReassignments(ctx context.Context, req *adminv1.AlterPartitionReassignmentsRequest) (*adminv1.AlterPartitionReassignmentsResponse, error) {
	var resp *adminv1.AlterPartitionReassignmentsResponse
	var answerErr error
	err := a.ask(ctx, answerTo(&resp, &answerErr), func(reply replyFunc) event { return evReassign{req: req, reply: reply} })
	if err != nil {
		return nil, err // unanswered: the loop may answer later, into resp
	}
	if answerErr != nil {
		return nil, answerErr
	}
	return resp, nil
}

// alterReassignments handles the items in order, each to the end of its
// write and pushes before the next.
func (c *core) alterReassignments(req *adminv1.AlterPartitionReassignmentsRequest, reply replyFunc) {
	resp := &adminv1.AlterPartitionReassignmentsResponse{}
	seen := map[election.TopicPartition]bool{}
	items := req.GetPartitions()
	var next func(i int)
	next = func(i int) {
		if i == len(items) {
			c.answer(reply, resp, nil)
			return
		}
		it := items[i]
		res := &adminv1.ReassignmentResult{Topic: it.GetTopic(), Partition: it.GetPartition()}
		resp.Results = append(resp.Results, res)
		tp := election.TopicPartition{Topic: it.GetTopic(), Partition: it.GetPartition()}
		done := func(err error) {
			seen[tp] = true
			if c.stopping() {
				c.answer(reply, nil, c.notControllerFor(err))
				return
			}
			if err != nil {
				ke := kerr.As(err)
				res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
			}
			next(i + 1)
		}
		p := c.lookup(tp.Topic, tp.Partition)
		switch {
		case seen[tp]:
			done(kerr.BadField(kerr.InvalidRequest, "partitions", "partition %s appears more than once in the request", tp))
		case p == nil || !p.hasState():
			done(kerr.New(kerr.UnknownTopicOrPartition, "unknown partition %s", tp))
		case p.t.deleting:
			done(kerr.New(kerr.UnknownTopicOrPartition, "topic %q is being deleted", tp.Topic))
		case len(it.GetReplicas()) == 0:
			c.cancelReassignment(p, done)
		default:
			c.startReassignment(p, it.GetReplicas(), done)
		}
	}
	next(0)
}

// startReassignment is phase A. A target equal to the current replicas
// changes nothing; a new target during a move replaces it (ORS stays).
func (c *core) startReassignment(p *partition, target []int32, done func(error)) {
	if err := election.ValidateTarget(target, c.view()); err != nil {
		done(err)
		return
	}
	cur := p.reassignment()
	next := election.StartReassignment(cur, target)
	if slices.Equal(next.Replicas, cur.Replicas) && slices.Equal(next.Adding, cur.Adding) && slices.Equal(next.Removing, cur.Removing) {
		// The same target again: nothing to write, but a move whose
		// completion failed is tried again now, as Kafka does.
		c.maybeCompleteReassignments([]*partition{p}, func() { done(nil) })
		return
	}
	d, err := c.reassignStart(p, next)
	if err != nil {
		done(err)
		return
	}
	write := func(then func(error)) {
		c.writeReassignStep(p, next, d, then)
	}
	if c.movesLeaderOff(p, d) {
		// A replaced move drops the adding replica that leads, whose log is
		// deleted right after: a voluntary move, so the next leader has
		// every record it took (acks=1 included) before it goes.
		write = func(then func(error)) {
			c.stepAfterYield(p, func(p *partition) (election.Reassignment, election.Decision, error) {
				if err := election.ValidateTarget(target, c.view()); err != nil {
					return election.Reassignment{}, election.Decision{}, err
				}
				// The replica set as the step that is written was
				// computed from: its dropped replicas are the ones deleted.
				cur = p.reassignment()
				next = election.StartReassignment(cur, target)
				d, err := c.reassignStart(p, next)
				return next, d, err
			}, then)
		}
	}
	write(func(err error) {
		if err != nil {
			done(err)
			return
		}
		c.log.Info("Reassignment started", "partition", p.tp().String(), "replicas", next.Replicas,
			"adding", next.Adding, "removing", next.Removing, "target", target, "leader_epoch", p.rec.State.LeaderEpoch)
		c.pushChanges([]*partition{p})
		for _, id := range droppedReplicas(cur, next) {
			c.pushStopReplica(id, []*partition{p}, true)
		}
		c.maybeCompleteReassignments([]*partition{p}, func() { done(nil) })
	})
}

// reassignStart is phase A's decision for the replica set next.
func (c *core) reassignStart(p *partition, next election.Reassignment) (election.Decision, error) {
	return election.ReassignStart(p.state(), next.Replicas, c.viewFor(p, c.view()))
}

// droppedReplicas are the replicas a replaced reassignment was adding that
// the new one drops.
func droppedReplicas(cur, next election.Reassignment) []int32 {
	var dropped []int32
	for _, id := range cur.Replicas {
		if !slices.Contains(next.Replicas, id) {
			dropped = append(dropped, id)
		}
	}
	return dropped
}

// maybeCompleteReassignments runs phase B for each partition whose whole
// target is in the ISR, one after the other, then calls then.
func (c *core) maybeCompleteReassignments(parts []*partition, then func()) {
	var step func(i int)
	step = func(i int) {
		if i == len(parts) || c.stopping() {
			then()
			return
		}
		p := parts[i]
		// A topic being deleted has had its replicas stopped and deleted:
		// completing its move would write its assignment and send
		// LeaderAndIsr after the StopReplica, recreating the replicas.
		if c.completing[p] || p.t.deleting || !p.reassigning() || !election.ReassignmentReady(p.reassignment(), p.state()) {
			step(i + 1)
			return
		}
		r := p.reassignment()
		target := r.Target()
		d, err := election.ShrinkToReplicas(p.state(), target, c.viewFor(p, c.view()), "reassignment complete")
		if err != nil {
			// Looked at again at the partition's next state change.
			c.log.Warn("Reassignment cannot complete yet", "partition", p.tp().String(), "err", err)
			step(i + 1)
			return
		}
		if c.movesLeaderOff(p, d) {
			// The leader leaves the replicas: a voluntary move, which waits
			// for it to yield and completes from that answer's step; the
			// request that got here (its own AlterPartition, say) is not
			// held up meanwhile.
			c.completeAfterYield(p)
			step(i + 1)
			return
		}
		c.writeReassignStep(p, election.Reassignment{Replicas: target}, d, func(err error) {
			switch {
			case err == nil:
				c.reassignmentCompleted(p, r)
			case !c.stopping():
				// Refused: the topic changed in etcd and was read again.
				c.reassignNotCompleted(p, err)
			}
			step(i + 1)
		})
	}
	step(0)
}

// reassignmentCompleted pushes a completed reassignment's state and stops
// the replicas it removed.
func (c *core) reassignmentCompleted(p *partition, r election.Reassignment) {
	c.log.Info("Reassignment complete", "partition", p.tp().String(), "replicas", r.Target(),
		"removed", r.Removing, "leader", p.rec.State.Leader, "leader_epoch", p.rec.State.LeaderEpoch)
	c.pushChanges([]*partition{p})
	for _, id := range r.Removing {
		c.pushStopReplica(id, []*partition{p}, true)
	}
}

// completeAfterYield completes a reassignment that moves the leadership
// off a replica it removes, as a voluntary move (stepAfterYield). A leader
// that does not yield keeps the partition, and the completion is tried
// again after reassignRetryAfter, or sooner at the partition's next state
// change. One completion per partition at a time.
func (c *core) completeAfterYield(p *partition) {
	if c.completing[p] {
		return
	}
	// r is the reassignment as the step that is written was computed from
	// (the last computation runs in the step that writes): an admin may
	// have replaced it while the leader yielded, and its removed replicas
	// are the ones deleted.
	var r election.Reassignment
	step := func(p *partition) (election.Reassignment, election.Decision, error) {
		if !p.reassigning() || !election.ReassignmentReady(p.reassignment(), p.state()) {
			return election.Reassignment{}, election.Decision{}, kerr.New(kerr.NoReassignmentInProgress, "%s: the reassignment changed", p.tp())
		}
		r = p.reassignment()
		d, err := election.ShrinkToReplicas(p.state(), r.Target(), c.viewFor(p, c.view()), "reassignment complete")
		return election.Reassignment{Replicas: r.Target()}, d, err
	}
	c.completing[p] = true
	c.stepAfterYield(p, step, func(err error) {
		delete(c.completing, p)
		if err != nil {
			if !c.stopping() {
				c.reassignNotCompleted(p, err)
			}
			return
		}
		c.reassignmentCompleted(p, r)
	})
}

// reassignRetryAfter is how long a reassignment whose completion failed
// (its leader did not yield in time, or the write was refused) waits
// before it is tried again. Nothing else may come to try it: an idle
// partition whose replicas are all in sync changes its state no more.
const reassignRetryAfter = 2 * time.Second

// reassignNotCompleted logs a completion that failed and arms its retry.
func (c *core) reassignNotCompleted(p *partition, err error) {
	c.log.Warn("Reassignment not completed yet; trying again", "partition", p.tp().String(),
		"retry_in", reassignRetryAfter.String(), "err", err)
	c.armReassignCheck(reassignRetryAfter)
}

// armReassignCheck arms the look at every reassignment whose target is in
// the ISR (retryReassignments). Arming again replaces the pending one; the
// look covers every partition, so none is missed.
func (c *core) armReassignCheck(after time.Duration) {
	c.emit(effArmTimer{key: timerKey{kind: timerReassign}, after: after})
}

// retryReassignments runs phase B for every reassignment in flight whose
// target is in the ISR and whose completion is not already under way.
func (c *core) retryReassignments() {
	var moving []*partition
	for _, p := range c.allPartitions() {
		if p.reassigning() && !c.completing[p] {
			moving = append(moving, p)
		}
	}
	c.maybeCompleteReassignments(moving, func() {})
}

// stepAfterYield writes the reassignment step that step computes from the
// partition as it is, when that step moves the leadership off a live
// leader: a voluntary move (handoff.go). The leader yields first (once the
// next leader has every record it took); the step is computed again from
// the partition as it is then, and written. then gets the yield's error or
// the write's; a leader that yielded for a write that failed is told to
// resume.
func (c *core) stepAfterYield(p *partition, step func(*partition) (election.Reassignment, election.Decision, error), then func(error)) {
	_, d, err := step(p)
	if err != nil {
		then(err)
		return
	}
	from, at := p.rec.State.Leader, stateOf(p)
	redecide := func(p *partition) (election.Decision, error) {
		_, d, err := step(p)
		return d, err
	}
	c.handOff([]change{{p: p, d: d, cause: causeReassign}}, redecide, func(ready []change, failed map[election.TopicPartition]error) {
		if len(ready) == 0 {
			then(failed[p.tp()])
			return
		}
		r, _, err := step(p)
		if err != nil {
			then(err)
			return
		}
		c.writeReassignStep(p, r, ready[0].d, func(err error) {
			if err != nil && !c.stopping() {
				// Nothing written: the leader yielded for nothing.
				c.resumeLeader(from, []change{{p: p}}, []stateAt{at})
			}
			then(err)
		})
	})
}

// movesLeaderOff reports whether decision d takes the leadership away from
// a live leader: a voluntary move, whose leader must yield first.
func (c *core) movesLeaderOff(p *partition, d election.Decision) bool {
	from := p.rec.State.Leader
	return from >= 0 && from != d.State.Leader && c.registered(from)
}

// cancelReassignment reverts a partition to its original replicas (Kafka's
// revert: RS = ORS, the adding replicas leave the ISR and are deleted).
func (c *core) cancelReassignment(p *partition, done func(error)) {
	r := p.reassignment()
	if !r.Ongoing() {
		done(kerr.New(kerr.NoReassignmentInProgress, "partition %s has no reassignment in progress", p.tp()))
		return
	}
	origin := r.Origin()
	d, err := election.ShrinkToReplicas(p.state(), origin, c.viewFor(p, c.view()), "reassignment cancelled")
	if err != nil {
		done(err)
		return
	}
	write := func(then func(error)) {
		c.writeReassignStep(p, election.Reassignment{Replicas: origin}, d, then)
	}
	if c.movesLeaderOff(p, d) {
		// An adding replica leads (elected while the move was in flight):
		// taking the leadership back is a voluntary move.
		write = func(then func(error)) {
			c.stepAfterYield(p, func(p *partition) (election.Reassignment, election.Decision, error) {
				cur := p.reassignment()
				if !cur.Ongoing() || !slices.Equal(cur.Origin(), origin) {
					return election.Reassignment{}, election.Decision{}, kerr.New(kerr.NoReassignmentInProgress, "%s: the reassignment changed", p.tp())
				}
				r = cur // its adding replicas, as written, are the ones deleted
				d, err := election.ShrinkToReplicas(p.state(), origin, c.viewFor(p, c.view()), "reassignment cancelled")
				return election.Reassignment{Replicas: origin}, d, err
			}, then)
		}
	}
	write(func(err error) {
		if err != nil {
			done(err)
			return
		}
		c.log.Info("Reassignment cancelled", "partition", p.tp().String(), "replicas", origin,
			"removed", r.Adding, "leader", p.rec.State.Leader, "leader_epoch", p.rec.State.LeaderEpoch)
		c.pushChanges([]*partition{p})
		for _, id := range r.Adding {
			c.pushStopReplica(id, []*partition{p}, true)
		}
		done(nil)
	})
}

// resumeReassignments is the new term's look at reassignments in flight:
// their replicas already got LeaderAndIsr with the whole replica set, so
// only a move whose target is already in the ISR needs a step now.
func (c *core) resumeReassignments(then func()) {
	var moving []*partition
	for _, p := range c.allPartitions() {
		if p.reassigning() {
			moving = append(moving, p)
			c.log.Info("Resuming reassignment", "partition", p.tp().String(), "replicas", []int32(p.replicas),
				"adding", p.adding, "removing", p.removing, "isr", p.rec.State.ISR)
		}
	}
	c.maybeCompleteReassignments(moving, then)
}

// writeReassignStep writes a partition's new replica set and state in one
// fenced transaction (effWriteAssignment) and applies them to the model,
// then calls then. A refusal (the keys changed behind the controller)
// reloads the topic first; a failed or fenced write ends the term. then
// gets the write's error.
func (c *core) writeReassignStep(p *partition, r election.Reassignment, d election.Decision, then func(error)) {
	what := "reassign " + p.tp().String()
	u := metastore.AssignmentUpdate{
		Topic: p.t.name, ModRevision: p.t.modRev, Assignment: p.t.assignmentWith(p.id, r),
		States: []metastore.PartitionUpdate{{Current: p.rec, Next: metastore.PartitionState{
			Leader: d.State.Leader, LeaderEpoch: d.State.LeaderEpoch, ISR: d.State.ISR}}},
	}
	c.await(effWriteAssignment{what: what, update: u}, what, func(ev event) {
		res := ev.(evAssignmentResult)
		if res.err != nil {
			if c.refusedOrFatal(what, res.err, res.resigning) {
				then(res.err)
				return
			}
			c.refreshTopic(p.t, func() { then(res.err) })
			return
		}
		old := p.rec.State
		p.t.modRev = res.res.ModRevision
		p.rec = res.res.States[0]
		p.replicas, p.adding, p.removing = slices.Clone(r.Replicas), slices.Clone(r.Adding), slices.Clone(r.Removing)
		c.stateDirty = true
		if p.rec.State.Leader != old.Leader {
			c.record(change{p: p, d: d, cause: causeReassign}, old)
		}
		then(nil)
	})
}

// refreshTopic re-reads a topic whose keys changed under the controller
// (effReadTopic), then calls then.
func (c *core) refreshTopic(t *topic, then func()) {
	c.await(effReadTopic{name: t.name}, "read topic "+t.name, func(ev event) {
		rd := ev.(evTopicRead)
		if rd.err != nil {
			c.log.Warn("cannot re-read topic after a conflict", "topic", t.name, "err", rd.err)
			then()
			return
		}
		fresh := newTopic(rd.topic)
		t.modRev, t.config = fresh.modRev, fresh.config
		for _, np := range fresh.parts {
			np.t = t
		}
		t.parts = fresh.parts
		c.stateDirty = true
		then()
	})
}

// ListPartitionReassignments lists the reassignments in flight.
func (a *Active) ListPartitionReassignments(ctx context.Context, req *adminv1.ListPartitionReassignmentsRequest) (*adminv1.ListPartitionReassignmentsResponse, error) {
	var resp *adminv1.ListPartitionReassignmentsResponse
	err := a.call(ctx, func() (err error) { resp, err = a.listReassignments(req); return err })
	if err != nil {
		return nil, err
	}
	return resp, nil
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
