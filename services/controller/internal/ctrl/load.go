package ctrl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// load is Kafka's onControllerFailover: read the cluster, start the
// watches and senders, initialise partitions that have no state, elect
// leaders where the recorded leader is gone, push everything to every live
// broker, resume deletions and arm the rebalance timer.
func (a *Active) load() error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(a.ctx, 2*a.d.Settings.RequestTimeout)
	defer cancel()
	id, err := a.d.Store.EnsureClusterID(ctx)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	cl, err := a.d.Store.LoadCluster(ctx)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if cl.ControllerEpoch != a.epoch {
		return fmt.Errorf("load: controller epoch is %d in etcd, this term won %d: another controller was elected", cl.ControllerEpoch, a.epoch)
	}
	a.loaded.Store(true) // active_controller_count
	a.d.Metrics.epoch.Set(float64(a.epoch))
	a.controllers = cl.Controllers
	a.brokerConfigs = cl.BrokerConfigs
	a.users = cl.Users
	// Watch events queue behind the load.
	a.watch("brokers", a.d.Store.WatchBrokers(a.ctx, cl.Revision+1), a.onBrokerEvents)
	a.watch("configs", a.d.Store.WatchConfigs(a.ctx, cl.Revision+1), a.onConfigEvents)
	a.watch("controllers", a.d.Store.WatchControllers(a.ctx, cl.Revision+1), a.onControllerNodeEvents)

	a.log.Info("Controller elected: loaded the cluster from etcd", "controller_id", a.self.Id,
		"epoch_revision", a.sess.EpochRevision(), "brokers", len(cl.Brokers), "topics", len(cl.Topics),
		"took", time.Since(start).Round(time.Millisecond))
	err = errNoOutcome
	a.step(evLoaded{clusterID: id, brokers: cl.Brokers, topics: cl.Topics, reply: func(_ any, e error) { err = e }})
	if err != nil {
		return nil // the term is ending (fail was called)
	}
	var acks []<-chan error
	for _, id := range slices.Sorted(maps.Keys(a.tracked)) {
		acks = append(acks, a.tracked[id]...)
	}
	a.awaitPushed(acks)
	for _, t := range a.sortedTopics() {
		if t.deleting {
			a.startDeletion(t)
		}
	}
	a.resumeReassignments()
	a.armFirstRebalance()
	a.stateDirty = true
	return nil
}

// loaded is the core's part of the load: the cluster as read, partitions
// without a state initialised, the elections the cluster needs, and the
// full state pushed to every live broker (tracked: the failover time is
// measured to their acknowledgements).
func (c *core) loaded(ev evLoaded) {
	c.clusterID = ev.clusterID
	for _, id := range slices.Sorted(maps.Keys(ev.brokers)) {
		c.addBroker(ev.brokers[id])
	}
	for name, mt := range ev.topics {
		c.topics[name] = newTopic(mt)
	}
	c.emitEvent(controlv1.EventKind_EVENT_KIND_CONTROLLER_CHANGE, func(e *controlv1.ClusterEvent) {
		e.Reason = fmt.Sprintf("controller %d elected with epoch %d", c.self.Id, c.epoch)
	})
	c.initNewPartitions(func(err error) {
		if err != nil {
			c.answer(ev.reply, nil, err)
			return
		}
		// Partitions whose leader or ISR members died while no controller
		// was active: Kafka's partition and replica state machines' startup.
		// A member that restarted in that gap (registered again after the
		// state was written) is handled as a departure and a return, as a
		// bounce seen by an active controller is: it may have come back
		// without what it had (a machine's crash loses unflushed writes),
		// so it leaves the leadership and the ISR to replicas that kept
		// theirs, and leads again only when nobody else is in sync.
		view := c.view()
		var changes []change
		bounced := false
		for _, p := range c.allPartitions() {
			restarted := c.restartedSinceState(p)
			if !c.needsFailureHandling(p) && len(restarted) == 0 {
				continue
			}
			pv := c.viewFor(p, view)
			if len(restarted) > 0 {
				bounced = true
				pv.Epochs = maps.Clone(pv.Epochs)
				for _, id := range restarted {
					delete(pv.Epochs, id)
				}
			}
			if d := election.OnBrokerFailure(p.view(), pv, c.allowUnclean(p.t)); d.Changed {
				changes = append(changes, change{p: p, d: d, cause: causeOffline})
			}
		}
		c.commit(changes, func(_ []*partition, err error) {
			if err != nil {
				c.answer(ev.reply, nil, err)
				return
			}
			c.electReturned(bounced, func(err error) {
				if err != nil {
					c.answer(ev.reply, nil, err)
					return
				}
				c.tracking = true
				for _, id := range c.sortedBrokerIDs() {
					c.pushUpdateMetadata(nil, nil, true, only(id))
					c.pushRoles(id)
				}
				c.tracking = false
				c.answer(ev.reply, nil, nil)
			})
		})
	})
}

// restartedSinceState lists p's leader and ISR members whose registration
// is newer than p's state: the state was written about an earlier
// incarnation (broker epochs and state revisions are both etcd revisions).
// It can miss a restart (one before the state's last write) but never
// names a broker that did not restart.
func (c *core) restartedSinceState(p *partition) []int32 {
	var out []int32
	for _, id := range p.rec.State.ISR {
		if b := c.brokers[id]; b != nil && b.info.Epoch > p.rec.ModRevision {
			out = append(out, id)
		}
	}
	if l := p.rec.State.Leader; l != election.NoLeader && !slices.Contains(out, l) {
		if b := c.brokers[l]; b != nil && b.info.Epoch > p.rec.ModRevision {
			out = append(out, l)
		}
	}
	return out
}

