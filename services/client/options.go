package client

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Defaults, Kafka's where Kafka has the setting.
const (
	// DefaultRequestTimeout is request.timeout.ms: the bound on one attempt.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultRetryBackoff is retry.backoff.ms, the first pause between attempts.
	DefaultRetryBackoff = 100 * time.Millisecond
	// DefaultRetryBackoffMax is retry.backoff.max.ms, the longest pause.
	DefaultRetryBackoffMax = time.Second
	// DefaultMetadataMaxAge is metadata.max.age.ms: metadata older than this
	// is refreshed before use even without an error.
	DefaultMetadataMaxAge = 5 * time.Minute
	// DefaultAPITimeout is default.api.timeout.ms: the bound on a whole call,
	// retries included, when the caller's context has no deadline.
	DefaultAPITimeout = 60 * time.Second
	// DefaultMaxMessageBytes bounds the size of one gRPC message either way;
	// it matches the servers' limit.
	DefaultMaxMessageBytes = 64 << 20
)

// Options configures connections, timeouts and retries. Client and Admin
// share it; zero values pick the defaults above.
type Options struct {
	// Dialer, when set, opens every connection (grpc.WithContextDialer), so
	// that in-process tests can route through a network simulator. The
	// address it receives is exactly the one the client was given or told.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// DialOptions are appended to the client's own. Produce requests are
	// made as streams (to keep them in order on the wire), so they pass
	// through stream interceptors, not unary ones.
	DialOptions []grpc.DialOption
	// TLS, when set, secures every connection (mutual TLS when it carries a
	// client certificate: tlsconf.Options.Client builds one); nil dials
	// plaintext.
	TLS *tls.Config
	// TracerProvider for the otelgrpc stats handler; nil uses the global one.
	TracerProvider trace.TracerProvider

	RequestTimeout  time.Duration
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	MetadataMaxAge  time.Duration
	// APITimeout bounds calls whose context has no deadline.
	APITimeout      time.Duration
	MaxMessageBytes int

	// Logger receives debug lines about retries and refreshes; nil is silent.
	Logger *slog.Logger

	// DiscoverBrokers, when set, names more broker addresses to ask for
	// metadata once no broker the client knows and no bootstrap address
	// answered: every broker may have come back on another port while the
	// client was idle. The gateway asks the active controller.
	DiscoverBrokers func(ctx context.Context) []string
}

func (o Options) withDefaults() Options {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.RetryBackoffMax <= 0 {
		o.RetryBackoffMax = DefaultRetryBackoffMax
	}
	o.RetryBackoffMax = max(o.RetryBackoffMax, o.RetryBackoff)
	if o.MetadataMaxAge <= 0 {
		o.MetadataMaxAge = DefaultMetadataMaxAge
	}
	if o.APITimeout <= 0 {
		o.APITimeout = DefaultAPITimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// withAPITimeout bounds ctx by APITimeout when it has no deadline of its own.
func (o Options) withAPITimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, o.APITimeout)
}
