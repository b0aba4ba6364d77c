package kafkaapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/scram"
)

// SASLOptions configure the SASL listeners (Listener.SASL): Kafka's
// SASL_PLAINTEXT and SASL_SSL, with users' SCRAM credentials.
type SASLOptions struct {
	// Mechanisms are the enabled mechanisms (sasl.enabled.mechanisms),
	// as SaslHandshake lists them: scram.SHA256, scram.SHA512, scram.Plain.
	Mechanisms []string
	// Credentials finds a user's stored credential when a client logs in
	// or re-authenticates; nil: nobody can. Asked at each login, so a user
	// added, changed or deleted counts from the next login on; a
	// connection already authenticated keeps its user until its session
	// expires (MaxReauth), or forever when sessions do not expire, as in
	// Kafka.
	Credentials scram.Lookup
	// Timeout bounds the time from accepting a connection (after TLS) to
	// its authentication: a client that does not finish is closed.
	Timeout time.Duration
	// MaxReauth is Kafka's connections.max.reauth.ms (KIP-368): a login
	// lasts this long, after which the connection must log in again
	// (SaslHandshake and SaslAuthenticate on the same connection) or is
	// closed at its next request. 0, Kafka's default: sessions never
	// expire and there is no re-authentication.
	MaxReauth time.Duration
}

// DefaultSASLMechanisms are enabled when none are configured: the SCRAM
// pair, whose exchange never shows the password to the broker or the
// wire. PLAIN is opt-in: it sends the password itself (in clear text on a
// SASL_PLAINTEXT listener), and checking it costs the broker a key
// derivation (thousands of hash rounds) that any unauthenticated client
// can ask for.
var DefaultSASLMechanisms = []string{scram.SHA256, scram.SHA512}

// DefaultSASLTimeout is the authentication deadline when none is set.
const DefaultSASLTimeout = 10 * time.Second

// maxSASLFrame bounds a frame read before authentication, as Kafka's
// sasl.server.max.receive.size (512 KiB): an unauthenticated client
// cannot make the broker buffer a large request.
const maxSASLFrame = 512 << 10

// Kafka's SASL error codes.
const (
	errUnsupportedSASLMechanism = int16(kerr.UnsupportedSaslMechanism)
	errIllegalSASLState         = int16(kerr.IllegalSaslState)
	errSASLAuthenticationFailed = int16(kerr.SaslAuthenticationFailed)
)

func (o SASLOptions) withDefaults() SASLOptions {
	if len(o.Mechanisms) == 0 {
		o.Mechanisms = DefaultSASLMechanisms
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultSASLTimeout
	}
	if o.Credentials == nil {
		o.Credentials = func(string, string) (scram.Credential, bool) { return scram.Credential{}, false }
	}
	return o
}

// CheckSASLMechanisms names the first mechanism tidemark does not serve.
func CheckSASLMechanisms(mechs []string) error {
	if len(mechs) == 0 {
		return errors.New("no mechanism enabled")
	}
	for _, m := range mechs {
		if m != scram.Plain && !scram.Known(m) {
			return fmt.Errorf("mechanism %q is not served: want %s, %s or %s", m, scram.SHA256, scram.SHA512, scram.Plain)
		}
	}
	return nil
}

// errAuthLogged ends a connection whose failed login, failed
// re-authentication, timeout or expired session is logged already.
var errAuthLogged = errors.New("SASL authentication failed")

// authenticate runs the SASL exchange that logs a new connection in.
func (c *conn) authenticate() error { return c.exchange(nil) }

