package broker_test

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/tlsconf"
)

// secured has certificates configured (KafkaListenerSpecs does not open
// them): TLS is on.
var secured = tlsconf.Options{CA: "ca.pem", Cert: "b.pem", Key: "b.key"}

// Named listeners parse from flags and TIDEMARK_* variables as Kafka's
// listeners, advertised.listeners and listener.security.protocol.map do;
// a listener not advertised advertises its bound address, and one the map
// leaves out speaks TLS while certificates are configured.
func TestNamedKafkaListenersParse(t *testing.T) {
	cfg := broker.DefaultConfig()
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs)
	env := map[string]string{
		"TIDEMARK_KAFKA_LISTENERS":                      "internal://0.0.0.0:19092, EXTERNAL://0.0.0.0:9092, ADMIN://127.0.0.1:9093",
		"TIDEMARK_KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
	}
	err := config.Parse(fs, []string{"--kafka.advertised.listeners=INTERNAL://kafka1:19092,EXTERNAL://localhost:9092"},
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS = secured
	specs, err := cfg.KafkaListenerSpecs()
	if err != nil {
		t.Fatal(err)
	}
	want := []broker.KafkaListenerSpec{
		{Name: "INTERNAL", Listen: "0.0.0.0:19092", Advertised: "kafka1:19092", Protocol: broker.ProtocolPlaintext},
		{Name: "EXTERNAL", Listen: "0.0.0.0:9092", Advertised: "localhost:9092", Protocol: broker.ProtocolSSL},
		{Name: "ADMIN", Listen: "127.0.0.1:9093", Protocol: broker.ProtocolSSL},
	}
	if !reflect.DeepEqual(specs, want) {
		t.Fatalf("specs\n got %+v\nwant %+v", specs, want)
	}

	// Under --plaintext an unmapped listener is plain text.
	plain := broker.DefaultConfig()
	plain.TLS = tlsconf.Plain()
	plain.KafkaListeners = config.StringList{"A://:1", "B://:2"}
	if specs, err := plain.KafkaListenerSpecs(); err != nil || specs[0].Protocol != broker.ProtocolPlaintext || specs[1].Protocol != broker.ProtocolPlaintext {
		t.Fatalf("plaintext broker: %+v %v", specs, err)
	}
}

// --kafka.listen is one listener named after its protocol, as Kafka names
// its default listener: SSL with certificates, PLAINTEXT under --plaintext.
// SASL listeners: named after their protocol they need no map entry; any
// other name is mapped; SASL_PLAINTEXT works under --plaintext too.
func TestSASLKafkaListenersParse(t *testing.T) {
	for _, tls := range []tlsconf.Options{secured, tlsconf.Plain()} {
		c := broker.DefaultConfig()
		c.TLS = tls
		c.KafkaListeners = config.StringList{"SASL_PLAINTEXT://:9094", "USERS://:9095"}
		c.KafkaProtocolMap = config.StringList{"USERS:SASL_PLAINTEXT"}
		if !tls.Plaintext {
			c.KafkaListeners = append(c.KafkaListeners, "SASL_SSL://:9096", "SECURE_USERS://:9097")
			c.KafkaProtocolMap = append(c.KafkaProtocolMap, "SECURE_USERS:SASL_SSL")
		}
		specs, err := c.KafkaListenerSpecs()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			want := broker.ProtocolSASLPlaintext
			if s.Name == "SASL_SSL" || s.Name == "SECURE_USERS" {
				want = broker.ProtocolSASLSSL
			}
			if s.Protocol != want {
				t.Errorf("plaintext=%v: %s speaks %s, want %s", tls.Plaintext, s.Name, s.Protocol, want)
			}
		}
	}
}

func TestKafkaListenIsOneListenerNamedAfterItsProtocol(t *testing.T) {
	for _, tc := range []struct {
		tls  tlsconf.Options
		name string
	}{{secured, "SSL"}, {tlsconf.Plain(), "PLAINTEXT"}} {
		c := broker.DefaultConfig()
		c.TLS, c.KafkaListen, c.KafkaAdvertised = tc.tls, "127.0.0.1:9092", "b1:9092"
		specs, err := c.KafkaListenerSpecs()
		want := []broker.KafkaListenerSpec{{Name: tc.name, Listen: "127.0.0.1:9092", Advertised: "b1:9092", Protocol: tc.name}}
		if err != nil || !reflect.DeepEqual(specs, want) {
			t.Errorf("plaintext=%v: %+v %v, want %+v", tc.tls.Plaintext, specs, err, want)
		}
	}
}

