package controller

import (
	"context"
	"flag"
	"math"
	"net"
	"strconv"
	"time"

	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
	"tidemark.io/services/platform/tlsconf"
	"tidemark.io/services/topicconfig"
)

// Config is everything a controller needs to start.
type Config struct {
	// ID identifies the controller among its peers (>= 0).
	ID int32
	// Listen is the gRPC listen address.
	Listen string
	// Advertised is the address brokers and clients dial; empty means the
	// bound listen address.
	Advertised string
	// Etcd locates the metadata store and says who the controller is to it.
	Etcd etcdconn.Options

	// SessionTTL is the lease of the <prefix>/controller key: how long a
	// dead or partitioned controller keeps the role (whole seconds). An
	// etcd watch silent for max(2 × this, metastore.DefaultWatchTimeout) is
	// presumed cut off and watched again on a new connection.
	SessionTTL time.Duration
	// BrokerSessionGrace is how long a broker whose BrokerSession broke has
	// to come back before it is declared dead; 0 waits for its lease.
	BrokerSessionGrace time.Duration
	// RequestTimeout bounds one control request to a broker and one etcd write.
	RequestTimeout time.Duration
	// RequestTimeoutMax is request.timeout.max.ms: the largest timeout_ms
	// an admin request may ask the controller to wait.
	RequestTimeoutMax time.Duration

	// The controller's static broker-level settings (Kafka reads them from
	// the controller broker's own config); dynamic broker configs in etcd
	// override them.
	AutoLeaderRebalance          bool
	LeaderImbalancePercentage    int32
	LeaderImbalanceCheckInterval time.Duration
	DefaultReplicationFactor     int32
	NumPartitions                int32
	// The shape of __consumer_offsets when this controller creates it.
	OffsetsTopicNumPartitions     int32
	OffsetsTopicReplicationFactor int32

	// Dialer, when set, replaces TCP dialing to brokers, for the control
	// connections and the fast-failover probe (tests route through a
	// network simulator). Not a flag.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// Listener, when set, is an already bound listener to serve on
	// instead of binding Listen (which should then name its address);
	// Start takes it over and closes it when the controller stops, or at
	// once when Start fails. A test
	// that picks the port passes one, so no other process can take the
	// port between the pick and the bind. Not a flag.
	Listener net.Listener

	// TLS secures the listener (mutual TLS) and the connections to
	// brokers. Its zero value is refused: choose certificates or Plaintext.
	TLS tlsconf.Options
	// Limits bound streams per connection and connections per client
	// address on the gRPC listener.
	Limits grpcserver.Limits

	// Authz is the ACL file and super users (--acl.file, --super.users).
	Authz authz.Config

	Log       logging.Options
	Telemetry telemetry.Options
}

// DefaultConfig returns the defaults for controller 1.
func DefaultConfig() Config {
	return Config{
		ID:                            1,
		Listen:                        "127.0.0.1:9190",
		Etcd:                          etcdconn.Defaults(),
		SessionTTL:                    3 * time.Second,
		BrokerSessionGrace:            500 * time.Millisecond,
		RequestTimeout:                5 * time.Second,
		RequestTimeoutMax:             5 * time.Minute,
		AutoLeaderRebalance:           true,
		LeaderImbalancePercentage:     10,
		LeaderImbalanceCheckInterval:  300 * time.Second,
		DefaultReplicationFactor:      1,
		NumPartitions:                 1,
		OffsetsTopicNumPartitions:     50,
		OffsetsTopicReplicationFactor: 3,
		Authz:                         authz.DefaultConfig(),
		Limits:                        grpcserver.DefaultLimits(),
		Log:                           logging.DefaultOptions(),
	}
}

// AddFlags registers the controller's flags on fs.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.Func("controller.id", "controller id, unique among controllers (default 1)", func(s string) error {
		return config.ParseInt32(s, &c.ID)
	})
	fs.StringVar(&c.Listen, "listen", c.Listen, "gRPC listen address (host:port)")
	fs.StringVar(&c.Advertised, "advertised.address", c.Advertised, "address brokers and clients dial; empty uses the listen address")
	c.Etcd.AddFlags(fs)
	config.DurationMs(fs, &c.SessionTTL, "controller.session.ttl.ms", "lease of the active controller's key: a dead controller is replaced after this (ms, whole seconds)")
	config.DurationMs(fs, &c.BrokerSessionGrace, "broker.session.grace.ms", "time a broker whose session stream broke has to reconnect or answer a health check before it is declared dead (ms); 0 waits for its lease")
	config.DurationMs(fs, &c.RequestTimeout, "controller.request.timeout.ms", "timeout of one control request to a broker and of one etcd write (ms)")
	config.DurationMs(fs, &c.RequestTimeoutMax, "request.timeout.max.ms", "largest timeout_ms an admin request may ask for (ms)")
	fs.BoolVar(&c.AutoLeaderRebalance, "auto.leader.rebalance.enable", c.AutoLeaderRebalance, "move leadership back to preferred replicas when brokers are imbalanced")
	fs.Func("leader.imbalance.per.broker.percentage", "imbalance above which a broker's preferred partitions are rebalanced (default 10)", func(s string) error {
		return config.ParseInt32(s, &c.LeaderImbalancePercentage)
	})
	fs.Func("leader.imbalance.check.interval.seconds", "how often leader imbalance is checked (default 300)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		c.LeaderImbalanceCheckInterval = time.Duration(n) * time.Second
		return err
	})
	fs.Func("default.replication.factor", "replication factor of topics created without one (default 1)", func(s string) error {
		return config.ParseInt32(s, &c.DefaultReplicationFactor)
	})
	fs.Func("num.partitions", "partition count of topics created without one (default 1)", func(s string) error {
		return config.ParseInt32(s, &c.NumPartitions)
	})
	fs.Func("offsets.topic.num.partitions", "partitions of __consumer_offsets when it is created (default 50)", func(s string) error {
		return config.ParseInt32(s, &c.OffsetsTopicNumPartitions)
	})
	fs.Func("offsets.topic.replication.factor", "replication factor of __consumer_offsets, capped at the live brokers (default 3)", func(s string) error {
		return config.ParseInt32(s, &c.OffsetsTopicReplicationFactor)
	})
	c.TLS.AddFlags(fs)
	c.Authz.AddFlags(fs)
	c.Limits.AddFlags(fs)
	c.Log.AddFlags(fs)
	c.Telemetry.AddFlags(fs)
}

