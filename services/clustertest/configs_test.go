package clustertest

import (
	"context"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker"
)

// A broker's DescribeConfigs shows the values that broker runs with: its own
// startup flags (STATIC_BROKER_CONFIG, published in its registration) under
// the dynamic layers, not the controller's defaults. Broker 2 starts with
// replica.lag.time.max.ms=5000 and replica.truncation.mode=high-watermark;
// the others with neither.
func TestDescribeConfigsShowsEachBrokersStaticSettings(t *testing.T) {
	c := Start(t, Options{Adjust: func(cfg *broker.Config) {
		if cfg.ID == 2 {
			cfg.Settings = map[string]string{"replica.lag.time.max.ms": "5000", "replica.truncation.mode": "high-watermark"}
		}
	}})
	describe := func(name string) map[string]*adminv1.ConfigEntry {
		t.Helper()
		resp, err := c.Admin().DescribeConfigs(context.Background(), &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{
			{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: name}}})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetResults()[0]
		if r.GetErrorCode() != 0 {
			t.Fatalf("describe broker %q: %v %s", name, r.GetErrorCode(), r.GetErrorMessage())
		}
		out := map[string]*adminv1.ConfigEntry{}
		for _, e := range r.GetEntries() {
			out[e.GetName()] = e
		}
		return out
	}
	want := func(name string, entries map[string]*adminv1.ConfigEntry, key, value string, src adminv1.ConfigSource) {
		t.Helper()
		e := entries[key]
		if e.GetValue() != value || e.GetSource() != src {
			t.Errorf("broker %q %s = %q (%v), want %q (%v)", name, key, e.GetValue(), e.GetSource(), value, src)
		}
	}
	b2 := describe("2")
	want("2", b2, "replica.lag.time.max.ms", "5000", adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG)
	want("2", b2, "replica.truncation.mode", "high-watermark", adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG)
	b1 := describe("1")
	want("1", b1, "replica.lag.time.max.ms", "30000", adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT)
	want("1", b1, "replica.truncation.mode", "leader-epoch", adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT)
	// The cluster-wide default entity has no broker's static layer.
	want("", describe(""), "replica.lag.time.max.ms", "30000", adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT)

	// While broker 2 is down its last registration still answers; a restart
	// without the flags shows the defaults again.
	c.CrashBroker(2)
	want("2", describe("2"), "replica.lag.time.max.ms", "5000", adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG)
	c.mu.Lock()
	cfg := c.brokerCfg[2]
	cfg.Settings = map[string]string{}
	c.brokerCfg[2] = cfg
	c.mu.Unlock()
	c.StartBroker(2)
	c.WaitFor(20*time.Second, "broker 2's new registration without its flags described", func() bool {
		e := describe("2")["replica.lag.time.max.ms"]
		return e.GetValue() == "30000" && e.GetSource() == adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT
	})
}
