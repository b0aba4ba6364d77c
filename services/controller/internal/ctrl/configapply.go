package ctrl

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strconv"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/scram"
)

// applyTopicConfig makes a topic's new overrides, changed behind the
// controller, effective (a core event).
func (a *Active) applyTopicConfig(t *topic, cfg map[string]string) {
	a.step(evTopicConfig{topic: t.name, cfg: cfg})
}

// applyBrokerConfig makes a broker entity's new dynamic configs, changed
// behind the controller, effective (a core event).
func (a *Active) applyBrokerConfig(entity string, cfg map[string]string) {
	a.step(evBrokerConfig{entity: entity, cfg: cfg})
}

// topicConfigChanged makes a topic's new overrides effective: every live
// broker gets them, and offline partitions get the elections unclean
// election may now allow; then runs once they are written.
func (c *core) topicConfigChanged(name string, cfg map[string]string, then func()) {
	t := c.topics[name]
	if t == nil {
		then()
		return
	}
	old := t.config
	if len(cfg) == 0 {
		cfg = nil
	}
	t.config = cfg
	c.log.Info("Topic config changed", "topic", t.name, "from", old, "to", cfg)
	c.emitEvent(controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED, func(ev *controlv1.ClusterEvent) {
		ev.Topic = t.name
		ev.Reason = fmt.Sprintf("topic %s config now %v", t.name, cfg)
	})
	c.pushUpdateMetadata(t.parts, nil, false, nil)
	c.electOfflineAfterConfigChange(t.parts, then)
}

// brokerConfigChanged makes a broker entity's new dynamic configs
// effective: every live broker gets a full UpdateMetadata (topic defaults
// may have changed), the rebalance timer is re-armed if its interval
// changed, and offline partitions get a chance at an election. The core
// keeps the layers (the policy reads them); then runs once the elections
// are written.
func (c *core) brokerConfigChanged(entity string, cfg map[string]string, then func()) {
	old := c.brokerConfigs[entity]
	every := c.rebalancePolicy().every
	if len(cfg) == 0 {
		delete(c.brokerConfigs, entity)
	} else {
		c.brokerConfigs[entity] = cfg
	}
	c.log.Info("Broker config changed", "entity", entity, "from", old, "to", cfg)
	c.emitEvent(controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED, func(ev *controlv1.ClusterEvent) {
		ev.NodeId = -1
		if id, err := strconv.ParseInt(entity, 10, 32); err == nil {
			ev.NodeId = int32(id)
		}
		ev.Reason = fmt.Sprintf("broker config %s now %v", entity, cfg)
	})
	c.pushUpdateMetadata(nil, nil, true, nil)
	// Only a new interval moves the check (Kafka's schedule does not move
	// with configs): re-armed on every change, the check was put off by a
	// whole interval each time, the first one after a failover included.
	if c.rebalancePolicy().every != every {
		c.armRebalance()
	}
	c.electOfflineAfterConfigChange(c.allPartitions(), then)
}

// electOfflineAfterConfigChange re-runs the offline election for partitions
// without a live leader: turning unclean.leader.election.enable on acts at
// once instead of at the next broker event (F20; KRaft waits for a periodic
// check).
func (c *core) electOfflineAfterConfigChange(parts []*partition, then func()) {
	view := c.view()
	var changes []change
	for _, p := range parts {
		if !p.hasState() || !c.offline(p) || p.t.deleting {
			continue
		}
		if d, err := election.ElectOffline(p.view(), c.viewFor(p, view), c.allowUnclean(p.t)); err == nil && d.Changed {
			changes = append(changes, change{p: p, d: d, cause: causeConfigChange})
		}
	}
	c.commit(changes, func(written []*partition, err error) {
		if err == nil {
			c.pushChanges(written)
		}
		then()
	})
}

// onConfigEvents notices config changes made behind the controller's back
// (its own writes are already applied). A value that differs from the model
// is re-read, so a late echo of an older write of ours cannot roll it back.
// A re-read that fails ends the term: the next one loads every config from
// etcd. Going on without it dropped the change until the next change of
// that key or the next failover. A value that does not decode is ignored,
// as the load ignores it.
func (a *Active) onConfigEvents(wr metastore.WatchResponse) {
	reread := func(what string, err error) bool {
		if errors.Is(err, metastore.ErrUndecodable) {
			a.log.Warn("ignoring a changed config that does not decode", "config", what, "err", err)
			return false
		}
		a.stepDown(fmt.Errorf("cannot read the changed config of %s (the next term loads it): %w", what, err))
		return true
	}
	for _, ev := range wr.Events {
		if a.stopping() {
			return
		}
		switch ev.Kind {
		case metastore.KindTopicConfig:
			t := a.topics[ev.Topic]
			if t == nil || sameConfig(t.config, ev.Config, ev.Type) {
				continue
			}
			ctx, cancel := a.writeCtx()
			cur, err := a.d.Store.TopicConfig(ctx, ev.Topic)
			cancel()
			if err != nil {
				if reread("topic "+ev.Topic, err) {
					return
				}
				continue
			}
			if !maps.Equal(cur, t.config) {
				a.applyTopicConfig(t, cur)
			}
		case metastore.KindUserCredentials:
			if sameUsers(a.users[ev.User], ev.Credentials, ev.Type) {
				continue
			}
			ctx, cancel := a.writeCtx()
			cur, err := a.d.Store.UserCredentials(ctx, ev.User)
			cancel()
			if err != nil {
				if reread("user "+ev.User, err) {
					return
				}
				continue
			}
			if !sameUsers(a.users[ev.User], cur, metastore.EventPut) {
				a.applyUsers(ev.User, cur)
			}
		case metastore.KindBrokerConfig:
			if sameConfig(a.brokerConfigs[ev.Entity], ev.Config, ev.Type) {
				continue
			}
			ctx, cancel := a.writeCtx()
			cur, err := a.d.Store.BrokerConfig(ctx, ev.Entity)
			cancel()
			if err != nil {
				if reread("broker entity "+ev.Entity, err) {
					return
				}
				continue
			}
			if !maps.Equal(cur, a.brokerConfigs[ev.Entity]) {
				a.applyBrokerConfig(ev.Entity, cur)
			}
		}
	}
}

func sameConfig(cur, ev map[string]string, typ metastore.EventType) bool {
	if typ == metastore.EventDelete {
		return len(cur) == 0
	}
	return maps.Equal(cur, ev)
}

func sameUsers(cur, ev metastore.UserCredentials, typ metastore.EventType) bool {
	if typ == metastore.EventDelete {
		return len(cur) == 0
	}
	return maps.EqualFunc(cur, ev, func(a, b scram.Credential) bool {
		return a.Iterations == b.Iterations && bytes.Equal(a.Salt, b.Salt) && bytes.Equal(a.StoredKey, b.StoredKey) && bytes.Equal(a.ServerKey, b.ServerKey)
	})
}
