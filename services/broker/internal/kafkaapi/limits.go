package kafkaapi

import (
	"flag"
	"time"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/connlimit"
)

// Limits bound what one client may hold on the Kafka listener. The names
// are Kafka's broker settings.
type Limits struct {
	// MaxRequestBytes is socket.request.max.bytes: a larger size field
	// closes the connection before the body is read. It also bounds the
	// requests one connection has read and not yet answered, their bodies
	// and what decoding them may allocate (decodeCost): while they hold
	// it, the connection is read no further (Kafka reads the next request
	// only once the last is answered).
	MaxRequestBytes int32
	// MaxInFlight is how many requests of one connection may be read ahead
	// of their answers (pipelining); reading stops while it is reached.
	MaxInFlight int
	// MaxQueuedAnswerBytes bounds the answers of one connection built and
	// not yet written: while they reach it, the connection is read no
	// further and its next request does not start (Kafka mutes the
	// channel), so a client that pipelines fetches and reads nothing
	// holds about this much plus one answer, not MaxInFlight answers.
	MaxQueuedAnswerBytes int64
	// IdleTimeout is connections.max.idle.ms: a connection with nothing in
	// flight that sends nothing for this long after its last answer is
	// closed.
	IdleTimeout time.Duration
	// MaxConnectionsPerIP and its overrides are the gRPC listener's
	// max.connections.per.ip settings, applied to this listener separately.
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides string
}

// DefaultLimits are Kafka's defaults (100 MiB, 10 minutes), a pipelining
// depth above what clients send (5 in flight per connection is the Java
// client's, kgo's and librdkafka's default for producers) and a few MiB
// of unread answers.
func DefaultLimits() Limits {
	return Limits{MaxRequestBytes: 100 << 20, MaxInFlight: 32, MaxQueuedAnswerBytes: 4 << 20, IdleTimeout: 10 * time.Minute, MaxConnectionsPerIP: 1000}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = d.MaxRequestBytes
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = d.MaxInFlight
	}
	if l.MaxQueuedAnswerBytes <= 0 {
		l.MaxQueuedAnswerBytes = d.MaxQueuedAnswerBytes
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	return l
}

// AddFlags registers the Kafka listener's limits.
func (l *Limits) AddFlags(fs *flag.FlagSet) {
	fs.Func("kafka.socket.request.max.bytes", "largest Kafka request accepted, and the most a connection's unanswered requests may hold before it is read further (socket.request.max.bytes; default 104857600)", func(s string) error {
		return config.ParseInt32(s, &l.MaxRequestBytes)
	})
	fs.IntVar(&l.MaxInFlight, "kafka.max.in.flight.requests.per.connection", l.MaxInFlight, "Kafka requests one connection may pipeline before the broker stops reading it")
	fs.Int64Var(&l.MaxQueuedAnswerBytes, "kafka.max.queued.answer.bytes", l.MaxQueuedAnswerBytes, "bytes of answers a Kafka connection may have built and unwritten before the broker stops reading it (a client that does not read its answers)")
	fs.DurationVar(&l.IdleTimeout, "kafka.connections.max.idle", l.IdleTimeout, "close a Kafka connection idle this long (connections.max.idle.ms)")
}

// Validate names the first limit that cannot work.
func (l Limits) Validate() error {
	switch {
	case l.MaxRequestBytes < 1024:
		return config.Invalid("kafka.socket.request.max.bytes", l.MaxRequestBytes, "must be at least 1024")
	case l.MaxInFlight < 1:
		return config.Invalid("kafka.max.in.flight.requests.per.connection", l.MaxInFlight, "must be at least 1")
	case l.MaxQueuedAnswerBytes < 1024:
		return config.Invalid("kafka.max.queued.answer.bytes", l.MaxQueuedAnswerBytes, "must be at least 1024")
	case l.IdleTimeout < time.Second:
		return config.Invalid("kafka.connections.max.idle", l.IdleTimeout, "must be at least 1s")
	}
	if _, err := connlimit.ParseOverrides(l.MaxConnectionsPerIPOverrides); err != nil {
		return config.Invalid("max.connections.per.ip.overrides", l.MaxConnectionsPerIPOverrides, "%v", err)
	}
	return nil
}