// Validate names the first flag whose value cannot work.
func (c Config) Validate() error {
	if c.ID < 0 {
		return config.Invalid("controller.id", c.ID, "must be >= 0")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return config.Invalid("listen", c.Listen, "must be host:port")
	}
	if c.Advertised != "" {
		if _, _, err := net.SplitHostPort(c.Advertised); err != nil {
			return config.Invalid("advertised.address", c.Advertised, "must be host:port")
		}
	}
	if err := c.Etcd.Validate(); err != nil {
		return err
	}
	if c.SessionTTL < time.Second {
		return config.Invalid("controller.session.ttl.ms", c.SessionTTL.Milliseconds(), "must be >= 1000 (etcd leases are whole seconds)")
	}
	if c.BrokerSessionGrace < 0 || c.BrokerSessionGrace > time.Minute {
		return config.Invalid("broker.session.grace.ms", c.BrokerSessionGrace.Milliseconds(), "must be 0..60000")
	}
	if c.RequestTimeoutMax < time.Millisecond || c.RequestTimeoutMax > math.MaxInt32*time.Millisecond {
		return config.Invalid("request.timeout.max.ms", c.RequestTimeoutMax.Milliseconds(), "must be in [1, 2147483647]")
	}
	if c.RequestTimeout < 100*time.Millisecond {
		return config.Invalid("controller.request.timeout.ms", c.RequestTimeout.Milliseconds(), "must be >= 100")
	}
	for _, kv := range []struct{ flag, key, val string }{
		{"leader.imbalance.per.broker.percentage", "leader.imbalance.per.broker.percentage", strconv.Itoa(int(c.LeaderImbalancePercentage))},
		{"leader.imbalance.check.interval.seconds", "leader.imbalance.check.interval.seconds", strconv.FormatInt(int64(c.LeaderImbalanceCheckInterval/time.Second), 10)},
		{"default.replication.factor", "default.replication.factor", strconv.Itoa(int(c.DefaultReplicationFactor))},
		{"num.partitions", "num.partitions", strconv.Itoa(int(c.NumPartitions))},
		{"offsets.topic.num.partitions", "offsets.topic.num.partitions", strconv.Itoa(int(c.OffsetsTopicNumPartitions))},
		{"offsets.topic.replication.factor", "offsets.topic.replication.factor", strconv.Itoa(int(c.OffsetsTopicReplicationFactor))},
	} {
		if err := topicconfig.Validate(topicconfig.ScopeBroker, kv.key, kv.val); err != nil {
			return config.Invalid(kv.flag, kv.val, "%v", err)
		}
	}
	if c.LeaderImbalanceCheckInterval%time.Second != 0 {
		return config.Invalid("leader.imbalance.check.interval.seconds", c.LeaderImbalanceCheckInterval, "must be whole seconds")
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if err := c.Authz.Validate(); err != nil {
		return err
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	return c.Log.Validate()
}

// staticBroker is the controller's static broker-level layer, in the
// registry's keys.
func (c Config) staticBroker() map[string]string {
	return map[string]string{
		"auto.leader.rebalance.enable":            strconv.FormatBool(c.AutoLeaderRebalance),
		"leader.imbalance.per.broker.percentage":  strconv.Itoa(int(c.LeaderImbalancePercentage)),
		"leader.imbalance.check.interval.seconds": strconv.FormatInt(int64(c.LeaderImbalanceCheckInterval/time.Second), 10),
		"default.replication.factor":              strconv.Itoa(int(c.DefaultReplicationFactor)),
		"num.partitions":                          strconv.Itoa(int(c.NumPartitions)),
		"offsets.topic.num.partitions":            strconv.Itoa(int(c.OffsetsTopicNumPartitions)),
		"offsets.topic.replication.factor":        strconv.Itoa(int(c.OffsetsTopicReplicationFactor)),
	}
}
