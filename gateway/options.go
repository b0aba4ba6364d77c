package gateway

import (
	"context"
	"flag"
	"net"
	"time"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
	"tidemark.io/services/platform/tlsconf"
)

// Options configures the gateway.
type Options struct {
	// Listen is the HTTP address (REST, console, and gRPC health/reflection).
	Listen string
	// Controllers and Brokers are the gRPC addresses the gateway starts
	// from: it finds the active controller and each partition's leader itself.
	Controllers config.StringList
	Brokers     config.StringList
	// MaxBodyBytes refuses larger request bodies before reading them whole.
	MaxBodyBytes int64
	// MaxJSONObjects refuses a request body with more JSON objects and
	// arrays than this before decoding it: each becomes a message in
	// memory, so a body of many tiny records ({},{},...) would otherwise
	// cost far more than its size.
	MaxJSONObjects int
	// MaxStreamsPerUser and MaxStreams bound the streams (records:follow,
	// cluster:watch, the console's event streams) open at once, per user
	// and in all.
	MaxStreamsPerUser int
	MaxStreams        int
	// RetryTimeout is how long a REST call keeps retrying when its
	// partition's leader or the active controller moved or could not be
	// reached, before it answers with the last error.
	RetryTimeout time.Duration
	// RequestTimeout bounds one upstream attempt beyond the time the
	// request asks the node to wait (acks=all's timeout_ms, a fetch's max
	// wait, an admin call's timeout_ms). A controller that does not answer
	// within it is passed over for the others (a stopped process keeps its
	// connections open, so only a deadline tells). A whole call ends within
	// RetryTimeout + RequestTimeout + that wait.
	RequestTimeout time.Duration
	// PeerTimeout bounds how long a caller's connection may leave what the
	// gateway sent unacknowledged before it is closed (TCP_USER_TIMEOUT on
	// Linux; 0 leaves the kernel's retransmission limit, about 15 minutes):
	// it is how soon a stream whose caller vanished gives its slot back.
	PeerTimeout time.Duration
	// Console configures the web console served at /.
	Console ConsoleOptions
	// TLS is HTTPS on Listen and mutual TLS on every gRPC connection the
	// gateway makes (its certificate, Common Name gateway, serves both);
	// Plaintext turns both off.
	TLS tlsconf.Options
	// Auth is who may call the REST API and the console's data.
	Auth AuthOptions
	// Dialer, when set, replaces TCP dialing to controllers and brokers
	// (tests route through a network simulator). Not a flag.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)

	Log       logging.Options
	Telemetry telemetry.Options
}

// DefaultOptions matches the dev cluster's default ports.
func DefaultOptions() Options {
	return Options{
		Listen:            "127.0.0.1:8080",
		Controllers:       config.StringList{"127.0.0.1:9190", "127.0.0.1:9191"},
		Brokers:           config.StringList{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"},
		MaxBodyBytes:      8 << 20,
		MaxJSONObjects:    200000,
		MaxStreamsPerUser: 64,
		MaxStreams:        1024,
		RetryTimeout:      10 * time.Second,
		RequestTimeout:    5 * time.Second,
		PeerTimeout:       30 * time.Second,
		Log:               logging.DefaultOptions(),
		Auth:              AuthOptions{SessionTTL: 8 * time.Hour},
	}
}

// AddFlags registers the gateway's flags.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", o.Listen, "HTTP listen address for REST, the console and gRPC health")
	fs.Var(&o.Controllers, "controllers", "comma-separated controller gRPC addresses")
	fs.Var(&o.Brokers, "brokers", "comma-separated bootstrap broker gRPC addresses")
	fs.Int64Var(&o.MaxBodyBytes, "http.max.body.bytes", o.MaxBodyBytes, "largest request body accepted")
	fs.IntVar(&o.MaxJSONObjects, "http.max.json.objects", o.MaxJSONObjects, "most JSON objects and arrays in one request body (each record is one), counted before decoding")
	fs.IntVar(&o.MaxStreamsPerUser, "http.max.streams.per.user", o.MaxStreamsPerUser,
		"most streams (records:follow, cluster:watch, console event streams) one user may have open at once; more are refused with 429")
	fs.IntVar(&o.MaxStreams, "http.max.streams", o.MaxStreams, "most streams (REST and console) open at once in all; more are refused with 429")
	config.DurationMs(fs, &o.RetryTimeout, "retry.timeout.ms",
		"how long a REST call keeps retrying when its partition's leader or the active controller moved or is unreachable (ms)")
	config.DurationMs(fs, &o.RequestTimeout, "request.timeout.ms",
		"bound on one call to a controller or broker, beyond the wait the request asks for (ms); a controller that does not answer within it is passed over")
	config.DurationMs(fs, &o.PeerTimeout, "http.peer.timeout.ms",
		"how long a caller's connection may leave what the gateway sent unacknowledged before it is closed (TCP_USER_TIMEOUT, Linux; 0: the kernel's default, about 15 minutes): bounds how long a vanished browser or client holds its stream (ms)")
	fs.BoolVar(&o.Console.Actions, "console.actions", o.Console.Actions,
		"show the console's buttons (produce, configs, elections, faults, node actions, scenarios) and serve the REST routes of fault injection and the dev launcher (/v1/brokers/{id}/faults, /v1/dev/...); off the console only watches and those routes answer 403")
	fs.StringVar(&o.Console.DevControl, "console.dev.control", o.Console.DevControl,
		"address of the dev launcher's control API (tidemark dev up: 127.0.0.1:9299) for stopping, killing and starting nodes and for running the scenarios")
	fs.StringVar(&o.Console.JaegerUI, "console.jaeger.ui", o.Console.JaegerUI,
		"Jaeger UI base URL; the console links HW-advancing fetches to their traces there")
	o.TLS.AddFlags(fs)
	fs.StringVar(&o.Auth.TokensFile, "rest.tokens.file", o.Auth.TokensFile,
		"file of REST bearer tokens, one `TOKEN USER` per line (# comments); read again when it changes")
	fs.BoolVar(&o.Auth.Required, "rest.auth.required", o.Auth.Required,
		"authenticate REST and console callers even with --plaintext (always on with TLS); needs --rest.tokens.file then")
	config.DurationMs(fs, &o.Auth.SessionTTL, "rest.session.ttl.ms", "how long a console login (POST /v1/login) lasts (ms)")
	fs.Var(&o.Auth.AllowedHosts, "rest.allowed.hosts",
		"comma-separated extra names the REST API and console answer to in the Host header, beside localhost, 127.0.0.1, ::1, the listen host and the certificate's names; * allows any")
	o.Log.AddFlags(fs)
	o.Telemetry.AddFlags(fs)
}

