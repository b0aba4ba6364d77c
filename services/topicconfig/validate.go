package topicconfig

import (
	"slices"

	"tidemark.io/services/platform/kerr"
)

// Definitions returns every setting, sorted by Name, for docs and the CLI:
// a copy of sortedDefs, the caller's to change.
func Definitions() []Def { return slices.Clone(sortedDefs) }

// sortedDefs is defs sorted by Name, once: Describe runs for every replica
// a LeaderAndIsr names, and sorting the registry each time was most of a
// broker's work applying a controller's full push of thousands of them.
// It is made by init, after the registry's defaults are filled in.
var sortedDefs []Def

// Lookup finds the setting key names at scope: a topic-level key for
// ScopeTopic, a broker-level key otherwise.
func Lookup(scope Scope, key string) (Def, bool) {
	var d *Def
	if scope == ScopeTopic {
		d = byTopicName[key]
	} else {
		d = byBrokerName[key]
	}
	if d == nil {
		return Def{}, false
	}
	return *d, true
}

// Validate checks that key may be set to value at scope. It returns an
// INVALID_CONFIG error naming the key and saying why: unknown at that scope
// (pointing to the right name when the key exists at the other level), not
// changeable at runtime, unparsable, or out of range.
func Validate(scope Scope, key, value string) error {
	d, ok := Lookup(scope, key)
	if !ok {
		return unknownKey(scope, key)
	}
	if scope == ScopeBrokerDynamic && !d.Dynamic {
		return kerr.BadField(kerr.InvalidConfig, key,
			"cannot be changed at runtime; set it in the broker's static configuration")
	}
	if _, err := d.parse(value); err != nil {
		return kerr.BadField(kerr.InvalidConfig, key, "%v", err)
	}
	return nil
}

func unknownKey(scope Scope, key string) error {
	if scope == ScopeTopic {
		if d := byBrokerName[key]; d != nil {
			if d.TopicLevel {
				return kerr.BadField(kerr.InvalidConfig, key,
					"is a broker-level key; the topic-level key is %s", d.Name)
			}
			return kerr.BadField(kerr.InvalidConfig, key, "is a broker-level setting; topics cannot override it")
		}
	} else if d := byTopicName[key]; d != nil {
		return kerr.BadField(kerr.InvalidConfig, key,
			"is a topic-level key; the broker-level default is set with %s", d.BrokerName)
	}
	return kerr.BadField(kerr.InvalidConfig, key, "unknown %s config", scope)
}

// ValidateTopic checks a topic's overrides key by key (Validate at
// ScopeTopic) and then the effective configuration they give over the
// broker layers as a whole, as Kafka's LogConfig.validateValues does:
// min.compaction.lag.ms may not exceed max.compaction.lag.ms.
func ValidateTopic(topicOverrides map[string]string, brokerLayers ...map[string]string) error {
	c, err := Resolve(topicOverrides, brokerLayers...)
	if err != nil {
		return err
	}
	if c.MinCompactionLagMs > c.MaxCompactionLagMs {
		return kerr.BadField(kerr.InvalidConfig, "min.compaction.lag.ms",
			"%d exceeds max.compaction.lag.ms %d", c.MinCompactionLagMs, c.MaxCompactionLagMs)
	}
	return nil
}