// electReturned runs, when some broker restarted while no controller was
// active, the elections its return allows (the offline partitions it is
// the last in-sync replica of), then calls then.
func (c *core) electReturned(bounced bool, then func(error)) {
	if !bounced {
		then(nil)
		return
	}
	c.commit(c.returnElections(), func(_ []*partition, err error) { then(err) })
}

// needsFailureHandling reports whether a partition's leader or an ISR
// member has no live registration.
func (c *core) needsFailureHandling(p *partition) bool {
	s := p.rec.State
	if s.Leader != election.NoLeader && !c.registered(s.Leader) {
		return true
	}
	for _, r := range s.ISR {
		if !c.registered(r) {
			return true
		}
	}
	return s.Leader == election.NoLeader
}

func newTopic(mt *metastore.Topic) *topic {
	t := &topic{name: mt.Name, id: mt.Assignment.TopicID, modRev: mt.ModRevision,
		config: mt.Config, deleting: mt.Deletion != nil}
	if t.deleting {
		t.done = make(chan struct{})
	}
	n := len(mt.Assignment.Partitions)
	t.parts = make([]*partition, n)
	for i := range int32(n) {
		p := &partition{t: t, id: i, replicas: slices.Clone(mt.Assignment.Partitions[i]),
			adding: slices.Clone(mt.Assignment.AddingReplicas[i]), removing: slices.Clone(mt.Assignment.RemovingReplicas[i])}
		if rec, ok := mt.Partitions[i]; ok {
			p.rec = rec
		} else {
			p.rec = metastore.PartitionRecord{Topic: mt.Name, Partition: i}
		}
		t.parts[i] = p
	}
	return t
}

// initNewPartitions writes a first state for partitions that have none (a
// topic creation cut short by a failover): the first live replica leads and
// the live replicas form the ISR. Partitions without a live replica wait for
// one to register. then gets the write's error.
func (c *core) initNewPartitions(then func(error)) {
	var parts []*partition
	for _, t := range c.sortedTopics() {
		parts = append(parts, t.parts...)
	}
	c.initStates(parts, func(written []*partition, err error) {
		if err != nil {
			then(err)
			return
		}
		c.pushChanges(written)
		then(nil)
	})
}

// initStates writes a first state for those of parts that have none and
// passes then the partitions written.
func (c *core) initStates(parts []*partition, then func([]*partition, error)) {
	var changes []change
	for _, p := range parts {
		if p.hasState() {
			continue
		}
		// As at creation: a broker shutting down neither leads nor joins.
		live := c.liveReplicas(p.replicas)
		if len(live) == 0 {
			c.log.Warn("partition has no live replica to initialise it with", "partition", p.tp().String(),
				"replicas", []int32(p.replicas))
			continue
		}
		changes = append(changes, change{p: p, cause: causeNew, d: election.Decision{
			State:   election.PartitionState{Leader: live[0], ISR: live},
			Changed: true, Reason: "new partition"}})
	}
	c.commit(changes, then)
}

// watch feeds an etcd watch into the loop. A watch that fails (compaction,
// etcd without a leader) ends the term: the next one reloads.
func (a *Active) watch(what string, ch <-chan metastore.WatchResponse, handle func(metastore.WatchResponse)) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for wr := range ch {
			if wr.Err != nil {
				err := wr.Err
				a.post(func() { a.stepDown(fmt.Errorf("%s watch failed: %w", what, err)) })
				return
			}
			if !a.post(func() { handle(wr) }) {
				return
			}
		}
		if a.ctx.Err() == nil {
			a.post(func() { a.stepDown(fmt.Errorf("%s watch ended", what)) })
		}
	}()
}

// awaitPushed waits, off the loop, for the election-time push to be
// delivered, then reports the failover time.
func (a *Active) awaitPushed(acks []<-chan error) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		timeout := time.NewTimer(2 * a.d.Settings.RequestTimeout)
		defer timeout.Stop()
		complete := true
	wait:
		for _, ch := range acks {
			select {
			case <-ch:
			case <-timeout.C:
				complete = false
				break wait
			case <-a.quit:
				return
			}
		}
		at := time.Now()
		a.post(func() { a.onPushed(at, complete, len(acks)) })
	}()
}

func (a *Active) onPushed(at time.Time, complete bool, requests int) {
	attrs := []any{"since_election", at.Sub(a.electedAt).Round(time.Millisecond), "requests", requests,
		"all_delivered", complete}
	if lost := a.lostAt(); !lost.IsZero() {
		d := at.Sub(lost)
		a.failover.Store(int64(d))
		a.d.Metrics.failover.Set(d.Seconds())
		attrs = append(attrs, "failover", d.Round(time.Millisecond))
	}
	a.log.Info("Controller failover complete: state pushed to the live brokers", attrs...)
	a.traceFailover(at, complete, requests)
	close(a.pushed)
}

// lostAt is when the previous controller went, if known and before this
// term was won.
func (a *Active) lostAt() time.Time {
	if a.d.LostAt == nil {
		return time.Time{}
	}
	if t := a.d.LostAt(); t.Before(a.electedAt) {
		return t
	}
	return time.Time{}
}

// onControllerNodeEvents keeps the list of controller processes.
func (a *Active) onControllerNodeEvents(wr metastore.WatchResponse) {
	for _, ev := range wr.Events {
		if ev.Kind != metastore.KindControllerNode {
			continue
		}
		if ev.Type == metastore.EventDelete {
			delete(a.controllers, ev.BrokerID)
		} else if ev.ControllerNode != nil {
			a.controllers[ev.BrokerID] = *ev.ControllerNode
		}
		a.viewDirty = true
	}
}
