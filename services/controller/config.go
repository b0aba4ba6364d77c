package controller

import (
	"flag"
	"net"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
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
	// EtcdEndpoints and EtcdPrefix locate the metadata store.
	EtcdEndpoints config.StringList
	EtcdPrefix    string

	Log       logging.Options
	Telemetry telemetry.Options
}

// DefaultConfig returns the defaults for controller 1.
func DefaultConfig() Config {
	return Config{
		ID:            1,
		Listen:        "127.0.0.1:9190",
		EtcdEndpoints: config.StringList{"127.0.0.1:2379"},
		EtcdPrefix:    "/tidemark",
		Log:           logging.DefaultOptions(),
	}
}

// AddFlags registers the controller's flags on fs.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.Func("controller.id", "controller id, unique among controllers (default 1)", func(s string) error {
		return config.ParseInt32(s, &c.ID)
	})
	fs.StringVar(&c.Listen, "listen", c.Listen, "gRPC listen address (host:port)")
	fs.StringVar(&c.Advertised, "advertised.address", c.Advertised, "address brokers and clients dial; empty uses the listen address")
	fs.Var(&c.EtcdEndpoints, "etcd.endpoints", "comma-separated etcd endpoints (default 127.0.0.1:2379)")
	fs.StringVar(&c.EtcdPrefix, "etcd.prefix", c.EtcdPrefix, "key prefix of tidemark's metadata in etcd")
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
	if len(c.EtcdEndpoints) == 0 {
		return config.Invalid("etcd.endpoints", "", "at least one endpoint is needed")
	}
	if c.EtcdPrefix == "" || c.EtcdPrefix[0] != '/' {
		return config.Invalid("etcd.prefix", c.EtcdPrefix, "must start with /")
	}
	return c.Log.Validate()
}
