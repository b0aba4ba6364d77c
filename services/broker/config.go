package broker

import (
	"context"
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"tidemark.io/services/broker/internal/kafkaapi"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
	"tidemark.io/services/platform/tlsconf"
	"tidemark.io/services/topicconfig"
)

// Config is everything a broker needs to start. DefaultConfig gives a broker
// that works on one machine next to an etcd on 127.0.0.1:2379.
type Config struct {
	// ID is the broker id (broker.id), unique in the cluster, >= 0.
	ID int32
	// Listen is the gRPC listen address.
	Listen string
	// Advertised is the address other nodes and clients dial; empty means
	// the bound listen address.
	Advertised string
	// KafkaListen is the Kafka wire protocol listener's address; empty: no
	// Kafka listener.
	KafkaListen string
	// KafkaAdvertised is the address Kafka clients are told to dial (in
	// Metadata); empty means the bound Kafka listen address.
	KafkaAdvertised string
	// KafkaListeners are named Kafka listeners, NAME://host:port each
	// (Kafka's listeners), in place of KafkaListen.
	KafkaListeners config.StringList
	// KafkaAdvertisedListeners give listeners the address their clients
	// are told (Kafka's advertised.listeners), NAME://host:port each; a
	// listener left out advertises its bound address.
	KafkaAdvertisedListeners config.StringList
	// KafkaProtocolMap maps listener names to PLAINTEXT or SSL (Kafka's
	// listener.security.protocol.map); a listener left out follows
	// TLS.Plaintext.
	KafkaProtocolMap config.StringList
	// SASLMechanisms are the mechanisms the SASL listeners offer (Kafka's
	// sasl.enabled.mechanisms); empty: kafkaapi.DefaultSASLMechanisms.
	SASLMechanisms config.StringList
	// SASLTimeout bounds a SASL listener's login (0: the default).
	SASLTimeout time.Duration
	// SASLMaxReauth is Kafka's connections.max.reauth.ms: how long a SASL
	// login lasts before the client must re-authenticate on its
	// connection (0: forever, Kafka's default).
	SASLMaxReauth time.Duration
	// KafkaLimits bound requests and connections on the Kafka listener.
	KafkaLimits kafkaapi.Limits
	// Rack is the broker's rack (broker.rack), for rack-aware placement and
	// follower fetching.
	Rack string
	// DataDir holds meta.properties and, unless LogDirs is set, the
	// partition logs and checkpoints.
	DataDir string
	// LogDirs (Kafka's log.dirs) are the directories partition logs live
	// in, each with its own checkpoints; a disk error takes one offline
	// while the others serve. Empty: DataDir alone.
	LogDirs config.StringList
	// LogDirsReplaced are log dirs whose disk was replaced: formatted
	// before and now found empty, they are put in service again instead of
	// staying offline (see logdirsformat.go).
	LogDirsReplaced config.StringList
	// Etcd locates the metadata store and says who the broker is to it;
	// no endpoints runs the broker alone (tests).
	Etcd etcdconn.Options
	// FaultInjection enables the FaultInjectionService (off by default).
	FaultInjection bool
	// Settings are static broker configs (Kafka's server.properties), e.g.
	// replica.lag.time.max.ms; dynamic ones from the controller win.
	Settings map[string]string
	// SessionTimeout is broker.session.timeout.ms: the lease of the
	// broker's registration in etcd. An etcd watch silent for max(2 × this,
	// metastore.DefaultWatchTimeout) is presumed cut off and watched again
	// on a new connection.
	SessionTimeout time.Duration
	// Dialer, when set, replaces TCP dialing to peers (tests route through
	// a network simulator). Not a flag.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// Listener and KafkaListener, when set, are already bound listeners
	// to serve on instead of binding Listen and KafkaListen (which should
	// then name their addresses); Start takes them over and closes them
	// when the broker stops, or at once when Start fails. A test that picks the port passes one, so no
	// other process can take the port between the pick and the bind. Not
	// flags.
	Listener      net.Listener
	KafkaListener net.Listener
	// KafkaNamedListeners are bound sockets of KafkaListeners by name, as
	// KafkaListener is for KafkaListen: taken over by Start, so a restart
	// needs new ones (or none: Start binds the addresses). Not a flag.
	KafkaNamedListeners map[string]net.Listener

	// TLS secures every link: the listener (mutual TLS: callers must show a
	// certificate the CA signed) and the connections to peers and
	// controllers. Its zero value is refused: choose certificates or
	// Plaintext.
	TLS tlsconf.Options
	// Limits bound streams per connection and connections per client
	// address on the gRPC listener.
	Limits grpcserver.Limits
	// MaxQueuedAnswerBytes is max.queued.answer.bytes.per.connection: the
	// bytes of fetch answers one gRPC connection may hold queued and not
	// yet written (grpcserver.Options.AnswerBytesPerConnection).
	MaxQueuedAnswerBytes int

	// Authz is the ACL file and super users (--acl.file, --super.users).
	Authz authz.Config

	Log       logging.Options
	Telemetry telemetry.Options
}

