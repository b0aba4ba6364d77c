package topicconfig

import (
	"slices"
	"strings"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		scope Scope
		key   string
		value string
		why   string // empty: valid; else a fragment of the message
	}{
		{ScopeTopic, "min.insync.replicas", "1", ""},
		{ScopeTopic, "min.insync.replicas", " 3 ", ""},
		{ScopeTopic, "min.insync.replicas", "0", "out of range [1, ...]"},
		{ScopeTopic, "min.insync.replicas", "two", `"two" is not a valid int`},
		{ScopeTopic, "min.insync.replicas", "2147483648", "out of range"},
		{ScopeTopic, "retention.ms", "-1", ""},
		{ScopeTopic, "retention.ms", "-2", "out of range [-1, ...]"},
		{ScopeTopic, "retention.ms", "9223372036854775807", ""},
		{ScopeTopic, "retention.bytes", "-1", ""},
		{ScopeTopic, "segment.bytes", "1024", ""},
		{ScopeTopic, "segment.bytes", "1023", "out of range [1024, ...]"},
		{ScopeTopic, "segment.ms", "0", "out of range"},
		{ScopeTopic, "flush.messages", "0", "out of range"},
		{ScopeTopic, "flush.ms", "0", ""},
		{ScopeTopic, "max.message.bytes", "-1", "out of range"},
		{ScopeTopic, "unclean.leader.election.enable", "TRUE", ""},
		{ScopeTopic, "unclean.leader.election.enable", "yes", "not true or false"},
		{ScopeTopic, "log.retention.ms", "1", "topic-level key is retention.ms"},
		{ScopeTopic, "message.max.bytes", "1", "topic-level key is max.message.bytes"},
		{ScopeTopic, "replica.lag.time.max.ms", "1", "topics cannot override it"},
		{ScopeTopic, "no.such.key", "1", "unknown topic config"},
		{ScopeTopic, "cleanup.policy", "compact", ""},
		{ScopeTopic, "cleanup.policy", "delete, compact", ""},
		{ScopeTopic, "cleanup.policy", "shred", `"shred" is not one of delete, compact`},
		{ScopeTopic, "cleanup.policy", " ", "value is empty; use delete, compact or compact,delete"},
		{ScopeTopic, "min.cleanable.dirty.ratio", "0.01", ""},
		{ScopeTopic, "min.cleanable.dirty.ratio", "1.5", "out of range [0, 1]"},
		{ScopeTopic, "min.cleanable.dirty.ratio", "half", `"half" is not a valid double`},
		{ScopeTopic, "min.cleanable.dirty.ratio", "NaN", `"NaN" is not a valid double`},
		{ScopeTopic, "delete.retention.ms", "-1", "out of range [0, ...]"},
		{ScopeTopic, "min.compaction.lag.ms", "-5", "out of range [0, ...]"},
		{ScopeTopic, "max.compaction.lag.ms", "0", "out of range [1, ...]"},
		{ScopeBroker, "log.cleaner.enable", "false", ""},
		{ScopeBroker, "log.cleaner.threads", "2", "out of range [1, 1]"},
		{ScopeBroker, "log.cleaner.dedupe.buffer.size", "10", "out of range [1024, ...]"},
		{ScopeBroker, "log.max.open.files", "15000", ""},
		{ScopeBroker, "log.max.open.files", "8", "out of range [16, ...]"},
		{ScopeBroker, "log.cleanup.policy", "compact", ""},
		{ScopeBroker, "log.retention.ms", "1", ""},
		{ScopeBroker, "log.roll.ms", "1", ""},
		{ScopeBroker, "min.insync.replicas", "2", ""},
		{ScopeBroker, "retention.ms", "1", "broker-level default is set with log.retention.ms"},
		{ScopeBroker, "segment.ms", "1", "broker-level default is set with log.roll.ms"},
		{ScopeBroker, "replica.truncation.mode", "high-watermark", ""},
		{ScopeBroker, "replica.truncation.mode", "epoch", "not one of leader-epoch, high-watermark"},
		{ScopeBroker, "leader.imbalance.per.broker.percentage", "100", ""},
		{ScopeBroker, "leader.imbalance.per.broker.percentage", "101", "out of range [0, 100]"},
		{ScopeBroker, "replica.fetch.max.bytes", "1", ""},
		{ScopeBroker, "no.such.key", "1", "unknown broker config"},
		{ScopeBroker, "log.retention.check.interval.ms", "100", ""},
		{ScopeBroker, "log.retention.check.interval.ms", "99", "out of range [100, ...]"},
		{ScopeBroker, "log.retention.check.interval.ms", "5s", `"5s" is not a valid long`},
		{ScopeTopic, "log.retention.check.interval.ms", "1000", "topics cannot override it"},
		{ScopeBrokerDynamic, "log.retention.check.interval.ms", "1000", "cannot be changed at runtime"},
		{ScopeBroker, "offsets.retention.check.interval.ms", "1", ""},
		{ScopeBroker, "offsets.retention.check.interval.ms", "0", "out of range [1, ...]"},
		{ScopeBrokerDynamic, "offsets.retention.check.interval.ms", "1000", "cannot be changed at runtime"},
		{ScopeTopic, "offsets.retention.check.interval.ms", "1000", "topics cannot override it"},
		{ScopeBrokerDynamic, "log.retention.ms", "1", ""},
		{ScopeBrokerDynamic, "producer.id.expiration.ms", "60000", ""},
		{ScopeBrokerDynamic, "producer.id.expiration.ms", "0", "out of range [1, ...]"},
		{ScopeTopic, "producer.id.expiration.ms", "60000", "topics cannot override it"},
		{ScopeBrokerDynamic, "unclean.leader.election.enable", "true", ""},
		{ScopeBrokerDynamic, "num.replica.fetchers", "4", ""},
		{ScopeBrokerDynamic, "num.replica.fetchers", "0", "out of range"},
		{ScopeBrokerDynamic, "replica.fetch.max.bytes", "1", "cannot be changed at runtime"},
		{ScopeBrokerDynamic, "auto.leader.rebalance.enable", "false", "cannot be changed at runtime"},
		{ScopeTopic, "index.interval.bytes", "-1", "value -1 is out of range [0, ...]"},
		{ScopeTopic, "segment.ms", "-5", "value -5 is out of range [1, ...]"},
		{ScopeTopic, "message.timestamp.before.max.ms", "3600000", ""},
		{ScopeTopic, "message.timestamp.after.max.ms", "-1", "value -1 is out of range [0, ...]"},
		{ScopeBroker, "log.message.timestamp.after.max.ms", "3600000", ""},
		{ScopeBroker, "fetch.max.bytes", "1023", "value 1023 is out of range [1024, ...]"},
		{ScopeBrokerDynamic, "fetch.max.bytes", "1048576", ""},
		{ScopeBroker, "produce.max.records.per.request", "0", "value 0 is out of range [1, ...]"},
		{ScopeBroker, "request.timeout.max.ms", "0", "value 0 is out of range [1, ...]"},
		{ScopeBrokerDynamic, "quota.producer.default", "1048576", ""},
		{ScopeBroker, "quota.consumer.default", "0", "value 0 is out of range [1, ...]"},
		{ScopeBrokerDynamic, "quota.producer.overrides", "alice:1024, ANONYMOUS:1", ""},
		{ScopeBroker, "quota.producer.overrides", "alice", `"alice" is not principal:bytesPerSecond`},
		{ScopeBroker, "quota.consumer.overrides", "alice:0", `rate "0" of alice is not a whole number of bytes per second >= 1`},
		{ScopeBroker, "quota.consumer.overrides", "bob:1,bob:2", "principal bob is listed twice"},
		{ScopeBroker, "quota.window.num", "1", "value 1 is out of range [2, 100]"},
		{ScopeBroker, "quota.window.num", "1000000000", "value 1000000000 is out of range [2, 100]"},
		{ScopeBroker, "quota.window.num", "100", ""},
		{ScopeBroker, "replication.quota.window.num", "1000000000", "value 1000000000 is out of range [2, 100]"},
		{ScopeBrokerDynamic, "quota.window.size.seconds", "2", "cannot be changed at runtime"},
	}
	for _, tt := range tests {
		err := Validate(tt.scope, tt.key, tt.value)
		if tt.why == "" {
			if err != nil {
				t.Errorf("Validate(%v, %s, %q) = %v, want ok", tt.scope, tt.key, tt.value, err)
			}
			continue
		}
		e := kerr.As(err)
		if e == nil || e.Code != kerr.InvalidConfig || e.Field != tt.key ||
			!strings.Contains(e.Message, tt.key) || !strings.Contains(e.Message, tt.why) {
			t.Errorf("Validate(%v, %s, %q) = %#v, want INVALID_CONFIG on field %s saying %q",
				tt.scope, tt.key, tt.value, e, tt.key, tt.why)
		}
	}
}