// ConsoleOptions are the web console's settings.
type ConsoleOptions struct {
	Actions    bool
	DevControl string
	JaegerUI   string
}

// AuthOptions configures REST authentication.
type AuthOptions struct {
	// TokensFile holds the bearer tokens (restauth.Tokens describes it).
	TokensFile string
	// Required turns authentication on with --plaintext; with TLS it is
	// always on.
	Required bool
	// SessionTTL is how long a console login lasts.
	SessionTTL time.Duration
	// AllowedHosts are names accepted in Host beside the defaults.
	AllowedHosts config.StringList
}

// authOn reports whether REST callers must authenticate: always with TLS,
// and with --plaintext when --rest.auth.required says so.
func (o Options) authOn() bool { return o.TLS.Enabled() || o.Auth.Required }

// Validate names the first flag whose value cannot work.
func (o Options) Validate() error {
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return config.Invalid("listen", o.Listen, "must be host:port")
	}
	if len(o.Controllers) == 0 {
		return config.Invalid("controllers", "", "at least one controller address is needed")
	}
	if len(o.Brokers) == 0 {
		return config.Invalid("brokers", "", "at least one broker address is needed")
	}
	if o.MaxBodyBytes <= 0 {
		return config.Invalid("http.max.body.bytes", o.MaxBodyBytes, "must be > 0")
	}
	if o.MaxJSONObjects <= 0 {
		return config.Invalid("http.max.json.objects", o.MaxJSONObjects, "must be > 0")
	}
	if o.MaxStreamsPerUser <= 0 {
		return config.Invalid("http.max.streams.per.user", o.MaxStreamsPerUser, "must be > 0")
	}
	if o.MaxStreams <= 0 {
		return config.Invalid("http.max.streams", o.MaxStreams, "must be > 0")
	}
	if o.RetryTimeout < 0 {
		return config.Invalid("retry.timeout.ms", o.RetryTimeout.Milliseconds(), "must be >= 0")
	}
	if o.RequestTimeout <= 0 {
		return config.Invalid("request.timeout.ms", o.RequestTimeout.Milliseconds(), "must be > 0")
	}
	if o.PeerTimeout < 0 {
		return config.Invalid("http.peer.timeout.ms", o.PeerTimeout.Milliseconds(), "must be >= 0")
	}
	if err := o.TLS.Validate(); err != nil {
		return err
	}
	if o.TLS.Plaintext && !o.Auth.Required && o.Auth.TokensFile != "" {
		return config.Invalid("rest.tokens.file", o.Auth.TokensFile,
			"with --plaintext REST authentication is off unless --rest.auth.required is set too")
	}
	if o.TLS.Plaintext && o.Auth.Required && o.Auth.TokensFile == "" {
		return config.Invalid("rest.auth.required", true,
			"with --plaintext callers have no certificates: give --rest.tokens.file")
	}
	if o.Auth.SessionTTL <= 0 {
		return config.Invalid("rest.session.ttl.ms", o.Auth.SessionTTL.Milliseconds(), "must be > 0")
	}
	if err := o.Telemetry.Validate(); err != nil {
		return err
	}
	return o.Log.Validate()
}
