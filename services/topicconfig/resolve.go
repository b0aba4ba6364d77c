package topicconfig

import (
	"maps"
	"slices"

	"tidemark.io/services/platform/kerr"
)

// Source says which layer an effective value came from.
type Source int

const (
	SourceDefault Source = iota // the registry default
	SourceTopic                 // the topic's own override
	SourceBroker                // a broker layer; Entry.Layer says which
)

func (s Source) String() string {
	switch s {
	case SourceTopic:
		return "topic"
	case SourceBroker:
		return "broker"
	}
	return "default"
}

// Entry is one effective topic-level setting, as DescribeConfigs shows it.
type Entry struct {
	Name   string
	Value  string
	Source Source
	// Layer is the index of the broker layer the value came from, when
	// Source is SourceBroker.
	Layer int
}

// Resolve computes a topic's effective configuration. For each setting the
// topic's override wins, then the broker layers in the order given, then the
// default: Kafka's order is topic override, dynamic per-broker override,
// dynamic cluster-wide default, static broker configuration, default, so
// pass the broker layers in that order. Topic overrides use topic-level keys,
// broker layers broker-level keys (log.retention.ms for retention.ms). Any
// unknown key or invalid value fails with INVALID_CONFIG.
func Resolve(topicOverrides map[string]string, brokerLayers ...map[string]string) (TopicConfig, error) {
	entries, err := Describe(topicOverrides, brokerLayers...)
	if err != nil {
		return TopicConfig{}, err
	}
	var c TopicConfig
	for _, e := range entries {
		d := byTopicName[e.Name]
		v, err := d.parse(e.Value)
		if err != nil { // unreachable: Describe validated every value
			return TopicConfig{}, kerr.BadField(kerr.InvalidConfig, e.Name, "%v", err)
		}
		d.setTopic(&c, v)
	}
	return c, nil
}

// Describe lists every topic-level setting with its effective value and
// where it came from, sorted by name; precedence and errors are Resolve's.
func Describe(topicOverrides map[string]string, brokerLayers ...map[string]string) ([]Entry, error) {
	if err := validateLayers(topicOverrides, brokerLayers); err != nil {
		return nil, err
	}
	var out []Entry
	for _, d := range sortedDefs {
		if !d.TopicLevel {
			continue
		}
		out = append(out, effective(d, topicOverrides, brokerLayers))
	}
	return out, nil
}

// ResolveBroker computes the effective broker configuration from broker
// layers, highest precedence first (dynamic per-broker, dynamic cluster-wide,
// static). Besides each value's own checks, replica.fetch.wait.max.ms may not
// exceed replica.lag.time.max.ms, or a follower waiting in a fetch would be
// dropped from the ISR (Kafka requires the same).
func ResolveBroker(layers ...map[string]string) (BrokerConfig, error) {
	if err := validateLayers(nil, layers); err != nil {
		return BrokerConfig{}, err
	}
	var c BrokerConfig
	for _, d := range defs {
		v, _ := d.parse(effective(d, nil, layers).Value)
		if d.TopicLevel {
			d.setTopic(&c.TopicDefaults, v)
		} else {
			d.setBroker(&c, v)
		}
	}
	if int64(c.ReplicaFetchWaitMaxMs) > c.ReplicaLagTimeMaxMs {
		return BrokerConfig{}, kerr.BadField(kerr.InvalidConfig, "replica.fetch.wait.max.ms",
			"%d exceeds replica.lag.time.max.ms %d", c.ReplicaFetchWaitMaxMs, c.ReplicaLagTimeMaxMs)
	}
	return c, nil
}

// DefaultTopic returns the topic configuration with no overrides at all.
func DefaultTopic() TopicConfig {
	c, err := Resolve(nil)
	if err != nil {
		panic("topicconfig: invalid default: " + err.Error())
	}
	return c
}

// DefaultBroker returns the broker configuration with no overrides at all.
func DefaultBroker() BrokerConfig {
	c, err := ResolveBroker()
	if err != nil {
		panic("topicconfig: invalid default: " + err.Error())
	}
	return c
}

// effective picks d's value: topic override, then broker layers, then default.
func effective(d Def, topic map[string]string, layers []map[string]string) Entry {
	if d.TopicLevel {
		if v, ok := topic[d.Name]; ok {
			return Entry{Name: d.Name, Value: v, Source: SourceTopic}
		}
	}
	for i, l := range layers {
		if v, ok := l[d.BrokerName]; ok {
			return Entry{Name: d.Name, Value: v, Source: SourceBroker, Layer: i}
		}
	}
	return Entry{Name: d.Name, Value: d.Default, Source: SourceDefault}
}

// validateLayers checks every key and value: topic overrides at ScopeTopic,
// broker layers at ScopeBroker (the layers may hold static-only keys), in
// key order so the error reported is the same on every run.
func validateLayers(topic map[string]string, layers []map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(topic)) {
		if err := Validate(ScopeTopic, k, topic[k]); err != nil {
			return err
		}
	}
	for _, l := range layers {
		for _, k := range slices.Sorted(maps.Keys(l)) {
			if err := Validate(ScopeBroker, k, l[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// WithoutInvalid returns topic overrides and broker layers without the keys
// Validate refuses (topic overrides at ScopeTopic, broker layers at
// ScopeBroker), with an error naming each key left out, in key order. A
// reader of configs nobody validated for it (the controller reading what
// etcdctl wrote) keeps every valid setting when one is bad, rather than
// falling back to the defaults for all of them. Maps with nothing to drop
// are returned as they are.
func WithoutInvalid(topic map[string]string, layers []map[string]string) (map[string]string, []map[string]string, []error) {
	var errs []error
	keep := func(scope Scope, m map[string]string) map[string]string {
		var out map[string]string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := Validate(scope, k, m[k]); err != nil {
				errs = append(errs, err)
				if out == nil {
					out = maps.Clone(m)
				}
				delete(out, k)
			}
		}
		if out == nil {
			return m
		}
		return out
	}
	topic = keep(ScopeTopic, topic)
	kept := make([]map[string]string, len(layers))
	for i, l := range layers {
		kept[i] = keep(ScopeBroker, l)
	}
	return topic, kept, errs
}
