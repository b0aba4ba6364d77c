package kafkaapi

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"tidemark.io/services/platform/scram"
)

// users is a credential store tests change while connections are open,
// as the controller's UpdateMetadata changes a broker's.
type users struct {
	mu    sync.Mutex
	creds map[string]map[string]scram.Credential // user, mechanism
}

func (u *users) set(t *testing.T, user, pass string) {
	t.Helper()
	m := map[string]scram.Credential{}
	for _, mech := range scram.Mechanisms {
		c, err := scram.FromPassword(mech, pass, scram.NewSalt(), scram.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		m[mech] = c
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.creds[user] = m
}

func (u *users) delete(user string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.creds, user)
}

func (u *users) lookup(user, mech string) (scram.Credential, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.creds[user][mech]
	return c, ok
}

// serveReauth runs a SASL_PLAINTEXT listener whose sessions last
// maxReauth, with alice ("wonderland") and bob ("builder").
func serveReauth(t *testing.T, maxReauth time.Duration, logs io.Writer) (*Server, string, *users) {
	t.Helper()
	u := &users{creds: map[string]map[string]scram.Credential{}}
	u.set(t, "alice", "wonderland")
	u.set(t, "bob", "builder")
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	o := SASLOptions{Mechanisms: []string{scram.SHA256, scram.SHA512, scram.Plain}, MaxReauth: maxReauth, Credentials: u.lookup}
	s := New(Options{SASL: o, Registry: prometheus.NewRegistry(), Logger: logger})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(Listener{Name: "SASL_PLAINTEXT", SASL: true}, lis) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, lis.Addr().String(), u
}

func sha256As(user, pass string) sasl.Mechanism {
	return kscram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
}

// loggedIn is a connection logged in as alice with SCRAM-SHA-256.
func loggedIn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := dial(t, addr)
	if hs := handshake(t, c, 1, scram.SHA256); hs.ErrorCode != 0 {
		t.Fatalf("handshake %d", hs.ErrorCode)
	}
	if resp := login(t, c, 1, scramAuth("wonderland")); resp.ErrorCode != 0 {
		t.Fatalf("login: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	return c
}

func mustAnswerApiVersions(t *testing.T, c net.Conn, corr int32) {
	t.Helper()
	av := kmsg.NewPtrApiVersionsResponse()
	if err := roundTrip(t, c, apiVersions(3), av, corr); err != nil || av.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %v %d", err, av.ErrorCode)
	}
}

// SaslAuthenticate v1+ answers the session's lifetime: the configured
// connections.max.reauth.ms, 0 when sessions do not expire.
func TestSASLSessionLifetimeIsAnswered(t *testing.T) {
	for _, max := range []time.Duration{time.Hour, 0} {
		_, addr, _ := serveReauth(t, max, nil)
		c := dial(t, addr)
		handshake(t, c, 1, scram.SHA512)
		resp := login(t, c, 1, kscram.Auth{User: "alice", Pass: "wonderland"}.AsSha512Mechanism())
		if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != max.Milliseconds() {
			t.Fatalf("max %s: answer %d, lifetime %d ms", max, resp.ErrorCode, resp.SessionLifetimeMillis)
		}
	}
}

// A logged-in connection re-authenticates as the same user with the same
// mechanism (SaslAuthenticate frames or v0 raw tokens) and goes on; the
// new login answers a new lifetime. A second re-authentication within a
// second is ILLEGAL_SASL_STATE and leaves the connection open, as in
// Kafka.
func TestSASLReauthenticationKeepsTheConnection(t *testing.T) {
	s, addr, _ := serveReauth(t, time.Hour, nil)
	c := loggedIn(t, addr)
	mustAnswerApiVersions(t, c, 20)
	if hs := handshake(t, c, 1, scram.SHA256); hs.ErrorCode != 0 {
		t.Fatalf("re-authentication handshake %d", hs.ErrorCode)
	}
	resp := login(t, c, 2, scramAuth("wonderland"))
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != time.Hour.Milliseconds() {
		t.Fatalf("re-authentication: %d %v, lifetime %d", resp.ErrorCode, resp.ErrorMessage, resp.SessionLifetimeMillis)
	}
	mustAnswerApiVersions(t, c, 21)
	if hs := handshake(t, c, 1, scram.SHA256); hs.ErrorCode != errIllegalSASLState {
		t.Fatalf("a second re-authentication at once: %d, want ILLEGAL_SASL_STATE", hs.ErrorCode)
	}
	mustAnswerApiVersions(t, c, 22)
	if got := testutil.ToFloat64(s.metrics.reauth.WithLabelValues(scram.SHA256, "success")); got != 1 {
		t.Fatalf("re-authentications %v", got)
	}
	if got := testutil.ToFloat64(s.metrics.sasl.WithLabelValues(scram.SHA256, "success")); got != 1 {
		t.Fatalf("logins %v", got)
	}

	// v0 handshake: raw tokens, on a connection that logged in with them.
	c = dial(t, addr)
	rawLogin := func() {
		t.Helper()
		if hs := handshake(t, c, 0, scram.SHA512); hs.ErrorCode != 0 {
			t.Fatal(hs.ErrorCode)
		}
		sess, msg, _ := kscram.Auth{User: "alice", Pass: "wonderland"}.AsSha512Mechanism().Authenticate(context.Background(), "b")
		for done := false; !done; {
			if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)); err != nil {
				t.Fatal(err)
			}
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				t.Fatal(err)
			}
			tok := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, tok); err != nil {
				t.Fatal(err)
			}
			var err error
			if done, msg, err = sess.Challenge(tok); err != nil {
				t.Fatal(err)
			}
		}
	}
	rawLogin()
	mustAnswerApiVersions(t, c, 5)
	rawLogin()
	mustAnswerApiVersions(t, c, 6)
}

