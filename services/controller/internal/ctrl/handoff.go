package ctrl

import (
	"maps"
	"slices"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/controller/internal/sender"
	"tidemark.io/services/platform/kerr"
)

// Voluntary leadership moves (DESIGN.md, "Voluntary moves"). A preferred
// election (asked for or the auto rebalance's), a controlled shutdown and
// a reassignment step that removes the leader move leadership away from a
// leader that may be live but cut off from the controllers: it would hear
// of the election late and take acks=1 writes meanwhile, beside the new
// leader, until its lease fence went up. So the controller first asks the
// leader to yield (YieldLeadership: it stops taking writes at its current
// state, and answers once the next leader has every record it took) and
// writes the election only once it has; a leader that does not answer
// within the request timeout keeps its partitions, and its lease decides,
// as for any leader cut off from etcd.

// decider re-decides a move from the partition's current state and the
// brokers as they are when the leader has yielded.
type decider func(p *partition) (election.Decision, error)

// handoff is one leader's part of a voluntary decision: the moves away
// from it and the states it was asked to yield at.
type handoff struct {
	id      uint64
	from    int32
	changes []change
	states  []stateAt
	batch   *handoffBatch
}

// stateAt is a partition state by its epochs.
type stateAt struct{ leaderEpoch, partitionEpoch int32 }

func stateOf(p *partition) stateAt {
	return stateAt{p.rec.State.LeaderEpoch, p.rec.State.PartitionEpoch}
}

// yieldedAt is who yielded a partition, and at which state.
type yieldedAt struct {
	from int32
	at   stateAt
}

// handoffBatch gathers a decision's handoffs; then runs once every leader
// answered (or none had to).
type handoffBatch struct {
	pending int
	decide  decider
	ready   []change
	// decidedAt is the state each ready move was decided from.
	decidedAt map[*partition]stateAt
	failed    map[election.TopicPartition]error
	// yielded are the moves whose leader yielded, by partition: the leader
	// and the state; those not written in the end are resumed
	// (commitHandoff).
	yielded map[*partition]yieldedAt
	then    func(ready []change, failed map[election.TopicPartition]error)
}

// handOff asks the live leaders that changes move leadership away from to
// yield, grouped by leader (effYield), and calls then with the moves ready
// to write and the error of each given up. Moves with no live leader to
// stop, or that keep their leader, are ready at once.
func (c *core) handOff(changes []change, decide decider, then func(ready []change, failed map[election.TopicPartition]error)) *handoffBatch {
	order := make(map[*partition]int, len(changes))
	for i, ch := range changes {
		order[ch.p] = i
	}
	// The moves are written in the order decided, whichever leader answers
	// first.
	inOrder := func(ready []change, failed map[election.TopicPartition]error) {
		slices.SortFunc(ready, func(x, y change) int { return order[x.p] - order[y.p] })
		then(ready, failed)
	}
	b := &handoffBatch{decide: decide, decidedAt: map[*partition]stateAt{}, failed: map[election.TopicPartition]error{},
		yielded: map[*partition]yieldedAt{}, then: inOrder}
	byLeader := map[int32][]change{}
	for _, ch := range changes {
		from := ch.p.rec.State.Leader
		if from < 0 || from == ch.d.State.Leader || !c.registered(from) {
			b.ready = append(b.ready, ch)
			b.decidedAt[ch.p] = stateOf(ch.p)
			continue
		}
		byLeader[from] = append(byLeader[from], ch)
	}
	for _, from := range slices.Sorted(maps.Keys(byLeader)) {
		c.handoffSeq++
		h := &handoff{id: c.handoffSeq, from: from, changes: byLeader[from], batch: b}
		for _, ch := range h.changes {
			h.states = append(h.states, stateOf(ch.p))
		}
		c.handoffs[h.id] = h
		b.pending++
		c.emit(effYield{to: from, id: h.id, req: c.yieldRequest(from, h.changes, h.states, false)})
	}
	if b.pending == 0 {
		c.finishHandoff(b)
	}
	return b
}

