package replica

import (
	"fmt"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/platform/kerr"
)

// yieldMark is a leader's promise to the controller (YieldLeadership): it
// takes no writes for the partition while the partition is at the state
// named (or at an older partition epoch of the same leader epoch: an ISR
// change the controller committed whose answer has not reached this
// leader yet). A newer state ends it by itself (the controller moved the
// leadership, or changed the ISR and gave the move up), as do a newer
// controller's LeaderAndIsr (it may never hear of the move) and a resume.
type yieldMark struct {
	leaderEpoch, partitionEpoch int32
	controllerEpoch             int32
	// nextLeader is the broker the controller means to elect (-1: not
	// named), for the leader hint of the writes refused meanwhile.
	nextLeader int32
}

// yieldingLocked reports whether the replica promised not to take writes
// at its current state; r.mu is held.
func (r *Replica) yieldingLocked() bool {
	y := r.yielded
	return y != nil && y.leaderEpoch == r.state.LeaderEpoch() && r.state.PartitionEpoch() <= y.partitionEpoch
}

// YieldLeadership is the first step of a voluntary leadership move: the
// named partitions stop taking writes here until a newer state (or a newer
// controller, or a resume) says otherwise. The controller elects the new
// leader only after this answer, so the two never take writes at once,
// even when this broker is cut off from the controller and would hear of
// the election late (DESIGN.md, "Voluntary moves").
//
// It answers NONE for a partition this broker does not lead at the named
// leader epoch (it takes no writes for it there), and FENCED_LEADER_EPOCH
// when it leads at another leader epoch, or at a newer partition epoch:
// the controller then leaves it where it is.
func (m *Manager) YieldLeadership(req *controlv1.YieldLeadershipRequest) (*controlv1.YieldLeadershipResponse, error) {
	if err := m.checkControlRequest(req.GetControllerEpoch(), req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	m.noteAdmitted("YieldLeadership")
	resp := &controlv1.YieldLeadershipResponse{}
	yielded := 0
	var catchUps []catchUp
	for _, p := range req.GetPartitions() {
		tp := TP{Topic: p.GetTopic(), Partition: p.GetPartition()}
		res := &controlv1.PartitionResult{Topic: tp.Topic, Partition: tp.Partition}
		resp.Partitions = append(resp.Partitions, res)
		r, ok := m.Replica(tp)
		if !ok {
			continue
		}
		r.mu.Lock()
		if err := m.succeededController(req.GetControllerEpoch()); err != nil {
			// Checked under r.mu: a newer controller's LeaderAndIsr admits
			// its epoch before it ends older yields under this lock, so a
			// mark set here is one it ends. Set after it, the mark stood
			// until the partition's state changed (an idle partition's:
			// never), and an older resume would end the newer one's yield.
			e := kerr.As(err)
			res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(e.Code), e.Error()
			r.mu.Unlock()
			continue
		}
		leads := r.state.IsLeader()
		le, pe := r.state.LeaderEpoch(), r.state.PartitionEpoch()
		atState := le == p.GetLeaderEpoch() && pe <= p.GetPartitionEpoch()
		switch {
		case req.GetResume():
			if y := r.yielded; y != nil && y.leaderEpoch == p.GetLeaderEpoch() && y.partitionEpoch == p.GetPartitionEpoch() {
				r.yielded = nil
			}
		case atState && leads:
			y := &yieldMark{leaderEpoch: le, partitionEpoch: p.GetPartitionEpoch(), controllerEpoch: req.GetControllerEpoch(), nextLeader: -1}
			yielded++
			if next := p.GetNextLeader(); next != m.opts.BrokerID {
				y.nextLeader = next
				catchUps = append(catchUps, catchUp{r: r, next: next})
			}
			r.yielded = y
		case leads:
			e := kerr.New(kerr.FencedLeaderEpoch, "broker %d leads %s at leader epoch %d partition epoch %d, not %d/%d",
				m.opts.BrokerID, tpKey(tp), le, pe, p.GetLeaderEpoch(), p.GetPartitionEpoch())
			res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(e.Code), e.Error()
		}
		r.mu.Unlock()
	}
	if req.GetResume() {
		m.log.Info("Taking writes again: the controller gave the leadership move up", "partitions", len(req.GetPartitions()),
			"controller_epoch", req.GetControllerEpoch())
		return resp, nil
	}
	start := m.now()
	behind := m.awaitCatchUp(catchUps, time.Duration(req.GetCatchUpTimeoutMs())*time.Millisecond)
	m.log.Info("Yielded leadership: no writes taken until the controller's next word", "partitions", yielded,
		"asked", len(req.GetPartitions()), "controller_epoch", req.GetControllerEpoch(),
		"catch_up_ms", m.now().Sub(start).Milliseconds(), "next_leaders_behind", behind)
	return resp, nil
}

// catchUp is a yielded partition and the broker meant to lead it next.
type catchUp struct {
	r    *Replica
	next int32
}

// awaitCatchUp waits, at most timeout, until each next leader's log (as its
// fetch offset tells this leader) reaches this leader's end, so that the
// election loses no record this leader acknowledged, acks=1 included. The
// yielded leader appends nothing more, and a follower in sync is at most a
// round trip behind, so this is one fetch round trip. It returns the
// partitions whose next leader was still behind, for the log: the move
// goes on without them, as in Kafka.
func (m *Manager) awaitCatchUp(waits []catchUp, timeout time.Duration) []string {
	if len(waits) == 0 || timeout <= 0 {
		return nil
	}
	w := newWaiter()
	defer releaseWaiter(w)
	for _, c := range waits {
		c.r.hwWaiters.add(w) // leaderfetch pokes them while yielded
		defer c.r.hwWaiters.remove(w)
	}
	timer := m.clock.NewTimer(timeout)
	defer timer.Stop()
	for {
		var behind []string
		for _, c := range waits {
			c.r.mu.Lock()
			leo := c.r.log.LogEndOffset()
			at, ok := c.r.state.FollowerLEO(c.next)
			still := c.r.yieldingLocked()
			c.r.mu.Unlock()
			if still && (!ok || at < leo) {
				behind = append(behind, fmt.Sprintf("%s: broker %d at %d of %d", tpKey(c.r.tp), c.next, at, leo))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-w.ch:
		case <-timer.C():
			return behind
		case <-m.stop:
			return behind
		}
	}
}

// endYieldsOfOlderControllers drops the yield marks of the partitions in a
// LeaderAndIsr from a newer controller: that controller decides from etcd
// and may never finish (or know of) the move the old one began.
func (m *Manager) endYieldsOfOlderControllers(controllerEpoch int32, states []*commonv1.PartitionState) {
	for _, ps := range states {
		r, ok := m.Replica(TP{Topic: ps.GetTopic(), Partition: ps.GetPartition()})
		if !ok {
			continue
		}
		r.mu.Lock()
		if y := r.yielded; y != nil && y.controllerEpoch < controllerEpoch {
			r.yielded = nil
		}
		r.mu.Unlock()
	}
}

// errYielding is the produce answer of a partition whose leadership is
// moving: retriable, and naming where the writes go next. Once this
// broker's metadata holds the election (a newer leader epoch: its
// LeaderAndIsr is being applied, or its UpdateMetadata came first), that
// leader and epoch, so a KIP-951 client, which takes only a newer epoch,
// goes there at once. Before, the broker the controller means to elect, at
// the current epoch: tidemark's client takes a hint at the epoch it has and
// finds that broker leading as soon as it is elected, while a client
// taking only newer epochs refreshes its metadata as before. The epoch
// that broker will lead at is not named before the controller writes it:
// the move may be given up, and a client holding the newer epoch would
// ignore every answer naming this leader at its own epoch.
func (m *Manager) errYielding(tp TP, y yieldMark) error {
	e := kerr.New(kerr.NotLeaderOrFollower,
		"broker %d is handing the leadership of %s over (leader epoch %d): the controller is electing another leader",
		m.opts.BrokerID, tpKey(tp), y.leaderEpoch)
	if h := m.opts.Meta.LeaderHint(metadata.TP(tp)); h != nil && h.LeaderEpoch > y.leaderEpoch && h.ID != m.opts.BrokerID {
		e.Leader = h
		return e
	}
	if b, ok := m.opts.Meta.Broker(y.nextLeader); y.nextLeader >= 0 && ok {
		e.Leader = &kerr.LeaderHint{ID: y.nextLeader, Address: b.Address, LeaderEpoch: y.leaderEpoch}
	}
	return e
}