// Requests pipelined before a re-authentication's handshake are answered
// first, in order; the exchange then runs alone.
func TestSASLReauthenticationAfterPipelinedRequests(t *testing.T) {
	_, addr, _ := serveReauth(t, time.Hour, nil)
	c := loggedIn(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = scram.SHA256
	var burst []byte
	for i := range 5 {
		burst = append(burst, frame(apiVersions(3), int32(30+i))...)
	}
	burst = append(burst, frame(hs, 35)...)
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		corr, body, err := readAnswer(t, c)
		if err != nil || corr != int32(30+i) {
			t.Fatalf("answer %d: correlation %d, %v", i, corr, err)
		}
		if i == 5 {
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.SetVersion(1)
			if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
				t.Fatalf("handshake: %v %d", err, resp.ErrorCode)
			}
		}
	}
	if resp := login(t, c, 1, scramAuth("wonderland")); resp.ErrorCode != 0 {
		t.Fatalf("re-authentication: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	mustAnswerApiVersions(t, c, 40)
}

// A re-authentication fails, and closes the connection, for another user
// (Kafka's "Cannot change principals" text), a deleted user, a changed
// password (the old one no longer logs in) and a malformed token.
func TestSASLReauthenticationFailuresClose(t *testing.T) {
	var logs syncBuffer
	s, addr, u := serveReauth(t, time.Hour, &logs)
	invalid := "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	cases := []struct {
		name   string
		change func()
		m      sasl.Mechanism
		want   string
	}{
		{"another user", func() {}, sha256As("bob", "builder"), "Cannot change principals during re-authentication from User.alice: User.bob"},
		{"deleted user", func() { u.delete("alice") }, scramAuth("wonderland"), invalid},
		{"new password", func() { u.set(t, "alice", "looking-glass") }, scramAuth("wonderland"), invalid},
	}
	for _, tc := range cases {
		u.set(t, "alice", "wonderland")
		c := loggedIn(t, addr)
		tc.change()
		mustAnswerApiVersions(t, c, 20) // the session goes on until it re-authenticates
		handshake(t, c, 1, scram.SHA256)
		resp := login(t, c, 1, tc.m)
		if resp.ErrorCode != errSASLAuthenticationFailed || resp.ErrorMessage == nil || *resp.ErrorMessage != tc.want {
			t.Fatalf("%s: answer %d %v, want SASL_AUTHENTICATION_FAILED %q", tc.name, resp.ErrorCode, resp.ErrorMessage, tc.want)
		}
		expectClosed(t, c)
	}
	// The new password logs in.
	c := dial(t, addr)
	handshake(t, c, 1, scram.SHA256)
	if resp := login(t, c, 1, scramAuth("looking-glass")); resp.ErrorCode != 0 {
		t.Fatalf("new password: %d", resp.ErrorCode)
	}

	// A malformed first message.
	u.set(t, "alice", "wonderland")
	c = loggedIn(t, addr)
	handshake(t, c, 1, scram.SHA256)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	auth.SASLAuthBytes = []byte("\x00garbage")
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	if err := roundTrip(t, c, auth, resp, 9); err != nil || resp.ErrorCode != errSASLAuthenticationFailed {
		t.Fatalf("garbage token: %v %d", err, resp.ErrorCode)
	}
	expectClosed(t, c)

	if got := testutil.ToFloat64(s.metrics.reauth.WithLabelValues(scram.SHA256, "failure")); got != 4 {
		t.Fatalf("failed re-authentications %v, want 4", got)
	}
	if got := testutil.ToFloat64(s.metrics.closed.WithLabelValues("reauth")); got != 4 {
		t.Fatalf("reauth closes %v, want 4", got)
	}
	if got := logs.String(); !strings.Contains(got, "re-authentication failed") || !strings.Contains(got, "user=alice") {
		t.Fatalf("log lacks the failed re-authentication:\n%s", got)
	}
}

