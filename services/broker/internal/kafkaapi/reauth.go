package kafkaapi

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// saslSession is a SASL connection's login. Only the connection's reader
// goroutine (serve, readLoop) reads or writes it.
type saslSession struct {
	mech, user string
	// expiry ends the session (connections.max.reauth.ms after the last
	// login); zero: never, and no re-authentication.
	expiry time.Time
	// lastReauth is when the last re-authentication began; zero: none.
	lastReauth time.Time
}

// minReauthInterval is Kafka's least time between two re-authentications
// of a connection: a SaslHandshake sooner is answered ILLEGAL_SASL_STATE.
const minReauthInterval = time.Second

// errSessionExpired ends a connection that sent a request after its SASL
// session expired without re-authenticating.
var errSessionExpired = fmt.Errorf("%w: SASL session expired (connections.max.reauth.ms)", errAuthLogged)

// sessionGate applies KIP-368 to a request read on a connection whose
// SASL session expires, as Kafka's socket server does before handing a
// request on: a SaslHandshake begins a re-authentication (expired or not,
// at most once a second), which this runs to its end (handled); any other
// request after the expiry closes the connection unanswered.
func (c *conn) sessionGate(body []byte) (handled bool, err error) {
	if c.session.expiry.IsZero() {
		return false, nil
	}
	h, _, err := parseHeaderStart(body)
	if err != nil {
		return false, nil // decode closes it
	}
	now := time.Now()
	if h.Key == int16(kmsg.SASLHandshake) && (c.session.lastReauth.IsZero() || now.Sub(c.session.lastReauth) >= minReauthInterval) {
		c.session.lastReauth = now
		return true, c.reauthenticate(body)
	}
	if now.After(c.session.expiry) {
		c.s.metrics.closed.WithLabelValues("session_expired").Inc()
		// Debug, as Kafka: every client that does not re-authenticate
		// meets this once per session lifetime (the counter above shows it).
		c.s.log.Debug("kafka SASL session expired: closing the connection", "remote", c.remote(), "user", c.session.user,
			"mechanism", c.session.mech, "api", kmsg.NameForKey(h.Key), "expired", c.session.expiry.UTC().Format(time.RFC3339Nano))
		return false, errSessionExpired
	}
	return false, nil
}

// reauthenticate runs a re-authentication that handshake begins, once
// every answer to the requests before it is written: as in Kafka, whose
// connection has no request in flight when it reads the next, the
// exchange then owns the connection until it ends.
func (c *conn) reauthenticate(handshake []byte) error {
	if err := c.flushAnswers(); err != nil {
		return err
	}
	return c.exchange(handshake)
}

// flushAnswers waits until the writer has written (or dropped) every
// answer queued so far: the writer is then idle until the next request.
func (c *conn) flushAnswers() error {
	mark := &pending{done: make(chan struct{}), flushed: make(chan struct{})}
	close(mark.done)
	c.inFlight.Add(1)
	select {
	case c.queue <- mark:
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
	select {
	case <-mark.flushed:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}
