// Package topicconfig is tidemark's one registry of topic-level and
// broker-level configuration keys, shared by brokers, the controller and
// the CLI: each key's name, type, default, valid range, whether it may change
// at runtime and a one-line description; validation of a proposed value;
// and resolution of the effective configuration of a topic.
//
// Naming follows Kafka. A topic-level key (retention.ms) has a broker-level
// synonym that sets the default for every topic on that broker, usually with
// a "log." prefix (log.retention.ms); a few keep their name
// (min.insync.replicas, unclean.leader.election.enable) or use Kafka's
// historic broker name (max.message.bytes ↔ message.max.bytes, segment.ms ↔
// log.roll.ms). Broker-only keys (replica.lag.time.max.ms) have no topic form.
package topicconfig

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Type is the type of a config value. Values travel as strings and are
// parsed by type.
type Type int

const (
	TypeInt    Type = iota + 1 // a 32-bit signed integer
	TypeLong                   // a 64-bit signed integer
	TypeBool                   // "true" or "false", any case
	TypeString                 // free text, or one of Def.Valid
	TypeList                   // comma-separated strings, each one of Def.Valid if set
	TypeDouble                 // a decimal number, within [MinF, MaxF]
)

func (t Type) String() string {
	switch t {
	case TypeInt:
		return "int"
	case TypeLong:
		return "long"
	case TypeBool:
		return "bool"
	case TypeString:
		return "string"
	case TypeList:
		return "list"
	case TypeDouble:
		return "double"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Scope says where a value is being set.
type Scope int

const (
	// ScopeTopic is a topic-level override, set at creation or altered at
	// runtime; every topic-level key may be.
	ScopeTopic Scope = iota + 1
	// ScopeBroker is a broker's static configuration (flags or file),
	// read at start-up.
	ScopeBroker
	// ScopeBrokerDynamic is a broker-level override changed at runtime,
	// for one broker or as the cluster-wide default. Only Dynamic keys.
	ScopeBrokerDynamic
)

func (s Scope) String() string {
	switch s {
	case ScopeTopic:
		return "topic"
	case ScopeBroker:
		return "broker"
	case ScopeBrokerDynamic:
		return "dynamic broker"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Def defines one setting.
type Def struct {
	// Name is the topic-level key, or the broker key of a broker-only setting.
	Name string
	// BrokerName is the broker-level key. For a topic-level setting it is
	// the synonym that sets the default for the broker's topics.
	BrokerName string
	// TopicLevel is set for settings a topic may override.
	TopicLevel bool
	Type       Type
	// Default is the value used when no layer sets one, as a string.
	Default string
	// Min and Max bound TypeInt and TypeLong values, inclusive.
	Min, Max int64
	// MinF and MaxF bound TypeDouble values, inclusive.
	MinF, MaxF float64
	// Valid, when set, lists the allowed TypeString values or TypeList elements.
	Valid []string
	// Check, when set, checks a TypeString or TypeList value's form (a list
	// of principal:rate pairs, say) and says what is wrong.
	Check func(string) error
	// Dynamic is set when the broker-level key may change at runtime
	// (ScopeBrokerDynamic). Topic-level overrides may always change.
	Dynamic bool
	Doc     string

	// Exactly one of these stores a parsed value into the typed structs.
	setTopic  func(*TopicConfig, value)
	setBroker func(*BrokerConfig, value)
}

// value is a parsed config value; the field used depends on the Type.
type value struct {
	i int64
	f float64
	b bool
	s string
	l []string
}

// parse parses raw by d's type and checks it against d's range and valid
// values. The error says why, without the key (callers add it).
func (d Def) parse(raw string) (value, error) {
	s := strings.TrimSpace(raw)
	switch d.Type {
	case TypeInt, TypeLong:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return value{}, fmt.Errorf("value %q is not a valid %s", raw, d.Type)
		}
		if n < d.Min || n > d.Max {
			return value{}, fmt.Errorf("value %d is out of range %s", n, d.rangeText())
		}
		return value{i: n}, nil
	case TypeBool:
		switch {
		case strings.EqualFold(s, "true"):
			return value{b: true}, nil
		case strings.EqualFold(s, "false"):
			return value{b: false}, nil
		}
		return value{}, fmt.Errorf("value %q is not true or false", raw)
	case TypeString:
		if err := d.checkValid(s); err != nil {
			return value{}, err
		}
		if d.Check != nil {
			if err := d.Check(s); err != nil {
				return value{}, err
			}
		}
		return value{s: s}, nil
	case TypeList:
		var l []string
		if s != "" {
			for _, e := range strings.Split(s, ",") {
				e = strings.TrimSpace(e)
				if err := d.checkValid(e); err != nil {
					return value{}, err
				}
				l = append(l, e)
			}
		}
		if d.Check != nil {
			if err := d.Check(s); err != nil {
				return value{}, err
			}
		}
		return value{l: l}, nil
	case TypeDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return value{}, fmt.Errorf("value %q is not a valid %s", raw, d.Type)
		}
		if f < d.MinF || f > d.MaxF {
			return value{}, fmt.Errorf("value %v is out of range [%v, %v]", f, d.MinF, d.MaxF)
		}
		return value{f: f}, nil
	}
	return value{}, fmt.Errorf("unsupported type %s", d.Type)
}

func (d Def) checkValid(s string) error {
	if len(d.Valid) == 0 {
		return nil
	}
	for _, v := range d.Valid {
		if s == v {
			return nil
		}
	}
	return fmt.Errorf("value %q is not one of %s", s, strings.Join(d.Valid, ", "))
}

// rangeText renders [Min, Max] for messages and docs, leaving out a bound
// that is just the type's limit.
func (d Def) rangeText() string {
	lo, hi := fmt.Sprint(d.Min), fmt.Sprint(d.Max)
	if d.Max == typeMax(d.Type) {
		return "[" + lo + ", ...]"
	}
	return "[" + lo + ", " + hi + "]"
}

// Range describes the valid values, for docs: "[1, ...]", "true|false",
// "leader-epoch|high-watermark", or "" when anything goes.
func (d Def) Range() string {
	switch d.Type {
	case TypeInt, TypeLong:
		return d.rangeText()
	case TypeBool:
		return "true|false"
	case TypeDouble:
		return fmt.Sprintf("[%v, %v]", d.MinF, d.MaxF)
	}
	return strings.Join(d.Valid, "|")
}