// A re-authentication must use the login's mechanism: another enabled one
// is answered in the handshake, then the connection closed unanswered
// (Kafka's REAUTH_BAD_MECHANISM); one not enabled is
// UNSUPPORTED_SASL_MECHANISM and closed. Requests other than the exchange
// while it runs (ApiVersions, Metadata) close the connection unanswered.
func TestSASLReauthenticationRefusesAnotherMechanismOrRequest(t *testing.T) {
	s, addr, _ := serveReauth(t, time.Hour, nil)
	c := loggedIn(t, addr)
	if hs := handshake(t, c, 1, scram.SHA512); hs.ErrorCode != 0 {
		t.Fatalf("handshake %d", hs.ErrorCode)
	}
	_, msg, _ := kscram.Auth{User: "alice", Pass: "wonderland"}.AsSha512Mechanism().Authenticate(context.Background(), "b")
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	auth.SASLAuthBytes = msg
	if _, err := c.Write(frame(auth, 3)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAnswer(t, c); err == nil {
		t.Fatal("a re-authentication with another mechanism was answered")
	}

	c = loggedIn(t, addr)
	if hs := handshake(t, c, 1, "GSSAPI"); hs.ErrorCode != 33 {
		t.Fatalf("GSSAPI: %d, want UNSUPPORTED_SASL_MECHANISM", hs.ErrorCode)
	}
	expectClosed(t, c)

	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	for _, req := range []kmsg.Request{apiVersions(3), md} {
		c = loggedIn(t, addr)
		handshake(t, c, 1, scram.SHA256)
		if _, err := c.Write(frame(req, 4)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readAnswer(t, c); err == nil {
			t.Fatalf("%s answered during a re-authentication", kmsg.NameForKey(req.Key()))
		}
	}
	// Garbage: a raw token that is no SCRAM message (handshake v0), and
	// a handshake whose body does not decode.
	c = loggedIn(t, addr)
	if hs := handshake(t, c, 0, scram.SHA256); hs.ErrorCode != 0 {
		t.Fatalf("v0 handshake %d", hs.ErrorCode)
	}
	if _, err := c.Write([]byte{0, 0, 0, 3, 0xff, 0xfe, 0xfd}); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	c = loggedIn(t, addr)
	bad := frame(kmsg.NewPtrSASLHandshakeRequest(), 5)
	bad = append(bad[:len(bad)-2], 0x7f, 0xff) // a mechanism longer than the frame
	if _, err := c.Write(bad); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)

	if got := testutil.ToFloat64(s.metrics.reauth.WithLabelValues(scram.SHA512, "failure")); got != 1 {
		t.Fatalf("failed re-authentications %v", got)
	}
	if got := testutil.ToFloat64(s.metrics.reauth.WithLabelValues("other", "unsupported")); got != 1 {
		t.Fatalf("unsupported re-authentications %v", got)
	}
}

// After its session expires a connection may still re-authenticate, but
// any other request closes it unanswered, logged with the user and the
// address.
func TestSASLExpiredSessionCloses(t *testing.T) {
	const lifetime = 300 * time.Millisecond
	var logs syncBuffer
	s, addr, _ := serveReauth(t, lifetime, &logs)

	// A quiet spell longer than the session, then a re-authentication:
	// the connection goes on.
	c := loggedIn(t, addr)
	time.Sleep(2 * lifetime) // the session's end is the condition waited for
	if hs := handshake(t, c, 1, scram.SHA256); hs.ErrorCode != 0 {
		t.Fatalf("handshake after expiry %d", hs.ErrorCode)
	}
	if resp := login(t, c, 1, scramAuth("wonderland")); resp.ErrorCode != 0 {
		t.Fatalf("re-authentication after expiry: %d", resp.ErrorCode)
	}
	mustAnswerApiVersions(t, c, 20)

	// Requests without re-authenticating: answered until the session
	// ends, then the connection is closed.
	c = loggedIn(t, addr)
	closed := false
	for i := range 1000 {
		av := kmsg.NewPtrApiVersionsResponse()
		if err := roundTrip(t, c, apiVersions(3), av, int32(100+i)); err != nil {
			closed = true
			break
		}
		time.Sleep(lifetime / 10)
	}
	if !closed {
		t.Fatal("an expired session still answers")
	}
	if got := testutil.ToFloat64(s.metrics.closed.WithLabelValues("session_expired")); got != 1 {
		t.Fatalf("session_expired closes %v", got)
	}
	got := logs.String()
	if !strings.Contains(got, "session expired") || !strings.Contains(got, "user=alice") || !strings.Contains(got, "remote="+c.LocalAddr().String()) {
		t.Fatalf("log lacks the expired session's user or address:\n%s", got)
	}
}
