package ctrl

import (
	"maps"
	"time"

	"tidemark.io/services/metastore"
	"tidemark.io/services/topicconfig"
)

// dynLayers returns the broker-level layers under a topic's overrides, in
// Kafka's precedence: dynamic per-broker (when forBroker >= 0), dynamic
// cluster-wide default, the controller's static configuration.
func (c *core) dynLayers(forBroker int32) []map[string]string {
	var layers []map[string]string
	if forBroker >= 0 {
		layers = append(layers, c.brokerConfigs[metastore.BrokerEntity(forBroker)])
	}
	return append(layers, c.brokerConfigs[metastore.DefaultBrokerEntity], c.staticBroker)
}

// topicEntries describes a topic's effective configuration as seen by
// forBroker (-1: the controller's own view). Configs in etcd were validated
// when written; if one is not valid any more the overrides are ignored with
// a warning rather than failing the caller.
func (c *core) topicEntries(t *topic, forBroker int32) []topicconfig.Entry {
	entries, err := topicconfig.Describe(t.config, c.dynLayers(forBroker)...)
	if err == nil {
		return entries
	}
	c.log.Warn("invalid config in etcd; using defaults for this topic", "topic", t.name, "err", err)
	entries, _ = topicconfig.Describe(nil)
	return entries
}

// topicConfigMap is a topic's effective configuration as a flat map, as
// LeaderAndIsr and UpdateMetadata carry it.
func (c *core) topicConfigMap(t *topic, forBroker int32) map[string]string {
	out := map[string]string{}
	for _, e := range c.topicEntries(t, forBroker) {
		out[e.Name] = e.Value
	}
	return out
}

// topicConfig is a topic's effective configuration at the controller: what
// decides unclean elections (F20) and min.insync.replicas in descriptions.
func (c *core) topicConfig(t *topic) topicconfig.TopicConfig {
	tc, err := topicconfig.Resolve(t.config, c.dynLayers(-1)...)
	if err != nil {
		c.log.Warn("invalid config in etcd; using defaults for this topic", "topic", t.name, "err", err)
		return topicconfig.DefaultTopic()
	}
	return tc
}

// uncleanConfigured is unclean.leader.election.enable for t (topic override, else
// the dynamic cluster default, else false), read at decision time so a
// change acts at once (F20).
func (c *core) uncleanConfigured(t *topic) bool { return c.topicConfig(t).UncleanLeaderElectionEnable }

// brokerConfig is the effective broker-level configuration at the
// controller (rebalance settings, creation defaults).
func (c *core) brokerConfig() topicconfig.BrokerConfig {
	bc, err := topicconfig.ResolveBroker(c.dynLayers(-1)...)
	if err != nil {
		c.log.Warn("invalid broker config in etcd; using the controller's static configuration", "err", err)
		if bc, err = topicconfig.ResolveBroker(c.staticBroker); err != nil {
			return topicconfig.DefaultBroker()
		}
	}
	return bc
}

// rebalanceConfigured is the auto leader rebalance configuration at the
// controller (F21).
func (c *core) rebalanceConfigured() rebalancePolicy {
	cfg := c.brokerConfig()
	return rebalancePolicy{enabled: cfg.AutoLeaderRebalanceEnable, percent: int(cfg.LeaderImbalancePerBrokerPercentage),
		every: time.Duration(cfg.LeaderImbalanceCheckIntervalSeconds) * time.Second}
}

// brokerConfigsFor is the dynamic broker configuration UpdateMetadata
// carries to one broker: the cluster-wide defaults overlaid with its own.
func (c *core) brokerConfigsFor(id int32) map[string]string {
	out := maps.Clone(c.brokerConfigs[metastore.DefaultBrokerEntity])
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, c.brokerConfigs[metastore.BrokerEntity(id)])
	return out
}
