package grpcserver

import (
	"flag"
	"log/slog"
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/connlimit"
	"tidemark.io/services/platform/logging"
)

// Limits bound what one client may hold open on a server.
type Limits struct {
	// MaxConcurrentStreams is max.concurrent.streams.per.connection: calls
	// one connection may have in flight (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS;
	// a well-behaved client queues the rest, a stream over it is refused).
	MaxConcurrentStreams uint32
	// MaxConnectionsPerIP is Kafka's max.connections.per.ip; 0 is no limit.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides is Kafka's max.connections.per.ip.overrides,
	// "ip:limit,..." (see connlimit.ParseOverrides).
	MaxConnectionsPerIPOverrides string
}

// DefaultLimits are generous enough for a cluster's own links, tests and
// benchmarks from one host, and still bound a runaway client.
func DefaultLimits() Limits {
	return Limits{MaxConcurrentStreams: 1000, MaxConnectionsPerIP: 1000}
}

// AddFlags registers the limit flags (the same names on every binary).
func (l *Limits) AddFlags(fs *flag.FlagSet) {
	fs.Func("max.concurrent.streams.per.connection", "calls one client connection may have in flight (default "+strconv.Itoa(int(l.MaxConcurrentStreams))+")", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return err
		}
		l.MaxConcurrentStreams = uint32(n)
		return nil
	})
	fs.IntVar(&l.MaxConnectionsPerIP, "max.connections.per.ip", l.MaxConnectionsPerIP, "connections one client address may hold open; 0 for no limit")
	fs.StringVar(&l.MaxConnectionsPerIPOverrides, "max.connections.per.ip.overrides", l.MaxConnectionsPerIPOverrides, "per-address connection limits, e.g. 10.0.0.7:5000,::1:100")
}

// Validate names the first limit that cannot work.
func (l Limits) Validate() error {
	if l.MaxConcurrentStreams < 1 {
		return config.Invalid("max.concurrent.streams.per.connection", l.MaxConcurrentStreams, "must be at least 1")
	}
	if l.MaxConnectionsPerIP < 0 {
		return config.Invalid("max.connections.per.ip", l.MaxConnectionsPerIP, "must be >= 0 (0: no limit)")
	}
	if _, err := connlimit.ParseOverrides(l.MaxConnectionsPerIPOverrides); err != nil {
		return config.Invalid("max.connections.per.ip.overrides", l.MaxConnectionsPerIPOverrides, "%v", err)
	}
	return nil
}

// limitListener applies the connection limits to lis, counting each
// refusal and logging it, at most once per connlimit.RefusedWarnEvery an
// address.
func limitListener(lis net.Listener, l Limits, log *slog.Logger, refused *prometheus.CounterVec) net.Listener {
	ov, err := connlimit.ParseOverrides(l.MaxConnectionsPerIPOverrides)
	if err != nil { // Validate refuses this before a server starts
		log.Error("ignoring max.connections.per.ip.overrides", "err", err)
	}
	warned := logging.NewLimiter(connlimit.RefusedWarnEvery)
	return connlimit.Wrap(lis, connlimit.Options{PerIP: l.MaxConnectionsPerIP, Overrides: ov,
		Refused: func(ip string, limit int) {
			if n, ok := warned.Allow(ip); ok {
				log.Warn("connection refused: max.connections.per.ip reached", "client", ip, "limit", limit, "unlogged_since_last_warning", n)
			}
			if refused != nil {
				refused.WithLabelValues("max.connections.per.ip").Inc()
			}
		}})
}
