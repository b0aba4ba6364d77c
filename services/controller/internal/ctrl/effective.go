package ctrl

import (
	"errors"
	"maps"
	"time"

	"tidemark.io/services/metastore"
	"tidemark.io/services/topicconfig"
)

// dynLayers returns the broker-level layers under a topic's overrides, in
// Kafka's precedence: dynamic per-broker (when forBroker >= 0), dynamic
// cluster-wide default, that broker's own static configuration (its
// --config flags as registered, when forBroker >= 0), the controller's
// static configuration.
func (c *core) dynLayers(forBroker int32) []map[string]string {
	var layers []map[string]string
	if forBroker >= 0 {
		layers = append(layers, c.brokerConfigs[metastore.BrokerEntity(forBroker)])
	}
	layers = append(layers, c.brokerConfigs[metastore.DefaultBrokerEntity])
	if forBroker >= 0 {
		layers = append(layers, c.brokerStatic(metastore.BrokerEntity(forBroker)))
	}
	return append(layers, c.staticBroker)
}

// validLayers are a topic's overrides and the broker layers seen by
// forBroker, without the keys that are not valid. Configs tidemark writes
// were validated when written; one put into etcd behind its back may not
// be. Its bad keys are left out with a warning, and every other setting
// still applies: falling back to the defaults for the whole topic turned a
// compacted topic into a deleting one, and one bad cluster-wide key did
// that to every topic.
func (c *core) validLayers(t *topic, forBroker int32) (map[string]string, []map[string]string) {
	topic, layers, errs := topicconfig.WithoutInvalid(t.config, c.dynLayers(forBroker))
	c.warnInvalidConfigs(t.name, errs)
	return topic, layers
}

// warnInvalidConfigs logs the invalid keys an entity's configs hold, once
// for each set of them (configs are resolved on every push).
func (c *core) warnInvalidConfigs(entity string, errs []error) {
	msg := errors.Join(errs...)
	text := ""
	if msg != nil {
		text = msg.Error()
	}
	if c.invalidConfigs[entity] == text {
		return
	}
	if text == "" {
		delete(c.invalidConfigs, entity)
		return
	}
	if c.invalidConfigs == nil {
		c.invalidConfigs = map[string]string{}
	}
	c.invalidConfigs[entity] = text
	c.log.Warn("invalid config in etcd; ignoring these keys", "for", entity, "err", text)
}

// topicEntries describes a topic's effective configuration as seen by
// forBroker (-1: the controller's own view).
func (c *core) topicEntries(t *topic, forBroker int32) []topicconfig.Entry {
	topic, layers := c.validLayers(t, forBroker)
	entries, err := topicconfig.Describe(topic, layers...)
	if err != nil { // unreachable: every key left was valid
		c.log.Error("describing a topic's config", "topic", t.name, "err", err)
	}
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
	topic, layers := c.validLayers(t, -1)
	tc, err := topicconfig.Resolve(topic, layers...)
	if err != nil { // unreachable: every key left was valid
		c.log.Error("resolving a topic's config", "topic", t.name, "err", err)
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
	_, layers, errs := topicconfig.WithoutInvalid(nil, c.dynLayers(-1))
	c.warnInvalidConfigs("brokers", errs)
	bc, err := topicconfig.ResolveBroker(layers...)
	if err != nil { // the keys are valid, but not together
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
	_, layers, _ := topicconfig.WithoutInvalid(nil, []map[string]string{
		c.brokerConfigs[metastore.DefaultBrokerEntity], c.brokerConfigs[metastore.BrokerEntity(id)]})
	out := maps.Clone(layers[0])
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, layers[1])
	return out
}
