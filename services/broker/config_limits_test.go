package broker_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

func TestLimitFlagsParseAndBadOnesAreNamed(t *testing.T) {
	cfg := broker.DefaultConfig()
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs)
	err := config.Parse(fs, []string{"--plaintext", "--max.connections.per.ip=7", "--max.connections.per.ip.overrides=::1:3",
		"--max.concurrent.streams.per.connection=50", "--max.queued.answer.bytes.per.connection=1048576",
		"--config=quota.producer.overrides=alice:1024"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Limits; l.MaxConnectionsPerIP != 7 || l.MaxConnectionsPerIPOverrides != "::1:3" || l.MaxConcurrentStreams != 50 {
		t.Fatalf("parsed limits %+v", l)
	}
	if cfg.MaxQueuedAnswerBytes != 1<<20 {
		t.Fatalf("parsed max.queued.answer.bytes.per.connection %d", cfg.MaxQueuedAnswerBytes)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for flagName, mod := range map[string]func(*broker.Config){
		"max.connections.per.ip.overrides":       func(c *broker.Config) { c.Limits.MaxConnectionsPerIPOverrides = "10.0.0.1" },
		"config":                                 func(c *broker.Config) { c.Settings["quota.consumer.overrides"] = "bob:-1" },
		"max.queued.answer.bytes.per.connection": func(c *broker.Config) { c.MaxQueuedAnswerBytes = 100 },
	} {
		c := broker.DefaultConfig()
		c.TLS = tlsconf.Plain()
		mod(&c)
		var ce *config.Error
		if err := c.Validate(); !errors.As(err, &ce) || ce.Flag != flagName {
			t.Errorf("%s: Validate = %v; want an error naming --%s", flagName, err, flagName)
		}
	}
}

func TestKafkaListenerFlagsParseAndBadOnesAreNamed(t *testing.T) {
	cfg := broker.DefaultConfig()
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs)
	err := config.Parse(fs, []string{"--plaintext", "--kafka.listen=127.0.0.1:29092", "--kafka.advertised.address=broker-1:29092",
		"--kafka.socket.request.max.bytes=1048576", "--kafka.max.in.flight.requests.per.connection=8", "--kafka.connections.max.idle=1m",
		"--kafka.max.queued.answer.bytes=1048576"},
		func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.KafkaLimits; cfg.KafkaListen != "127.0.0.1:29092" || cfg.KafkaAdvertised != "broker-1:29092" ||
		l.MaxRequestBytes != 1<<20 || l.MaxInFlight != 8 || l.IdleTimeout.Minutes() != 1 || l.MaxQueuedAnswerBytes != 1<<20 {
		t.Fatalf("parsed %q %q %+v", cfg.KafkaListen, cfg.KafkaAdvertised, l)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for flagName, mod := range map[string]func(*broker.Config){
		"kafka.listen":                   func(c *broker.Config) { c.KafkaListen = "29092" },
		"kafka.advertised.address":       func(c *broker.Config) { c.KafkaListen, c.KafkaAdvertised = "", "b:1" },
		"kafka.socket.request.max.bytes": func(c *broker.Config) { c.KafkaListen, c.KafkaLimits.MaxRequestBytes = ":1", 10 },
		"kafka.connections.max.idle":     func(c *broker.Config) { c.KafkaListen, c.KafkaLimits.IdleTimeout = ":1", 1 },
		"kafka.max.queued.answer.bytes":  func(c *broker.Config) { c.KafkaListen, c.KafkaLimits.MaxQueuedAnswerBytes = ":1", 100 },
	} {
		c := broker.DefaultConfig()
		c.TLS = tlsconf.Plain()
		mod(&c)
		var ce *config.Error
		if err := c.Validate(); !errors.As(err, &ce) || ce.Flag != flagName {
			t.Errorf("%s: Validate = %v; want an error naming --%s", flagName, err, flagName)
		}
	}
}

// --kafka.connections.max.reauth.ms (Kafka's connections.max.reauth.ms) is
// 0 by default, as in Kafka; milliseconds from a flag or the environment;
// a negative one is refused by name.
func TestKafkaMaxReauthFlag(t *testing.T) {
	parse := func(args []string, env map[string]string) (broker.Config, error) {
		cfg := broker.DefaultConfig()
		fs := flag.NewFlagSet("broker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.AddFlags(fs)
		return cfg, config.Parse(fs, args, func(k string) string { return env[k] })
	}
	if cfg, err := parse(nil, nil); err != nil || cfg.SASLMaxReauth != 0 {
		t.Fatalf("default: %v %v", cfg.SASLMaxReauth, err)
	}
	if cfg, err := parse([]string{"--kafka.connections.max.reauth.ms=3600000"}, nil); err != nil || cfg.SASLMaxReauth != time.Hour {
		t.Fatalf("flag: %v %v", cfg.SASLMaxReauth, err)
	}
	if cfg, err := parse(nil, map[string]string{"TIDEMARK_KAFKA_CONNECTIONS_MAX_REAUTH_MS": "2000"}); err != nil || cfg.SASLMaxReauth != 2*time.Second {
		t.Fatalf("environment: %v %v", cfg.SASLMaxReauth, err)
	}
	if _, err := parse([]string{"--kafka.connections.max.reauth.ms=-1"}, nil); err == nil || !strings.Contains(err.Error(), "kafka.connections.max.reauth.ms") {
		t.Fatalf("negative: %v", err)
	}
}