// exchange runs Kafka's SASL exchange, one request at a time: ApiVersions
// and SaslHandshake, then SaslAuthenticate frames (handshake v1) or raw
// SASL tokens (v0) until the mechanism is done. Any other request closes
// the connection, as Kafka does; so does a failed login, after its
// SASL_AUTHENTICATION_FAILED answer. On success the user becomes the
// connection's principal.
//
// first, when set, is the SaslHandshake that begins a re-authentication
// of a connection logged in already (KIP-368): then ApiVersions is not
// allowed, and the mechanism and the user must be the login's, as in
// Kafka's SaslServerAuthenticator.
func (c *conn) exchange(first []byte) error {
	opts := c.s.sasl
	re := first != nil
	_ = c.nc.SetDeadline(time.Now().Add(opts.Timeout))
	defer func() { _ = c.nc.SetDeadline(time.Time{}) }()
	var (
		conv scram.Conversation
		mech string
		raw  bool // handshake v0: raw tokens follow
		// badMech refuses a re-authentication that named another
		// mechanism than the login's: Kafka answers its handshake and
		// closes the connection unanswered at the next frame.
		badMech error
	)
	for {
		body := first
		first = nil
		if body == nil {
			var err error
			if body, err = c.readAuthFrame(raw); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					c.s.metrics.closed.WithLabelValues("auth_timeout").Inc()
					c.s.log.Warn("kafka SASL "+authText(re)+" timed out", "remote", c.remote(), "mechanism", mech, "timeout", opts.Timeout)
					return fmt.Errorf("%w: no login within %s", errAuthLogged, opts.Timeout)
				}
				return err
			}
		}
		if raw {
			if badMech != nil {
				return c.authFailed(re, mech, "", badMech)
			}
			resp, done, err := conv.Step(body)
			if err == nil && done {
				err = c.samePrincipal(re, conv.User())
			}
			if err != nil { // raw tokens have no error answer
				return c.authFailed(re, mech, conv.User(), err)
			}
			if done {
				c.authenticated(re, mech, conv.User())
			}
			if err := c.write(binary.BigEndian.AppendUint32(nil, uint32(len(resp))), resp); err != nil {
				return err
			}
			if done {
				return nil
			}
			continue
		}
		// Closed before its body is decoded, as Kafka's authenticator
		// does: decoding costs up to decodeAmplification times its size.
		if h, _, err := parseHeaderStart(body); err == nil && !servedBeforeLogin(h.Key) {
			if _, served := c.s.table[h.Key]; served {
				c.s.metrics.closed.WithLabelValues(closeReason(re)).Inc()
				return fmt.Errorf("%s v%d before SASL %s finished", kmsg.NameForKey(h.Key), h.Version, authText(re))
			}
		}
		p, rc, req, err := c.decode(body)
		if err != nil {
			c.s.metrics.closed.WithLabelValues("protocol").Inc()
			return err
		}
		if p.frame != nil { // an ApiVersions of a version too new
			if re {
				return c.illegalState(re, nil)
			}
			if err := c.write(p.frame); err != nil {
				return err
			}
			continue
		}
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			if conv != nil || re {
				return c.illegalState(re, rc)
			}
			if err := c.answer(rc, c.s.handleApiVersions(context.Background(), rc, r)); err != nil {
				return err
			}
		case *kmsg.SASLHandshakeRequest:
			if conv != nil {
				return c.illegalState(re, rc)
			}
			resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
			resp.SupportedMechanisms = slices.Clone(opts.Mechanisms)
			if !slices.Contains(opts.Mechanisms, r.Mechanism) {
				resp.ErrorCode = errUnsupportedSASLMechanism
				_ = c.answer(rc, resp)
				c.s.metrics.closed.WithLabelValues(closeReason(re)).Inc()
				c.s.metrics.authCounter(re).WithLabelValues(mechLabel(r.Mechanism), "unsupported").Inc()
				return fmt.Errorf("SASL mechanism %q is not enabled (enabled: %v)", r.Mechanism, opts.Mechanisms)
			}
			mech = r.Mechanism
			if re && mech != c.session.mech {
				badMech = fmt.Errorf("SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'", mech, c.session.mech)
			}
			conv, _ = scram.NewConversation(mech, opts.Credentials)
			raw = r.Version == 0
			if err := c.answer(rc, resp); err != nil {
				return err
			}
		case *kmsg.SASLAuthenticateRequest:
			if conv == nil {
				return c.illegalState(re, rc)
			}
			if badMech != nil {
				return c.authFailed(re, mech, "", badMech)
			}
			resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			out, done, err := conv.Step(r.SASLAuthBytes)
			msg := authFailedMessage(re, mech)
			if err == nil && done {
				if err = c.samePrincipal(re, conv.User()); err != nil {
					msg = err.Error()
				}
			}
			if err != nil {
				resp.ErrorCode = errSASLAuthenticationFailed
				resp.ErrorMessage = optMessage(msg)
				_ = c.answer(rc, resp)
				return c.authFailed(re, mech, conv.User(), err)
			}
			resp.SASLAuthBytes = out
			if done {
				resp.SessionLifetimeMillis = c.authenticated(re, mech, conv.User())
			}
			if err := c.answer(rc, resp); err != nil {
				return err
			}
			if done {
				return nil
			}
		default:
			return c.illegalState(re, rc)
		}
	}
}

// authText names the exchange in logs and answers, as Kafka does.
func authText(re bool) string {
	if re {
		return "re-authentication"
	}
	return "authentication"
}

// closeReason is the connections-closed reason of a failed exchange.
func closeReason(re bool) string {
	if re {
		return "reauth"
	}
	return "auth"
}

// authFailedMessage is Kafka's text for a failed login: the same whether
// the user is unknown or the password wrong.
func authFailedMessage(re bool, mech string) string {
	return "Authentication failed during " + authText(re) + " due to invalid credentials with SASL mechanism " + mech
}

// samePrincipal refuses a re-authentication as another user than the
// login's: a connection's principal never changes (Kafka's
// ensurePrincipalUnchanged, and its text).
func (c *conn) samePrincipal(re bool, user string) error {
	if !re || user == c.session.user {
		return nil
	}
	return fmt.Errorf("Cannot change principals during re-authentication from User.%s: User.%s", c.session.user, user)
}