// DefaultConfig returns the defaults for broker 1.
// DefaultGCPercent is the broker's --gc.percent: the garbage collector lets
// the heap grow 400 % over the live data (Go's default is 100). On the dev
// cluster a leader at 80k records/s of 1 KiB collected several times a
// second, each time taking its one core for about half a millisecond; at
// 400 the synchronous producer's p99 fell from 1.15-1.61 ms to 0.98-1.02 ms
// and the peak resident memory rose from 36 to 54 MB.
const DefaultGCPercent = 400

func DefaultConfig() Config {
	return Config{
		ID:                   1,
		Listen:               "127.0.0.1:9092",
		DataDir:              ".data/broker-1",
		Etcd:                 etcdconn.Defaults(),
		SessionTimeout:       6 * time.Second,
		Settings:             map[string]string{},
		Authz:                authz.DefaultConfig(),
		Limits:               grpcserver.DefaultLimits(),
		MaxQueuedAnswerBytes: grpcserver.DefaultAnswerBytesPerConnection,
		KafkaLimits:          kafkaapi.DefaultLimits(),
		SASLTimeout:          kafkaapi.DefaultSASLTimeout,
		Log:                  logging.DefaultOptions(),
	}
}

// AddFlags registers the broker's flags on fs.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.Func("broker.id", "broker id, unique in the cluster (default 1)", func(s string) error {
		return config.ParseInt32(s, &c.ID)
	})
	fs.StringVar(&c.Listen, "listen", c.Listen, "gRPC listen address (host:port)")
	fs.StringVar(&c.Advertised, "advertised.address", c.Advertised, "address other nodes dial; empty uses the listen address")
	fs.StringVar(&c.KafkaListen, "kafka.listen", c.KafkaListen, "Kafka wire protocol listen address (host:port): one listener, named SSL (or PLAINTEXT with --plaintext); empty: none unless --kafka.listeners")
	fs.StringVar(&c.KafkaAdvertised, "kafka.advertised.address", c.KafkaAdvertised, "address Kafka clients of --kafka.listen are told to dial; empty uses the Kafka listen address")
	fs.Var(&c.KafkaListeners, "kafka.listeners", "named Kafka listeners (Kafka's listeners), comma-separated NAME://host:port, e.g. INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092; clients are told each broker's address on the listener they arrived on; not with --kafka.listen")
	fs.Var(&c.KafkaAdvertisedListeners, "kafka.advertised.listeners", "addresses clients of each named listener are told to dial (Kafka's advertised.listeners), comma-separated NAME://host:port; a listener left out advertises its bound address")
	fs.Var(&c.KafkaProtocolMap, "kafka.listener.security.protocol.map", "each named listener's protocol (Kafka's listener.security.protocol.map), comma-separated NAME:PROTOCOL with PLAINTEXT, SSL (TLS with client certificates), SASL_PLAINTEXT or SASL_SSL (user name and password, without TLS or over TLS without client certificates); a listener left out is SSL, or PLAINTEXT under --plaintext, or SASL_PLAINTEXT/SASL_SSL when so named: plain text only where this map or --plaintext says so")
	fs.Var(&c.SASLMechanisms, "sasl.enabled.mechanisms", "mechanisms the SASL listeners offer (Kafka's sasl.enabled.mechanisms), comma-separated SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (default SCRAM-SHA-256,SCRAM-SHA-512: PLAIN sends the password itself, in clear text on SASL_PLAINTEXT, and makes the broker derive a key for each attempt)")
	config.DurationMs(fs, &c.SASLTimeout, "kafka.sasl.authentication.timeout.ms", "close a SASL listener's connection that has not logged in this long after connecting")
	config.DurationMs(fs, &c.SASLMaxReauth, "kafka.connections.max.reauth.ms", "how long a SASL login lasts (Kafka's connections.max.reauth.ms): the client re-authenticates on its connection before then, and a connection that sends any other request after it is closed, so a deleted or re-passworded user loses its open connections within this time; 0 (Kafka's default): a login lasts as long as its connection")
	c.KafkaLimits.AddFlags(fs)
	fs.StringVar(&c.Rack, "broker.rack", c.Rack, "rack id for rack-aware placement and follower fetching")
	fs.StringVar(&c.DataDir, "data.dir", c.DataDir, "directory for meta.properties and, without --log.dirs, partition logs and checkpoints")
	fs.Var(&c.LogDirs, "log.dirs", "comma-separated directories for partition logs (Kafka's log.dirs), e.g. one per disk; empty: --data.dir")
	fs.Var(&c.LogDirsReplaced, "log.dirs.replaced", "log dirs on replaced disks: a log dir this broker formatted and now finds empty stays offline (an unmounted disk) unless listed here")
	c.Etcd.AddFlags(fs)
	fs.Func("config", "a static broker config as key=value, repeatable, e.g. --config replica.lag.time.max.ms=10000", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", s)
		}
		if c.Settings == nil {
			c.Settings = map[string]string{}
		}
		c.Settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
		return nil
	})
	config.DurationMs(fs, &c.SessionTimeout, "broker.session.timeout.ms", "lease of the broker's registration: how long a silent broker stays registered")
	fs.BoolVar(&c.FaultInjection, "fault.injection.enable", c.FaultInjection, "serve the fault-injection API (demonstrations and tests only)")
	c.TLS.AddFlags(fs)
	c.Authz.AddFlags(fs)
	c.Limits.AddFlags(fs)
	fs.IntVar(&c.MaxQueuedAnswerBytes, "max.queued.answer.bytes.per.connection", c.MaxQueuedAnswerBytes, "bytes of fetch answers one gRPC connection may hold queued and not yet read by its client; a fetch over it waits for its client to read, then answers what fits")
	c.Log.AddFlags(fs)
	c.Telemetry.AddFlags(fs)
}

