package ctrl

import (
	"fmt"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// onBrokerEvents handles registrations and departures in the order etcd
// reports them.
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
			a.brokerDeparted(ev.BrokerID, epoch, "registration gone (lease expired or revoked)")
			continue
		}
		if ev.Broker != nil {
			a.brokerRegistered(*ev.Broker)
		}
	}
}

// brokerRegistered is Kafka's onBrokerStartup: the new incarnation gets the
// whole metadata and LeaderAndIsr for every replica it hosts (KIP-380: it is
// told its role again), partitions without a live leader get an election,
// and everyone else learns of the broker and of the elections.
func (a *Active) brokerRegistered(info metastore.Broker) {
	if cur := a.brokers[info.ID]; cur != nil {
		if cur.info.Epoch == info.Epoch {
			return
		}
		// A bounce whose departure we did not see: handle it first.
		a.brokerDeparted(info.ID, cur.info.Epoch, "replaced by a newer registration")
		if a.stopping() {
			return
		}
	}
	if info.Epoch <= a.departedEpoch[info.ID] {
		return // an old event
	}
	a.addBroker(info)
	delete(a.offlineDirs, info.ID) // a new incarnation reports its own
	if fc := a.failing[info.ID]; fc != nil {
		fc.stopTimer()
		delete(a.failing, info.ID)
	}
	a.log.Info("Broker registered", "broker_id", info.ID, "broker_epoch", info.Epoch,
		"address", info.Address, "rack", info.Rack, "live_brokers", a.sortedBrokerIDs())
	a.event(controlv1.EventKind_EVENT_KIND_BROKER_UP, func(ev *controlv1.ClusterEvent) {
		ev.NodeId = info.ID
		ev.Reason = fmt.Sprintf("broker %d registered with epoch %d at %s", info.ID, info.Epoch, info.Address)
	})
	if err := a.initNewPartitions(); err != nil {
		return
	}
	view := a.view()
	var changes []change
	for _, p := range a.allPartitions() {
		if !a.offline(p) {
			continue
		}
		if d := election.OnBrokerReturn(p.view(), a.viewFor(p, view), a.allowUnclean(p.t)); d.Changed {
			changes = append(changes, change{p: p, d: d, cause: causeOffline})
		}
	}
	written, err := a.commit(changes)
	if err != nil {
		return
	}
	a.pushUpdateMetadata(nil, nil, true, only(info.ID))
	a.pushLeaderAndIsr(a.partitionsOf(info.ID), only(info.ID))
	a.pushLeaderAndIsr(written, except(info.ID))
	a.pushUpdateMetadata(written, nil, false, except(info.ID))
}

// brokerDeparted is Kafka's onBrokerFailure for one incarnation: for every
// partition it led the first live ISR member in assignment order takes over
// (or, with unclean election allowed and no live ISR member, the first live
// replica), dead replicas leave the ISRs without emptying them, and the new
// states go to the remaining replicas and to every live broker (F19, F20),
// the elections before the ISR removals.
func (a *Active) brokerDeparted(id int32, epoch int64, why string) {
	b := a.brokers[id]
	if b == nil || (epoch != 0 && b.info.Epoch != epoch) {
		return
	}
	a.removeBroker(b)
	delete(a.offlineDirs, id)
	if fc := a.failing[id]; fc != nil {
		fc.stopTimer()
		delete(a.failing, id)
	}
	a.log.Warn("Broker failure", "broker_id", id, "broker_epoch", b.info.Epoch, "reason", why,
		"live_brokers", a.sortedBrokerIDs())
	a.event(controlv1.EventKind_EVENT_KIND_BROKER_DOWN, func(ev *controlv1.ClusterEvent) {
		ev.NodeId = id
		ev.Reason = fmt.Sprintf("broker %d (epoch %d): %s", id, b.info.Epoch, why)
	})
	view := a.view()
	// Kafka's onReplicasBecomeOffline in two steps, each written then
	// pushed: first the partitions it led (new leaders, or offline), then
	// those where it only leaves the ISR. The first are unavailable until
	// their new leaders act, so their LeaderAndIsr and UpdateMetadata must
	// not queue behind the many ISR shrinks, each a new leader epoch the
	// leader records with fsyncs.
	var elections, shrinks []change
	for _, p := range a.partitionsOf(id) {
		s := p.rec.State
		if s.Leader != id && !p.state().InISR(id) {
			continue
		}
		d := election.OnBrokerFailure(p.view(), a.viewFor(p, view), a.allowUnclean(p.t))
		switch {
		case !d.Changed:
		case d.State.Leader != s.Leader:
			elections = append(elections, change{p: p, d: d, cause: causeOffline})
		default:
			shrinks = append(shrinks, change{p: p, d: d, cause: causeOffline})
		}
	}
	pushed := 0
	for _, changes := range [][]change{elections, shrinks} {
		written, err := a.commit(changes)
		if err != nil {
			return
		}
		a.pushChanges(written)
		pushed += len(written)
	}
	if pushed == 0 {
		// Nobody's partitions changed, but every broker must learn that
		// this one is gone.
		a.pushUpdateMetadata(nil, nil, false, nil)
	}
}
