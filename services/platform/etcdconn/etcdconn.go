// Package etcdconn is the one way every tidemark process (broker,
// controller, CLI) dials etcd: the same flags (--etcd.endpoints,
// --etcd.prefix, --etcd.username, --etcd.password or --etcd.password.file,
// --etcd.tls.ca, --etcd.tls.cert, --etcd.tls.key) with the same environment
// twins, the same validation, and the same errors when etcd refuses us.
//
// etcd authenticates a client by user name and password, or, when it runs
// with --client-cert-auth, by the Common Name of the client certificate;
// its roles then decide which key ranges the user may read and write (see
// DESIGN.md, "etcd access").
package etcdconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/config"
)

// DefaultDialTimeout bounds the first contact with etcd.
const DefaultDialTimeout = 5 * time.Second

// Options locate etcd and say who we are to it.
type Options struct {
	// Endpoints are etcd's client addresses (host:port, or URLs).
	Endpoints config.StringList
	// Prefix is the root of tidemark's keys.
	Prefix string
	// Username and Password authenticate with etcd's password auth.
	Username, Password string
	// PasswordFile holds the password instead of Password, so that it is
	// not on the command line (visible in ps). Read at Dial.
	PasswordFile string
	// CA verifies etcd's certificate; Cert and Key are ours (with
	// --client-cert-auth, etcd's user is the certificate's Common Name).
	// Setting any of them turns TLS on.
	CA, Cert, Key string
	// DialTimeout bounds Dial's wait for etcd's first answer.
	DialTimeout time.Duration
	// Dialer, when set, opens the connections to etcd in place of gRPC's
	// (a broker's fault injection cuts its link to etcd with it). It is
	// given an endpoint as etcd's client resolves it: host:port, or
	// unix:path for a Unix socket.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)

	// spell turns a flag's canonical (dotted) name into the name this
	// binary registered it under, for error messages.
	spell func(string) string
}

// Defaults are etcd on this machine, plaintext, no authentication.
func Defaults() Options {
	return Options{
		Endpoints:   config.StringList{"127.0.0.1:2379"},
		Prefix:      "/tidemark",
		DialTimeout: DefaultDialTimeout,
	}
}

// AddFlags registers the --etcd.* flags on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) { o.AddFlagsSpelled(fs, nil) }

// AddFlagsSpelled registers the flags under the names spell gives the
// canonical ones (the CLI spells --etcd.tls.ca as --etcd-tls-ca); errors
// then name the flags as registered. A nil spell keeps the dotted names.
func (o *Options) AddFlagsSpelled(fs *flag.FlagSet, spell func(string) string) {
	o.spell = spell
	n := o.flag
	fs.Var(&o.Endpoints, n("etcd.endpoints"), "comma-separated etcd endpoints (host:port, or https:// URLs)")
	fs.StringVar(&o.Prefix, n("etcd.prefix"), o.Prefix, "key prefix of tidemark's metadata in etcd")
	fs.StringVar(&o.Username, n("etcd.username"), o.Username, "etcd user name (password authentication); empty when authenticating by client certificate or not at all")
	fs.StringVar(&o.Password, n("etcd.password"), o.Password, "etcd password; prefer --"+n("etcd.password.file")+" or the environment, which ps does not show")
	fs.StringVar(&o.PasswordFile, n("etcd.password.file"), o.PasswordFile, "file holding the etcd password (a trailing newline is ignored)")
	fs.StringVar(&o.CA, n("etcd.tls.ca"), o.CA, "PEM CA file that signed etcd's certificate; turns TLS on")
	fs.StringVar(&o.Cert, n("etcd.tls.cert"), o.Cert, "PEM client certificate for etcd (etcd with --client-cert-auth takes its Common Name as the user); needs --"+n("etcd.tls.key"))
	fs.StringVar(&o.Key, n("etcd.tls.key"), o.Key, "PEM private key of --"+n("etcd.tls.cert"))
}

// FlagNames are the flags' canonical names, e.g. for environment twins.
var FlagNames = []string{"etcd.endpoints", "etcd.prefix", "etcd.username", "etcd.password",
	"etcd.password.file", "etcd.tls.ca", "etcd.tls.cert", "etcd.tls.key"}

func (o Options) flag(name string) string {
	if o.spell == nil {
		return name
	}
	return o.spell(name)
}

// TLS reports whether the link to etcd is encrypted.
func (o Options) TLS() bool { return o.CA != "" || o.Cert != "" || o.Key != "" }

