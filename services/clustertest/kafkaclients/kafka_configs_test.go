package kafkaclients

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
)

// synonymsText renders a config's synonyms as name=value(source) pairs,
// highest precedence first.
func synonymsText(c kadm.Config) string {
	s := ""
	for _, syn := range c.Synonyms {
		s += fmt.Sprintf("%s=%s(%s) ", syn.Key, *syn.Value, syn.Source)
	}
	return s
}

// DescribeConfigs over the Kafka listener lists synonyms as Kafka does:
// a topic's override over the cluster-wide dynamic default over every
// broker's static flag over the default, by the broker-level name under
// the topic's own; a broker's dynamic override over all of those. The
// legacy AlterConfigs (kadm's ...State calls) replaces a topic's whole set
// of overrides, and validate_only changes nothing.
func TestKafkaConfigSynonymsAndWholeSetAlter(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: map[string]string{"log.retention.ms": "3000000"}})
	adm := kadm.NewClient(c.KafkaClient())
	c.KafkaCreate(adm, "syn", 1, 3, map[string]*string{"retention.ms": kadm.StringPtr("1000000"), "segment.ms": kadm.StringPtr("600000")})
	ctx := clustertest.CtxFor(t, 30*time.Second)
	for _, alter := range []struct {
		brokers []int32
		value   string
	}{{nil, "2000000"}, {[]int32{1}, "4000000"}} {
		res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr(alter.value)}}, alter.brokers...)
		if err != nil || res[0].Err != nil {
			t.Fatalf("alter log.retention.ms on %v: %v %v", alter.brokers, err, res)
		}
	}
	topic := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "syn")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("syn", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe syn: %v %v", err, rc.Err)
		}
		out := map[string]kadm.Config{}
		for _, cfg := range rc.Configs {
			out[cfg.Key] = cfg
		}
		return out
	}
	// Any broker may answer; broker 1 adds its own dynamic override.
	want := "retention.ms=1000000(DYNAMIC_TOPIC_CONFIG) log.retention.ms=2000000(DYNAMIC_DEFAULT_BROKER_CONFIG) log.retention.ms=3000000(STATIC_BROKER_CONFIG) log.retention.ms=604800000(DEFAULT_CONFIG) "
	want1 := "retention.ms=1000000(DYNAMIC_TOPIC_CONFIG) log.retention.ms=4000000(DYNAMIC_BROKER_CONFIG) log.retention.ms=2000000(DYNAMIC_DEFAULT_BROKER_CONFIG) log.retention.ms=3000000(STATIC_BROKER_CONFIG) log.retention.ms=604800000(DEFAULT_CONFIG) "
	if got := synonymsText(topic()["retention.ms"]); got != want && got != want1 {
		t.Fatalf("retention.ms synonyms:\n%s\nwant\n%s", got, want)
	}
	if got := synonymsText(topic()["segment.ms"]); got != "segment.ms=600000(DYNAMIC_TOPIC_CONFIG) log.roll.ms=604800000(DEFAULT_CONFIG) " {
		t.Fatalf("segment.ms synonyms: %s", got)
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := brokers.On("1", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker 1: %v %v", err, rc.Err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key != "log.retention.ms" {
			continue
		}
		want := "log.retention.ms=4000000(DYNAMIC_BROKER_CONFIG) log.retention.ms=2000000(DYNAMIC_DEFAULT_BROKER_CONFIG) log.retention.ms=3000000(STATIC_BROKER_CONFIG) log.retention.ms=604800000(DEFAULT_CONFIG) "
		if got := synonymsText(cfg); got != want || cfg.Source != kmsg.ConfigSourceDynamicBrokerConfig {
			t.Fatalf("broker 1 log.retention.ms from %v, synonyms:\n%s\nwant\n%s", cfg.Source, got, want)
		}
	}

	// validate_only: nothing changes.
	set := []kadm.AlterConfig{{Name: "min.insync.replicas", Value: kadm.StringPtr("2")}}
	if res, err := adm.ValidateAlterTopicConfigsState(ctx, set, "syn"); err != nil || res[0].Err != nil {
		t.Fatalf("validate whole set: %v %v", err, res)
	}
	if cfg := topic()["retention.ms"]; cfg.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms from %v after validate_only, want still the topic's", cfg.Source)
	}
	// The whole set: retention.ms and segment.ms are no longer overrides.
	if res, err := adm.AlterTopicConfigsState(ctx, set, "syn"); err != nil || res[0].Err != nil {
		t.Fatalf("alter whole set: %v %v", err, res)
	}
	cfgs := topic()
	if cfg := cfgs["min.insync.replicas"]; cfg.MaybeValue() != "2" || cfg.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("min.insync.replicas = %q from %v, want 2 from the topic", cfg.MaybeValue(), cfg.Source)
	}
	for _, k := range []string{"retention.ms", "segment.ms"} {
		if cfgs[k].Source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Fatalf("%s still a topic override after a whole set without it", k)
		}
	}
	// A bad value in the set fails the whole set: nothing is removed.
	bad := []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1")}, {Name: "min.insync.replicas", Value: kadm.StringPtr("zero")}}
	if res, err := adm.AlterTopicConfigsState(ctx, bad, "syn"); err != nil || res[0].Err == nil {
		t.Fatalf("a bad whole set: %v %v, want INVALID_CONFIG", err, res)
	}
	if cfg := topic()["min.insync.replicas"]; cfg.MaybeValue() != "2" {
		t.Fatalf("min.insync.replicas = %q after a refused whole set, want 2", cfg.MaybeValue())
	}
}