func TestDefinitions(t *testing.T) {
	all := Definitions()
	if !slices.IsSortedFunc(all, func(a, b Def) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("Definitions is not sorted by name")
	}
	topicNames, brokerNames := map[string]bool{}, map[string]bool{}
	for _, d := range all {
		if d.Doc == "" || d.BrokerName == "" {
			t.Errorf("%s: missing doc or broker name", d.Name)
		}
		if d.TopicLevel != (d.setTopic != nil) || (d.setTopic == nil) == (d.setBroker == nil) {
			t.Errorf("%s: needs exactly one setter, matching TopicLevel", d.Name)
		}
		if d.TopicLevel && !d.Dynamic {
			t.Errorf("%s: topic-level settings are dynamic at broker level in Kafka", d.Name)
		}
		if topicNames[d.Name] || brokerNames[d.BrokerName] {
			t.Errorf("%s: name used twice", d.Name)
		}
		topicNames[d.Name], brokerNames[d.BrokerName] = true, true
		// Every default is valid wherever the setting may be set.
		if d.TopicLevel {
			if err := Validate(ScopeTopic, d.Name, d.Default); err != nil {
				t.Errorf("default: %v", err)
			}
		}
		if err := Validate(ScopeBroker, d.BrokerName, d.Default); err != nil {
			t.Errorf("default: %v", err)
		}
	}
	all[0].Name = "changed"
	if Definitions()[0].Name == "changed" {
		t.Fatal("Definitions exposes the registry to mutation")
	}
}

