package controller

import (
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

func TestConfigFlagsAndValidation(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs)
	err := config.Parse(fs, []string{"--controller.id=2", "--controller.session.ttl.ms=2000", "--broker.session.grace.ms=0",
		"--leader.imbalance.check.interval.seconds=5", "--auto.leader.rebalance.enable=false", "--num.partitions=3", "--plaintext",
		"--max.connections.per.ip=5", "--max.connections.per.ip.overrides=10.0.0.7:50", "--max.concurrent.streams.per.connection=20", "--request.timeout.max.ms=60000"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ID != 2 || cfg.SessionTTL != 2*time.Second || cfg.BrokerSessionGrace != 0 ||
		cfg.LeaderImbalanceCheckInterval != 5*time.Second || cfg.AutoLeaderRebalance || cfg.NumPartitions != 3 ||
		cfg.Limits.MaxConnectionsPerIP != 5 || cfg.Limits.MaxConnectionsPerIPOverrides != "10.0.0.7:50" ||
		cfg.Limits.MaxConcurrentStreams != 20 || cfg.RequestTimeoutMax != time.Minute {
		t.Fatalf("parsed %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if s := cfg.staticBroker(); s["leader.imbalance.check.interval.seconds"] != "5" || s["auto.leader.rebalance.enable"] != "false" {
		t.Fatalf("static broker layer = %v", s)
	}

	for flagName, mod := range map[string]func(*Config){
		"controller.id":                           func(c *Config) { c.ID = -1 },
		"controller.session.ttl.ms":               func(c *Config) { c.SessionTTL = 500 * time.Millisecond },
		"broker.session.grace.ms":                 func(c *Config) { c.BrokerSessionGrace = -time.Millisecond },
		"controller.request.timeout.ms":           func(c *Config) { c.RequestTimeout = time.Millisecond },
		"leader.imbalance.per.broker.percentage":  func(c *Config) { c.LeaderImbalancePercentage = 101 },
		"leader.imbalance.check.interval.seconds": func(c *Config) { c.LeaderImbalanceCheckInterval = 0 },
		"default.replication.factor":              func(c *Config) { c.DefaultReplicationFactor = 0 },
		"num.partitions":                          func(c *Config) { c.NumPartitions = 0 },
		"etcd.tls.cert":                           func(c *Config) { c.Etcd.Cert = "/nonexistent.pem" },
		"etcd.tls.ca":                             func(c *Config) { c.Etcd.CA = "/nonexistent.pem" },
		"etcd.username":                           func(c *Config) { c.Etcd.Password = "x" },
		"etcd.prefix":                             func(c *Config) { c.Etcd.Prefix = "tidemark" },
		"tls.ca":                                  func(c *Config) { c.TLS = tlsconf.Options{} },
		"plaintext":                               func(c *Config) { c.TLS.CA = "ca.pem" },
		"request.timeout.max.ms":                  func(c *Config) { c.RequestTimeoutMax = 0 },
		"max.connections.per.ip":                  func(c *Config) { c.Limits.MaxConnectionsPerIP = -1 },
		"max.connections.per.ip.overrides":        func(c *Config) { c.Limits.MaxConnectionsPerIPOverrides = "host:1" },
		"max.concurrent.streams.per.connection":   func(c *Config) { c.Limits.MaxConcurrentStreams = 0 },
	} {
		c := DefaultConfig()
		c.TLS = tlsconf.Plain()
		mod(&c)
		var ce *config.Error
		if err := c.Validate(); !errors.As(err, &ce) || ce.Flag != flagName {
			t.Errorf("%s: Validate = %v; want an error naming --%s", flagName, err, flagName)
		}
	}
}