// KeyPrefix is Prefix as tidemark's key layout uses it: without trailing
// slashes.
func (o Options) KeyPrefix() string { return strings.TrimRight(o.Prefix, "/") }

// Validate names the first flag whose value cannot work.
func (o Options) Validate() error {
	n := o.flag
	if len(o.Endpoints) == 0 {
		return config.Invalid(n("etcd.endpoints"), "", "at least one endpoint is needed")
	}
	for _, ep := range o.Endpoints {
		if o.TLS() && strings.HasPrefix(ep, "http://") {
			return config.Invalid(n("etcd.endpoints"), ep, "an http:// endpoint would skip the TLS that --%s/--%s ask for: write https://%s or host:port",
				n("etcd.tls.ca"), n("etcd.tls.cert"), strings.TrimPrefix(ep, "http://"))
		}
	}
	if o.Prefix == "" || o.Prefix[0] != '/' || o.KeyPrefix() == "" {
		return config.Invalid(n("etcd.prefix"), o.Prefix, "must start with / and name a directory, e.g. /tidemark")
	}
	if o.Password != "" && o.PasswordFile != "" {
		return config.Invalid(n("etcd.password.file"), o.PasswordFile, "give --%s or --%s, not both", n("etcd.password"), n("etcd.password.file"))
	}
	if (o.Password != "" || o.PasswordFile != "") && o.Username == "" {
		return config.Invalid(n("etcd.username"), "", "is needed with a password")
	}
	if o.Username != "" && o.Password == "" && o.PasswordFile == "" {
		return config.Invalid(n("etcd.password"), "", "user %q needs a password: give --%s or --%s", o.Username, n("etcd.password"), n("etcd.password.file"))
	}
	if o.PasswordFile != "" {
		if _, err := o.password(); err != nil {
			return err
		}
	}
	if (o.Cert == "") != (o.Key == "") {
		return config.Invalid(n("etcd.tls.cert"), o.Cert, "--%s and --%s go together", n("etcd.tls.cert"), n("etcd.tls.key"))
	}
	for _, f := range []struct{ flag, path string }{
		{"etcd.tls.ca", o.CA}, {"etcd.tls.cert", o.Cert}, {"etcd.tls.key", o.Key},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return config.Invalid(n(f.flag), f.path, "cannot read: %v", err)
		}
	}
	if o.DialTimeout < 0 {
		return fmt.Errorf("etcdconn: negative DialTimeout %s", o.DialTimeout)
	}
	return nil
}

// password is Password, or the first line of PasswordFile.
func (o Options) password() (string, error) {
	if o.PasswordFile == "" {
		return o.Password, nil
	}
	b, err := os.ReadFile(o.PasswordFile)
	if err != nil {
		return "", config.Invalid(o.flag("etcd.password.file"), o.PasswordFile, "cannot read: %v", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", config.Invalid(o.flag("etcd.password.file"), o.PasswordFile, "the file is empty")
	}
	return pw, nil
}

// reconnectParams bound the wait between attempts to reach etcd again
// after it went away. gRPC's default backoff grows to 120 s: after an etcd
// outage of half a minute a node took 14 s more to try again, and its lease
// expired meanwhile (etcd restores leases with a fresh TTL, and
// broker.session.timeout.ms is seconds). One attempt a second is cheap.
var reconnectParams = grpc.ConnectParams{
	Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	// A connection attempt may take this long (TLS included) before the
	// next one starts.
	MinConnectTimeout: 5 * time.Second,
}

// DialOptions are the gRPC options every tidemark etcd client dials with
// (tests' clients too, so they reconnect as the nodes do).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithConnectParams(reconnectParams)}
}

func (o Options) dialOptions() []grpc.DialOption {
	opts := DialOptions()
	if o.Dialer != nil {
		// clientv3 appends these after its own options, so this dialer
		// is the one gRPC uses.
		opts = append(opts, grpc.WithContextDialer(o.Dialer))
	}
	return opts
}