// Validate names the first flag whose value cannot work.
func (c Config) Validate() error {
	if c.ID < 0 {
		return config.Invalid("broker.id", c.ID, "must be >= 0")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return config.Invalid("listen", c.Listen, "must be host:port")
	}
	if c.Advertised != "" {
		if _, _, err := net.SplitHostPort(c.Advertised); err != nil {
			return config.Invalid("advertised.address", c.Advertised, "must be host:port")
		}
	}
	if specs, err := c.KafkaListenerSpecs(); err != nil {
		return err
	} else if len(specs) > 0 {
		if err := c.KafkaLimits.Validate(); err != nil {
			return err
		}
	}
	if c.DataDir == "" {
		return config.Invalid("data.dir", c.DataDir, "must not be empty")
	}
	for i, d := range c.LogDirs {
		if d == "" || slices.Contains(c.LogDirs[:i], d) {
			return config.Invalid("log.dirs", c.LogDirs.String(), "needs distinct, non-empty directories")
		}
	}
	for _, d := range c.LogDirsReplaced {
		if !slices.Contains(c.logDirs(), d) {
			return config.Invalid("log.dirs.replaced", c.LogDirsReplaced.String(), "%s is not one of the log dirs %v", d, c.logDirs())
		}
	}
	if len(c.Etcd.Endpoints) > 0 {
		if err := c.Etcd.Validate(); err != nil {
			return err
		}
	}
	if c.SessionTimeout < time.Second {
		return config.Invalid("broker.session.timeout.ms", c.SessionTimeout.Milliseconds(), "must be at least 1000 (etcd leases are whole seconds)")
	}
	for k, v := range c.Settings {
		if err := topicconfig.Validate(topicconfig.ScopeBroker, k, v); err != nil {
			return config.Invalid("config", k+"="+v, "%v", err)
		}
	}
	if _, err := topicconfig.ResolveBroker(c.Settings); err != nil {
		return config.Invalid("config", c.Settings, "%v", err)
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if err := c.Authz.Validate(); err != nil {
		return err
	}
	if c.MaxQueuedAnswerBytes < 1024 {
		return config.Invalid("max.queued.answer.bytes.per.connection", c.MaxQueuedAnswerBytes, "must be at least 1024")
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	return c.Log.Validate()
}

// logDirs are the directories partition logs live in.
func (c Config) logDirs() []string {
	if len(c.LogDirs) == 0 {
		return []string{c.DataDir}
	}
	return c.LogDirs
}
