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
func (a *Active) dynLayers(forBroker int32) []map[string]string {
	var layers []map[string]string
	if forBroker >= 0 {
		layers = append(layers, a.brokerConfigs[metastore.BrokerEntity(forBroker)])
	}
	return append(layers, a.brokerConfigs[metastore.DefaultBrokerEntity], a.d.Settings.StaticBroker)
}

// topicEntries describes a topic's effective configuration as seen by
// forBroker (-1: the controller's own view). Configs in etcd were validated
// when written; if one is not valid any more the overrides are ignored with
// a warning rather than failing the caller.
func (a *Active) topicEntries(t *topic, forBroker int32) []topicconfig.Entry {
	entries, err := topicconfig.Describe(t.config, a.dynLayers(forBroker)...)
	if err == nil {
		return entries
	}
	a.log.Warn("invalid config in etcd; using defaults for this topic", "topic", t.name, "err", err)
	entries, _ = topicconfig.Describe(nil)
	return entries
}

// topicConfigMap is a topic's effective configuration as a flat map, as
// LeaderAndIsr and UpdateMetadata carry it.
func (a *Active) topicConfigMap(t *topic, forBroker int32) map[string]string {
	out := map[string]string{}
	for _, e := range a.topicEntries(t, forBroker) {
		out[e.Name] = e.Value
	}
	return out
}

// topicConfig is a topic's effective configuration at the controller: what
// decides unclean elections (F20) and min.insync.replicas in descriptions.
func (a *Active) topicConfig(t *topic) topicconfig.TopicConfig {
	c, err := topicconfig.Resolve(t.config, a.dynLayers(-1)...)
	if err != nil {
		a.log.Warn("invalid config in etcd; using defaults for this topic", "topic", t.name, "err", err)
		return topicconfig.DefaultTopic()
	}
	return c
}

// allowUnclean is unclean.leader.election.enable for t (topic override, else
// the dynamic cluster default, else false), read at decision time so a
// change acts at once (F20).
func (a *Active) allowUnclean(t *topic) bool { return a.topicConfig(t).UncleanLeaderElectionEnable }

// brokerConfig is the effective broker-level configuration at the
// controller (rebalance settings, creation defaults).
func (a *Active) brokerConfig() topicconfig.BrokerConfig {
	c, err := topicconfig.ResolveBroker(a.dynLayers(-1)...)
	if err != nil {
		a.log.Warn("invalid broker config in etcd; using the controller's static configuration", "err", err)
		if c, err = topicconfig.ResolveBroker(a.d.Settings.StaticBroker); err != nil {
			return topicconfig.DefaultBroker()
		}
	}
	return c
}

// rebalancePolicy is the auto leader rebalance configuration at the
// controller (F21).
func (a *Active) rebalancePolicy() rebalancePolicy {
	cfg := a.brokerConfig()
	return rebalancePolicy{enabled: cfg.AutoLeaderRebalanceEnable, percent: int(cfg.LeaderImbalancePerBrokerPercentage),
		every: time.Duration(cfg.LeaderImbalanceCheckIntervalSeconds) * time.Second}
}

// brokerConfigsFor is the dynamic broker configuration UpdateMetadata
// carries to one broker: the cluster-wide defaults overlaid with its own.
func (a *Active) brokerConfigsFor(id int32) map[string]string {
	out := maps.Clone(a.brokerConfigs[metastore.DefaultBrokerEntity])
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, a.brokerConfigs[metastore.BrokerEntity(id)])
	return out
}