// Client builds a client without waiting for etcd: it connects in the
// background, as clientv3 does. Password authentication, though, asks
// etcd for a token at once (bounded by DialTimeout).
func (o Options) Client(ctx context.Context) (*clientv3.Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	pw, err := o.password()
	if err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	if o.TLS() {
		info := transport.TLSInfo{CertFile: o.Cert, KeyFile: o.Key, TrustedCAFile: o.CA}
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("--%s/--%s/--%s: %w", o.flag("etcd.tls.ca"), o.flag("etcd.tls.cert"), o.flag("etcd.tls.key"), err)
		}
	}
	timeout := o.DialTimeout
	if timeout == 0 {
		timeout = DefaultDialTimeout
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   o.Endpoints,
		DialTimeout: timeout,
		Username:    o.Username,
		Password:    pw,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
		DialOptions: o.dialOptions(),
	})
	if err != nil {
		return nil, o.explain(err)
	}
	return cli, nil
}

// Dial builds a client and checks, with one read of <prefix>/controller
// (a key every tidemark role may read), that etcd accepts us: a wrong
// password, a certificate etcd does not trust, no certificate where etcd
// wants one, or a user without access fails here with an error that says
// which flag to fix. etcd not answering within DialTimeout fails too.
func (o Options) Dial(ctx context.Context) (*clientv3.Client, error) {
	cli, err := o.Client(ctx)
	if err != nil {
		return nil, err
	}
	timeout := o.DialTimeout
	if timeout == 0 {
		timeout = DefaultDialTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if o.TLS() {
		// The client retries a failed handshake until the deadline and
		// then reports only the deadline: find out why ourselves, first.
		if err := o.handshake(pctx); err != nil {
			_ = cli.Close()
			return nil, err
		}
	}
	if _, err := cli.Get(pctx, o.KeyPrefix()+"/controller", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		err = o.explain(err)
		var e *Error
		if errors.As(err, &e) && e.Kind == Unreachable && !o.TLS() {
			if ep := o.speaksTLS(ctx); ep != "" {
				return nil, &Error{TLSFailed, fmt.Sprintf("etcd at %s wants TLS: give --%s (and, if it wants client certificates, --%s and --%s)",
					ep, o.flag("etcd.tls.ca"), o.flag("etcd.tls.cert"), o.flag("etcd.tls.key")), e.err}
			}
		}
		return nil, err
	}
	return cli, nil
}

// speaksTLS returns the first endpoint that accepts a connection but does
// not answer HTTP/2 in plaintext with HTTP/2's settings frame: most likely a
// TLS-only etcd. "" when none.
func (o Options) speaksTLS(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for _, ep := range o.Endpoints {
		addr := ep
		if _, rest, ok := strings.Cut(ep, "://"); ok {
			addr = rest
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			continue
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		head := make([]byte, 9) // an HTTP/2 frame header
		_, err = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		if err == nil {
			_, err = io.ReadFull(conn, head)
		}
		_ = conn.Close()
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			continue
		}
		if err != nil || head[3] != 0x4 { // closed, or not a SETTINGS frame
			return ep
		}
	}
	return ""
}

// handshake opens a TLS connection to each endpoint and sends HTTP/2's
// preface: etcd answers with its settings once it accepted our certificate,
// or with a TLS alert saying why not. It returns the first TLS refusal, or
// nil when none is seen.
func (o Options) handshake(ctx context.Context) error {
	base, err := transport.TLSInfo{CertFile: o.Cert, KeyFile: o.Key, TrustedCAFile: o.CA}.ClientConfig()
	if err != nil {
		return err
	}
	for _, ep := range o.Endpoints {
		addr := ep
		if _, rest, ok := strings.Cut(ep, "://"); ok {
			addr = rest
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		cfg := base.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"h2"}
		d := tls.Dialer{Config: cfg}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			var nerr *net.OpError
			if errors.As(err, &nerr) && nerr.Op == "dial" {
				continue // not listening: unreachable, not refused
			}
			if errors.Is(err, io.EOF) {
				return &Error{TLSFailed, fmt.Sprintf("etcd at %s hung up on the TLS handshake: it may serve plaintext only (then drop --%s, --%s and --%s)",
					ep, o.flag("etcd.tls.ca"), o.flag("etcd.tls.cert"), o.flag("etcd.tls.key")), err}
			}
			return &Error{TLSFailed, o.tlsFailed(ep), err}
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		_, err = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		if err == nil {
			_, err = conn.Read(make([]byte, 1))
		}
		_ = conn.Close()
		var nerr net.Error
		if err != nil && !(errors.As(err, &nerr) && nerr.Timeout()) {
			return &Error{TLSFailed, o.tlsFailed(ep), err}
		}
	}
	return nil
}

func (o Options) tlsFailed(ep string) string {
	n := o.flag
	return fmt.Sprintf("TLS with etcd at %s failed (check --%s, --%s and --%s)", ep, n("etcd.tls.ca"), n("etcd.tls.cert"), n("etcd.tls.key"))
}

// Connect is Dial for a long-running process: a refusal (credentials,
// certificate, permissions) fails at once, with the reason, while an etcd
// that does not answer within DialTimeout is left to the client, which
// keeps trying: the process's first request waits for etcd, as it would
// have without the check.
func (o Options) Connect(ctx context.Context) (*clientv3.Client, error) {
	cli, err := o.Dial(ctx)
	var e *Error
	if errors.As(err, &e) && e.Kind == Unreachable {
		return o.Client(ctx)
	}
	return cli, err
}

// Error is a refusal or failure of etcd, explained.
type Error struct {
	// Kind is what went wrong.
	Kind ErrorKind
	msg  string
	err  error
}

// ErrorKind classifies an Error.
type ErrorKind int

// The kinds of Error.
const (
	// Unreachable: etcd did not answer.
	Unreachable ErrorKind = iota
	// AuthFailed: etcd refused the user name and password.
	AuthFailed
	// NotAuthenticated: etcd wants a user and got none.
	NotAuthenticated
	// PermissionDenied: the user may not touch the key.
	PermissionDenied
	// TLSFailed: the TLS handshake failed (no certificate, one etcd does
	// not trust, or etcd's certificate we do not trust).
	TLSFailed
)

func (e *Error) Error() string { return e.msg + ": " + e.err.Error() }
func (e *Error) Unwrap() error { return e.err }

// explain turns etcd's and gRPC's errors into one that names the flag to
// look at.
func (o Options) explain(err error) error {
	n := o.flag
	eps := strings.Join(o.Endpoints, ",")
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return &Error{AuthFailed, fmt.Sprintf("etcd at %s refused user %q: wrong --%s or --%s/--%s",
			eps, o.Username, n("etcd.username"), n("etcd.password"), n("etcd.password.file")), err}
	case strings.Contains(err.Error(), "password was given for no password user"):
		return &Error{AuthFailed, fmt.Sprintf("etcd at %s refused user %q: it has no password in etcd (it authenticates by client certificate): drop --%s and --%s/--%s",
			eps, o.Username, n("etcd.username"), n("etcd.password"), n("etcd.password.file")), err}
	case errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrInvalidAuthToken):
		return &Error{NotAuthenticated, fmt.Sprintf("etcd at %s requires authentication: give --%s and --%s, or a client certificate with --%s/--%s",
			eps, n("etcd.username"), n("etcd.password.file"), n("etcd.tls.cert"), n("etcd.tls.key")), err}
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrUserNotFound):
		return &Error{PermissionDenied, fmt.Sprintf("etcd at %s: %s may not read %s/controller (see DESIGN.md, etcd access)",
			eps, o.who(), o.KeyPrefix()), err}
	}
	msg := err.Error()
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		msg = s.Message()
	}
	for _, hint := range []string{"tls:", "x509:", "handshake", "certificate"} {
		if strings.Contains(msg, hint) {
			return &Error{TLSFailed, o.tlsFailed(eps), err}
		}
	}
	if strings.Contains(msg, "http2: frame too large") || strings.Contains(msg, "first record does not look like a TLS handshake") {
		return &Error{TLSFailed, fmt.Sprintf("etcd at %s and this client disagree on TLS (one side speaks it, the other not): check --%s and the endpoints' scheme",
			eps, n("etcd.tls.ca")), err}
	}
	return &Error{Unreachable, fmt.Sprintf("etcd at %s (--%s) did not answer", eps, n("etcd.endpoints")), err}
}

// who names the etcd user we present: the password user, or the client
// certificate's Common Name.
func (o Options) who() string {
	if o.Username != "" {
		return fmt.Sprintf("user %q (--%s)", o.Username, o.flag("etcd.username"))
	}
	if o.Cert != "" {
		if cn := commonName(o.Cert); cn != "" {
			return fmt.Sprintf("user %q (Common Name of --%s %s)", cn, o.flag("etcd.tls.cert"), o.Cert)
		}
		return fmt.Sprintf("the user of --%s %s", o.flag("etcd.tls.cert"), o.Cert)
	}
	return "an anonymous client"
}

// CommonName is the Common Name of the PEM certificate in path, or "".
func commonName(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return ""
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return ""
	}
	return c.Subject.CommonName
}
