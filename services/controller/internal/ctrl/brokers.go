package ctrl

import (
	"fmt"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// onBrokerEvents handles registrations and departures in the order etcd
// reports them, each as one core event.
func (a *Active) onBrokerEvents(wr metastore.WatchResponse) {
	for _, ev := range wr.Events {
		if a.stopping() {
			return
		}
		if ev.Kind != metastore.KindBroker {
			continue
		}
		if ev.Type == metastore.EventDelete {
			var epoch int64
			if ev.Broker != nil {
				epoch = ev.Broker.Epoch
			}
			a.step(evBrokerDeparted{id: ev.BrokerID, epoch: epoch, why: "registration gone (lease expired or revoked)"})
			continue
		}
		if ev.Broker != nil {
			a.step(evBrokerRegistered{info: *ev.Broker})
		}
	}
}

// allowUnclean is unclean.leader.election.enable for t, false without a
// policy.
func (c *core) allowUnclean(t *topic) bool {
	return c.pol.unclean != nil && c.pol.unclean(t)
}

// brokerRegistered is Kafka's onBrokerStartup: the new incarnation gets the
// whole metadata and one full LeaderAndIsr of every replica it hosts
// (KIP-380: it is told its role again), partitions without a live leader
// get an election, and everyone else learns of the broker and of the
// elections.
func (c *core) brokerRegistered(info metastore.Broker) {
	if cur := c.brokers[info.ID]; cur != nil {
		if cur.info.Epoch == info.Epoch {
			return
		}
		if info.Epoch < cur.info.Epoch {
			// An older incarnation's registration (epochs are etcd create
			// revisions, so it cannot be a restart): taking it for a
			// bounce would declare the live broker dead.
			c.log.Warn("ignoring an older registration", "broker_id", info.ID,
				"broker_epoch", info.Epoch, "current_epoch", cur.info.Epoch)
			return
		}
		// A bounce whose departure we did not see: handle it first.
		c.brokerDeparted(info.ID, cur.info.Epoch, "replaced by a newer registration", func() {
			if !c.stopping() {
				c.brokerStarted(info)
			}
		})
		return
	}
	c.brokerStarted(info)
}

// returnElections are the elections the live brokers allow for offline
// partitions (a broker's return: F19's reverse).
func (c *core) returnElections() []change {
	view := c.view()
	var changes []change
	for _, p := range c.allPartitions() {
		if !c.offline(p) {
			continue
		}
		if d := election.OnBrokerReturn(p.view(), c.viewFor(p, view), c.allowUnclean(p.t)); d.Changed {
			changes = append(changes, change{p: p, d: d, cause: causeOffline})
		}
	}
	return changes
}

func (c *core) brokerStarted(info metastore.Broker) {
	if info.Epoch <= c.departedEpoch[info.ID] {
		return // an old event
	}
	c.addBroker(info)
	delete(c.offlineDirs, info.ID) // a new incarnation reports its own
	if closed, ok := c.closedAhead[info.ID]; ok && closed <= info.Epoch {
		delete(c.closedAhead, info.ID)
		if closed == info.Epoch && c.sessions[info.ID] == nil {
			c.armFailCheck(c.brokers[info.ID], "Broker registered after its session broke; declaring it dead unless it reconnects or answers a health check", nil)
		}
	}
	c.log.Info("Broker registered", "broker_id", info.ID, "broker_epoch", info.Epoch,
		"address", info.Address, "rack", info.Rack, "live_brokers", c.sortedBrokerIDs())
	c.emitEvent(controlv1.EventKind_EVENT_KIND_BROKER_UP, func(ev *controlv1.ClusterEvent) {
		ev.NodeId = info.ID
		ev.Reason = fmt.Sprintf("broker %d registered with epoch %d at %s", info.ID, info.Epoch, info.Address)
	})
	c.initNewPartitions(func(err error) {
		if err != nil {
			return
		}
		c.commit(c.returnElections(), func(written []*partition, err error) {
			if err != nil {
				return
			}
			c.pushUpdateMetadata(nil, nil, true, only(info.ID))
			c.pushRoles(info.ID)
			c.pushLeaderAndIsr(written, except(info.ID))
			c.pushUpdateMetadata(written, nil, false, except(info.ID))
		})
	})
}

// brokerDeparted is Kafka's onBrokerFailure for one incarnation: for every
// partition it led the first live ISR member in assignment order takes over
// (or, with unclean election allowed and no live ISR member, the first live
// replica), dead replicas leave the ISRs without emptying them, and the new
// states go to the remaining replicas and to every live broker (F19, F20),
// the elections before the ISR removals. then, if not nil, runs once that is
// written and pushed.
func (c *core) brokerDeparted(id int32, epoch int64, why string, then func()) {
	if then == nil {
		then = func() {}
	}
	b := c.brokers[id]
	if b == nil || (epoch != 0 && b.info.Epoch != epoch) {
		then()
		return
	}
	c.removeBroker(b)
	delete(c.offlineDirs, id)
	c.log.Warn("Broker failure", "broker_id", id, "broker_epoch", b.info.Epoch, "reason", why,
		"live_brokers", c.sortedBrokerIDs())
	c.emitEvent(controlv1.EventKind_EVENT_KIND_BROKER_DOWN, func(ev *controlv1.ClusterEvent) {
		ev.NodeId = id
		ev.Reason = fmt.Sprintf("broker %d (epoch %d): %s", id, b.info.Epoch, why)
	})
	view := c.view()
	// Kafka's onReplicasBecomeOffline in two steps, each written then
	// pushed: first the partitions it led (new leaders, or offline), then
	// those where it only leaves the ISR. The first are unavailable until
	// their new leaders act, so their LeaderAndIsr and UpdateMetadata must
	// not queue behind the many ISR shrinks, each a new leader epoch the
	// leader records with fsyncs.
	var elections, shrinks []change
	for _, p := range c.partitionsOf(id) {
		s := p.rec.State
		if s.Leader != id && !p.state().InISR(id) {
			continue
		}
		d := election.OnBrokerFailure(p.view(), c.viewFor(p, view), c.allowUnclean(p.t))
		switch {
		case !d.Changed:
		case d.State.Leader != s.Leader:
			elections = append(elections, change{p: p, d: d, cause: causeOffline})
		default:
			shrinks = append(shrinks, change{p: p, d: d, cause: causeOffline})
		}
	}
	c.commit(elections, func(elected []*partition, err error) {
		if err != nil {
			then()
			return
		}
		c.pushChanges(elected)
		c.commit(shrinks, func(shrunk []*partition, err error) {
			if err != nil {
				then()
				return
			}
			c.pushChanges(shrunk)
			if len(elected)+len(shrunk) == 0 {
				// Nobody's partitions changed, but every broker must learn
				// that this one is gone.
				c.pushUpdateMetadata(nil, nil, false, nil)
			}
			then()
		})
	})
}