// authFailed counts and logs a failed login or re-authentication: the
// user the client named (cut to a sane length: it is the client's text)
// and its address, never a password or token.
func (c *conn) authFailed(re bool, mech, user string, err error) error {
	c.s.metrics.authCounter(re).WithLabelValues(mechLabel(mech), "failure").Inc()
	c.s.metrics.closed.WithLabelValues(closeReason(re)).Inc()
	if len(user) > 256 {
		user = user[:256] + "…"
	}
	if re && user == "" {
		user = c.session.user
	}
	if n, ok := c.clientLine("auth"); ok {
		c.s.log.Warn("kafka SASL "+authText(re)+" failed", "remote", c.remote(), "mechanism", mech, "user", user, "reason", err.Error(),
			"unlogged_since_last", n)
	}
	return errAuthLogged
}

// clientLine reports whether a line of kind about this connection's client
// may be written now (Server.clientLines), and how many were held back.
func (c *conn) clientLine(kind string) (int, bool) {
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		host = c.nc.RemoteAddr().String()
	}
	return c.s.clientLines.Allow(kind + " " + host)
}

// authenticated starts the connection's session as user and returns its
// lifetime in milliseconds, as SaslAuthenticate v1+ answers it: the
// configured connections.max.reauth.ms (a SCRAM credential has no
// lifetime of its own), or 0 when sessions never expire.
func (c *conn) authenticated(re bool, mech, user string) int64 {
	now := time.Now()
	c.session.mech, c.session.user = mech, user
	c.session.expiry = time.Time{}
	if max := c.s.sasl.MaxReauth; max > 0 {
		c.session.expiry = now.Add(max)
	}
	if !re {
		c.principal = identity.ForUser(user)
	}
	c.s.metrics.authCounter(re).WithLabelValues(mech, "success").Inc()
	c.s.log.Debug("kafka SASL "+authText(re)+" succeeded", "remote", c.remote(), "mechanism", mech, "user", user)
	return c.s.sasl.MaxReauth.Milliseconds()
}

// illegalState ends a connection that sent a request its SASL exchange
// does not allow (Kafka's IllegalSaslStateException closes it unanswered).
func (c *conn) illegalState(re bool, rc *reqCtx) error {
	c.s.metrics.closed.WithLabelValues(closeReason(re)).Inc()
	if rc == nil {
		return fmt.Errorf("ApiVersions during SASL %s", authText(re))
	}
	return fmt.Errorf("%s v%d before SASL %s finished", kmsg.NameForKey(rc.header.Key), rc.header.Version, authText(re))
}

// servedBeforeLogin is what the SASL exchange reads.
func servedBeforeLogin(key int16) bool {
	return key == int16(kmsg.ApiVersions) || key == int16(kmsg.SASLHandshake) || key == int16(kmsg.SASLAuthenticate)
}

// readAuthFrame reads one size-prefixed frame: a request, or a raw token.
func (c *conn) readAuthFrame(raw bool) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	limit := min(int32(maxSASLFrame), c.s.opts.Limits.MaxRequestBytes)
	least := int32(10) // a request header
	if raw {
		least = 0
	}
	if n < least || n > limit {
		c.s.metrics.closed.WithLabelValues("protocol").Inc()
		return nil, fmt.Errorf("frame size %d before SASL authentication is outside [%d, %d] (sasl.server.max.receive.size)", n, least, limit)
	}
	return readBody(c.nc, int(n))
}

// answer writes resp at once (the exchange is one request at a time).
func (c *conn) answer(rc *reqCtx, resp kmsg.Response) error {
	resp.SetVersion(rc.header.Version)
	flexible := resp.IsFlexible() && rc.header.Key != int16(kmsg.ApiVersions)
	return c.write(finishFrame(resp.AppendTo(appendResponseHeader(nil, rc.header.CorrelationID, flexible))))
}

func (c *conn) write(parts ...[]byte) error {
	for _, p := range parts {
		if _, err := c.nc.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func (c *conn) remote() string { return c.nc.RemoteAddr().String() }

// mechLabel keeps the metric's label set bounded: a client can name any
// mechanism.
func mechLabel(m string) string {
	if m == scram.Plain || scram.Known(m) {
		return m
	}
	return "other"
}

// handleSASLAfterAuth answers SaslHandshake and SaslAuthenticate outside
// an exchange (a listener without SASL; a connection logged in already
// whose sessions do not expire, or whose last re-authentication began
// less than a second ago; a SaslAuthenticate without its handshake) with
// ILLEGAL_SASL_STATE, as Kafka's request handler does.
func (s *Server) handleSASLAfterAuth(_ context.Context, _ *reqCtx, req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.ErrorCode = errIllegalSASLState
		return resp
	case *kmsg.SASLAuthenticateRequest:
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = errIllegalSASLState
		resp.ErrorMessage = optMessage("SaslAuthenticate outside a SASL exchange: the connection is not on a SASL listener, or is authenticated already and did not begin a re-authentication with SaslHandshake")
		return resp
	}
	return nil
}