// Every listener setting that cannot work is refused, naming the flag and
// the value at fault.
func TestBadKafkaListenersAreNamed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mod       func(*broker.Config)
		flag, has string
	}{
		{"both forms", func(c *broker.Config) { c.KafkaListen, c.KafkaListeners = ":9092", config.StringList{"A://:1"} },
			"kafka.listen", "--kafka.listeners"},
		{"shorthand advertised with named", func(c *broker.Config) { c.KafkaListeners, c.KafkaAdvertised = config.StringList{"A://:1"}, "h:1" },
			"kafka.advertised.address", "--kafka.advertised.listeners"},
		{"advertised listeners without listeners", func(c *broker.Config) { c.KafkaListen, c.KafkaAdvertisedListeners = ":1", config.StringList{"A://h:1"} },
			"kafka.advertised.listeners", "--kafka.listeners"},
		{"map without listeners", func(c *broker.Config) { c.KafkaProtocolMap = config.StringList{"A:SSL"} },
			"kafka.listener.security.protocol.map", "--kafka.listeners"},
		{"no scheme", func(c *broker.Config) { c.KafkaListeners = config.StringList{"0.0.0.0:9092"} },
			"kafka.listeners", "0.0.0.0:9092"},
		{"bad host:port", func(c *broker.Config) { c.KafkaListeners = config.StringList{"A://9092"} },
			"kafka.listeners", "A://9092"},
		{"bad name", func(c *broker.Config) { c.KafkaListeners = config.StringList{"A B://:1"} },
			"kafka.listeners", "A B://:1"},
		{"duplicate name", func(c *broker.Config) { c.KafkaListeners = config.StringList{"A://:1", "a://:2"} },
			"kafka.listeners", "listener A is named twice"},
		{"duplicate port", func(c *broker.Config) { c.KafkaListeners = config.StringList{"A://h1:9092", "B://h2:9092"} },
			"kafka.listeners", "port 9092"},
		{"advertised unknown", func(c *broker.Config) {
			c.KafkaListeners, c.KafkaAdvertisedListeners = config.StringList{"A://:1"}, config.StringList{"B://h:1"}
		}, "kafka.advertised.listeners", "B://h:1"},
		{"advertised twice", func(c *broker.Config) {
			c.KafkaListeners, c.KafkaAdvertisedListeners = config.StringList{"A://:1"}, config.StringList{"A://h:1", "A://g:1"}
		}, "kafka.advertised.listeners", "advertised twice"},
		{"advertised meta-address", func(c *broker.Config) {
			c.KafkaListeners, c.KafkaAdvertisedListeners = config.StringList{"A://:1"}, config.StringList{"A://0.0.0.0:1"}
		}, "kafka.advertised.listeners", "A://0.0.0.0:1"},
		{"advertised bad host:port", func(c *broker.Config) {
			c.KafkaListeners, c.KafkaAdvertisedListeners = config.StringList{"A://:1"}, config.StringList{"A://h"}
		}, "kafka.advertised.listeners", "A://h"},
		{"unknown protocol", func(c *broker.Config) {
			c.KafkaListeners, c.KafkaProtocolMap = config.StringList{"A://:1"}, config.StringList{"A:TLS"}
		}, "kafka.listener.security.protocol.map", "A:TLS"},
		{"SASL_SSL under --plaintext", func(c *broker.Config) {
			c.TLS = tlsconf.Plain()
			c.KafkaListeners, c.KafkaProtocolMap = config.StringList{"A://:1"}, config.StringList{"A:SASL_SSL"}
		}, "kafka.listener.security.protocol.map", "SASL_SSL listener needs the broker's certificates"},
		{"map entry without protocol", func(c *broker.Config) {
			c.KafkaListeners, c.KafkaProtocolMap = config.StringList{"A://:1"}, config.StringList{"A"}
		}, "kafka.listener.security.protocol.map", "NAME:PROTOCOL"},
		{"mapped twice", func(c *broker.Config) {
			c.KafkaListeners, c.KafkaProtocolMap = config.StringList{"A://:1"}, config.StringList{"A:SSL", "a:PLAINTEXT"}
		}, "kafka.listener.security.protocol.map", "mapped twice"},
		{"PLAINTEXT-named listener speaking TLS", func(c *broker.Config) { c.KafkaListeners = config.StringList{"PLAINTEXT://:1"} },
			"kafka.listeners", "PLAINTEXT:PLAINTEXT"},
		{"SASL_SSL-named listener under --plaintext", func(c *broker.Config) {
			c.TLS = tlsconf.Plain()
			c.KafkaListeners = config.StringList{"SASL_SSL://:1"}
		}, "kafka.listeners", "SASL_SSL needs the broker's certificates"},
		{"unknown SASL mechanism", func(c *broker.Config) {
			c.KafkaListeners, c.SASLMechanisms = config.StringList{"SASL_PLAINTEXT://:1"}, config.StringList{"GSSAPI"}
		}, "sasl.enabled.mechanisms", "GSSAPI"},
		{"SSL listener under --plaintext", func(c *broker.Config) {
			c.TLS = tlsconf.Plain()
			c.KafkaListeners, c.KafkaProtocolMap = config.StringList{"A://:1"}, config.StringList{"A:SSL"}
		}, "kafka.listener.security.protocol.map", "--plaintext"},
		{"SSL-named listener under --plaintext", func(c *broker.Config) {
			c.TLS = tlsconf.Plain()
			c.KafkaListeners = config.StringList{"SSL://:1"}
		}, "kafka.listeners", "SSL:SSL"},
	} {
		c := broker.DefaultConfig()
		c.TLS = secured
		tc.mod(&c)
		_, err := c.KafkaListenerSpecs()
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Flag != tc.flag || !strings.Contains(err.Error(), tc.has) {
			t.Errorf("%s: %v; want an error naming --%s and %q", tc.name, err, tc.flag, tc.has)
		}
		// Validate checks the listeners before the certificate files.
		if err := c.Validate(); !errors.As(err, &ce) || ce.Flag != tc.flag {
			t.Errorf("%s: Validate = %v; want an error naming --%s", tc.name, err, tc.flag)
		}
	}
}