// yielded takes a leader's YieldLeadership outcome. Each move whose
// partition is still at the state the leader yielded at is decided again
// (the brokers may have changed meanwhile); a move that no longer stands
// is given up and the leader asked to resume it.
func (c *core) yielded(id uint64, err error) {
	h := c.handoffs[id]
	if h == nil {
		return
	}
	delete(c.handoffs, id)
	b := h.batch
	b.pending--
	var resume []change
	var resumeAt []stateAt
	if err != nil {
		c.log.Warn("Leader did not yield: leaving its partitions where they are (its lease decides if it is cut off)",
			"broker_id", h.from, "partitions", len(h.changes), "err", err)
		e := kerr.As(err)
		if e == nil {
			e = kerr.New(kerr.RequestTimedOut, "%v", err)
		}
		for _, ch := range h.changes {
			b.failed[ch.p.tp()] = kerr.New(e.Code, "the leader, broker %d, did not yield %s: %s", h.from, ch.p.tp(), e.Message)
		}
		resume, resumeAt = h.changes, h.states
	} else {
		for i, ch := range h.changes {
			p := ch.p
			if c.lookup(p.t.name, p.id) != p || p.t.deleting || stateOf(p) != h.states[i] {
				b.failed[p.tp()] = kerr.New(kerr.PreferredLeaderNotAvailable,
					"%s changed while broker %d yielded it (now leader %d, leader epoch %d); not moved", p.tp(), h.from,
					p.rec.State.Leader, p.rec.State.LeaderEpoch)
				continue // its new state was pushed: the yield is void
			}
			d, derr := b.decide(p)
			if derr != nil || d.State.Leader != ch.d.State.Leader {
				if derr == nil {
					derr = kerr.New(kerr.PreferredLeaderNotAvailable, "%s: broker %d is no longer the one to lead", p.tp(), ch.d.State.Leader)
				}
				b.failed[p.tp()] = derr
				resume, resumeAt = append(resume, ch), append(resumeAt, h.states[i])
				continue
			}
			b.yielded[p] = yieldedAt{from: h.from, at: h.states[i]}
			b.ready = append(b.ready, change{p: p, d: d, cause: ch.cause})
			b.decidedAt[p] = h.states[i]
		}
	}
	c.resumeLeader(h.from, resume, resumeAt)
	if b.pending == 0 {
		c.finishHandoff(b)
	}
}

// finishHandoff hands the moves ready to the batch's then, each decided
// from the partition as it is now. The leaders' answers come steps apart,
// and other decisions run between them: a decision written over a state it
// was not made from would undo what came between (the commit names the
// current record, so etcd cannot refuse it), and could give a leader epoch
// to two leaders. A move decided from an older state is decided again if
// the new decision needs no yield (it moves no leadership off a live
// leader); a yielded one, or one that now needs a yield, is given up.
func (c *core) finishHandoff(b *handoffBatch) {
	ready := make([]change, 0, len(b.ready))
	for _, ch := range b.ready {
		p := ch.p
		current := c.lookup(p.t.name, p.id) == p && !p.t.deleting
		if current && stateOf(p) == b.decidedAt[p] {
			ready = append(ready, ch)
			continue
		}
		if _, yielded := b.yielded[p]; current && !yielded {
			switch d, err := b.decide(p); {
			case err != nil:
				b.failed[p.tp()] = err
			case !d.Changed:
			case c.movesLeaderOff(p, d):
				b.failed[p.tp()] = kerr.New(kerr.PreferredLeaderNotAvailable,
					"%s changed while the decision waited for other leaders to yield; not moved", p.tp())
			default:
				ready = append(ready, change{p: p, d: d, cause: ch.cause})
			}
			continue
		}
		b.failed[p.tp()] = kerr.New(kerr.PreferredLeaderNotAvailable,
			"%s changed after its leader yielded (now leader %d, leader epoch %d); not moved", p.tp(),
			p.rec.State.Leader, p.rec.State.LeaderEpoch)
	}
	b.then(ready, b.failed)
}

// commitHandoff is handOff, then commit of the moves ready. A leader that
// yielded a move that was not written in the end (a conflicting write) is
// asked to resume it. then gets what commit gives and the moves given up.
func (c *core) commitHandoff(changes []change, decide decider, then func(written []*partition, failed map[election.TopicPartition]error, err error)) {
	var b *handoffBatch
	b = c.handOff(changes, decide, func(ready []change, failed map[election.TopicPartition]error) {
		c.commit(ready, func(written []*partition, err error) {
			if err == nil && b != nil {
				for _, p := range written {
					delete(b.yielded, p)
				}
				byLeader := map[int32][]*partition{}
				for p, y := range b.yielded {
					byLeader[y.from] = append(byLeader[y.from], p)
				}
				for _, from := range slices.Sorted(maps.Keys(byLeader)) {
					parts := byLeader[from]
					sortPartitions(parts)
					changes, states := make([]change, len(parts)), make([]stateAt, len(parts))
					for i, p := range parts {
						changes[i], states[i] = change{p: p}, b.yielded[p].at
					}
					c.resumeLeader(from, changes, states)
				}
			}
			then(written, failed, err)
		})
	})
}

// resumeLeader tells a leader to take writes again for the partitions of
// changes it yielded at states (or may yet yield: the request queues behind
// the yield).
func (c *core) resumeLeader(from int32, changes []change, states []stateAt) {
	if len(changes) == 0 || !c.registered(from) {
		return
	}
	c.emit(effPush{to: from, req: sender.Request{YieldLeadership: c.yieldRequest(from, changes, states, true)}})
}

func (c *core) yieldRequest(to int32, changes []change, states []stateAt, resume bool) *controlv1.YieldLeadershipRequest {
	req := &controlv1.YieldLeadershipRequest{ControllerId: c.self.Id, ControllerEpoch: c.epoch,
		BrokerEpoch: c.brokers[to].info.Epoch, Resume: resume}
	for i, ch := range changes {
		yp := &controlv1.YieldPartition{Topic: ch.p.t.name, Partition: ch.p.id,
			LeaderEpoch: states[i].leaderEpoch, PartitionEpoch: states[i].partitionEpoch}
		if !resume {
			yp.NextLeader = ch.d.State.Leader
		}
		req.Partitions = append(req.Partitions, yp)
	}
	return req
}