func TestLookup(t *testing.T) {
	if d, ok := Lookup(ScopeTopic, "segment.ms"); !ok || d.BrokerName != "log.roll.ms" || d.Type != TypeLong {
		t.Fatalf("Lookup(topic, segment.ms) = %+v, %v", d, ok)
	}
	if d, ok := Lookup(ScopeBrokerDynamic, "log.roll.ms"); !ok || d.Name != "segment.ms" {
		t.Fatalf("Lookup(dynamic broker, log.roll.ms) = %+v, %v", d, ok)
	}
	if _, ok := Lookup(ScopeTopic, "log.roll.ms"); ok {
		t.Fatal("broker key found at topic scope")
	}
}

func TestParseList(t *testing.T) {
	d := Def{Name: "x", Type: TypeList, Valid: []string{"delete", "compact"}}
	for raw, want := range map[string][]string{
		"":                  nil,
		"delete":            {"delete"},
		" compact , delete": {"compact", "delete"},
	} {
		v, err := d.parse(raw)
		if err != nil || !slices.Equal(v.l, want) {
			t.Errorf("parse(%q) = %v, %v; want %v", raw, v.l, err, want)
		}
	}
	if _, err := d.parse("delete,shred"); err == nil || !strings.Contains(err.Error(), `"shred"`) {
		t.Errorf("parse of an invalid element = %v", err)
	}
	free := Def{Name: "y", Type: TypeList}
	if v, err := free.parse("a,b"); err != nil || !slices.Equal(v.l, []string{"a", "b"}) {
		t.Errorf("free list = %v, %v", v.l, err)
	}
}

func TestRange(t *testing.T) {
	for key, want := range map[string]string{
		"segment.bytes":                  "[1024, ...]",
		"unclean.leader.election.enable": "true|false",
	} {
		if d, _ := Lookup(ScopeTopic, key); d.Range() != want {
			t.Errorf("%s range %q, want %q", key, d.Range(), want)
		}
	}
	if d, _ := Lookup(ScopeBroker, "replica.truncation.mode"); d.Range() != "leader-epoch|high-watermark" {
		t.Errorf("truncation mode range %q", d.Range())
	}
	if d, _ := Lookup(ScopeBroker, "leader.imbalance.per.broker.percentage"); d.Range() != "[0, 100]" {
		t.Errorf("imbalance range %q", d.Range())
	}
}

// compression.type takes only producer; Kafka's recompressing values are
// refused by name.
func TestCompressionTypeOnlyProducer(t *testing.T) {
	if err := Validate(ScopeTopic, "compression.type", "producer"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"gzip", "zstd", "uncompressed", "brotli"} {
		err := Validate(ScopeTopic, "compression.type", v)
		if err == nil || !strings.Contains(err.Error(), "producer") {
			t.Fatalf("compression.type=%s: %v, want a refusal naming producer", v, err)
		}
	}
}

// Definitions is sorted once, after the registry's defaults (each Max) are
// filled in: every call returns the same sorted settings, with their
// limits, and a caller changing its copy changes nobody else's.
func TestDefinitionsSortedOnceWithLimits(t *testing.T) {
	first := Definitions()
	if !slices.IsSortedFunc(first, func(a, b Def) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("Definitions is not sorted by name")
	}
	for _, d := range first {
		if (d.Type == TypeInt || d.Type == TypeLong) && d.Max == 0 {
			t.Errorf("%s has no Max: sorted before the registry's defaults were filled in", d.Name)
		}
	}
	first[0].Name = "changed"
	if again := Definitions(); again[0].Name == "changed" {
		t.Fatal("a caller's change to its copy leaked into the next call")
	}
	if n := testing.AllocsPerRun(100, func() { _ = Definitions() }); n > 1 {
		t.Errorf("Definitions allocates %.0f times per call, want only its copy", n)
	}
}
