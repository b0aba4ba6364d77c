package kafkaapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"tidemark.io/services/platform/connlimit"
	"tidemark.io/services/platform/scram"
)

// serveSASL runs a Server whose one listener is SASL_PLAINTEXT, with user
// alice (password "wonderland") stored for both SCRAM mechanisms.
func serveSASL(t *testing.T, o SASLOptions) (*Server, string) {
	t.Helper()
	return serveSASLLogging(t, o, nil)
}

func serveSASLLogging(t *testing.T, o SASLOptions, logger *slog.Logger) (*Server, string) {
	t.Helper()
	creds := map[string]scram.Credential{}
	for _, m := range scram.Mechanisms {
		c, err := scram.FromPassword(m, "wonderland", scram.NewSalt(), scram.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds[m] = c
	}
	o.Credentials = func(user, mech string) (scram.Credential, bool) {
		c, ok := creds[mech]
		return c, ok && user == "alice"
	}
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
	return s, lis.Addr().String()
}

// roundTrip sends req and decodes its answer into resp (a flexible
// answer's header tags skipped).
func roundTrip(t *testing.T, c net.Conn, req kmsg.Request, resp kmsg.Response, corr int32) error {
	t.Helper()
	if _, err := c.Write(frame(req, corr)); err != nil {
		return err
	}
	got, body, err := readAnswer(t, c)
	if err != nil {
		return err
	}
	if got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return nil
}

func handshake(t *testing.T, c net.Conn, v int16, mech string) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(v)
	req.Mechanism = mech
	resp := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(t, c, req, resp, 1); err != nil {
		t.Fatal(err)
	}
	return resp
}

// login runs franz-go's SCRAM client over SaslAuthenticate (version v)
// and returns the server's last answer.
func login(t *testing.T, c net.Conn, v int16, m sasl.Mechanism) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	sess, msg, err := m.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(v)
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(t, c, req, resp, int32(10+i)); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return resp
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			t.Fatalf("client refused the server's answer: %v", err)
		}
		if done {
			return resp
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return nil
}

// expectClosed reads until the server closes the connection.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	var b [1]byte
	if _, err := c.Read(b[:]); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		var op *net.OpError
		if !errors.As(err, &op) { // a reset is closed too
			t.Fatalf("connection still open (read: %v)", err)
		}
	}
}

func scramAuth(pass string) sasl.Mechanism {
	return kscram.Auth{User: "alice", Pass: pass}.AsSha256Mechanism()
}

// A login with the right password lets the connection on; SASL requests
// after it are ILLEGAL_SASL_STATE, as Kafka answers them.
func TestSASLLoginThenRequests(t *testing.T) {
	for _, v := range []int16{0, 1, 2} { // v2 is flexible
		s, addr := serveSASL(t, SASLOptions{})
		c := dial(t, addr)
		av := kmsg.NewPtrApiVersionsResponse()
		if err := roundTrip(t, c, apiVersions(3), av, 0); err != nil || av.ErrorCode != 0 {
			t.Fatalf("ApiVersions before login: %v %d", err, av.ErrorCode)
		}
		hs := handshake(t, c, 1, scram.SHA256)
		if hs.ErrorCode != 0 || !slices.Equal(hs.SupportedMechanisms, DefaultSASLMechanisms) {
			t.Fatalf("handshake %d %v", hs.ErrorCode, hs.SupportedMechanisms)
		}
		if resp := login(t, c, v, scramAuth("wonderland")); resp.ErrorCode != 0 {
			t.Fatalf("v%d: login failed: %d %v", v, resp.ErrorCode, resp.ErrorMessage)
		}
		if err := roundTrip(t, c, apiVersions(3), av, 20); err != nil || av.ErrorCode != 0 {
			t.Fatalf("ApiVersions after login: %v %d", err, av.ErrorCode)
		}
		if hs := handshake(t, c, 1, scram.SHA256); hs.ErrorCode != errIllegalSASLState {
			t.Fatalf("handshake after login: %d, want ILLEGAL_SASL_STATE", hs.ErrorCode)
		}
		if got := testutil.ToFloat64(s.metrics.sasl.WithLabelValues(scram.SHA256, "success")); got != 1 {
			t.Fatalf("successes %v", got)
		}
	}
}

// A wrong password is answered SASL_AUTHENTICATION_FAILED with Kafka's
// text, and the connection closed.
func TestSASLWrongPasswordFailsAndCloses(t *testing.T) {
	s, addr := serveSASL(t, SASLOptions{})
	for _, m := range []sasl.Mechanism{scramAuth("wonderlanD"), kscram.Auth{User: "mallory", Pass: "wonderland"}.AsSha256Mechanism()} {
		c := dial(t, addr)
		handshake(t, c, 1, scram.SHA256)
		resp := login(t, c, 1, m)
		want := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
		if resp.ErrorCode != 58 || resp.ErrorMessage == nil || *resp.ErrorMessage != want {
			t.Fatalf("answer %d %v, want 58 %q", resp.ErrorCode, resp.ErrorMessage, want)
		}
		expectClosed(t, c)
	}
	if got := testutil.ToFloat64(s.metrics.sasl.WithLabelValues(scram.SHA256, "failure")); got != 2 {
		t.Fatalf("failures %v", got)
	}
}

// A mechanism not enabled is UNSUPPORTED_SASL_MECHANISM with the enabled
// list, then closed; PLAIN is one until enabled.
func TestSASLUnknownMechanism(t *testing.T) {
	_, addr := serveSASL(t, SASLOptions{})
	for _, mech := range []string{"GSSAPI", scram.Plain} {
		c := dial(t, addr)
		hs := handshake(t, c, 1, mech)
		if hs.ErrorCode != 33 || !slices.Equal(hs.SupportedMechanisms, []string{scram.SHA256, scram.SHA512}) {
			t.Fatalf("%s: %d %v, want 33 with the enabled list", mech, hs.ErrorCode, hs.SupportedMechanisms)
		}
		expectClosed(t, c)
	}
}

// Before login only ApiVersions, SaslHandshake and SaslAuthenticate are
// read: anything else (or SaslAuthenticate before the handshake) closes
// the connection unanswered.
func TestSASLRequestsBeforeLoginAreRefused(t *testing.T) {
	_, addr := serveSASL(t, SASLOptions{})
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	auth.SASLAuthBytes = []byte("n,,n=alice,r=abc")
	for _, req := range []kmsg.Request{md, auth} {
		c := dial(t, addr)
		if _, err := c.Write(frame(req, 3)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readAnswer(t, c); err == nil {
			t.Fatalf("%s answered before login", kmsg.NameForKey(req.Key()))
		}
	}
	// After the handshake too.
	c := dial(t, addr)
	handshake(t, c, 1, scram.SHA512)
	if _, err := c.Write(frame(md, 4)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAnswer(t, c); err == nil {
		t.Fatal("Metadata answered between handshake and login")
	}
}

// Handshake v0: the SASL tokens follow raw, each with a 4-byte size.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	_, addr := serveSASL(t, SASLOptions{})
	c := dial(t, addr)
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
	av := kmsg.NewPtrApiVersionsResponse()
	if err := roundTrip(t, c, apiVersions(3), av, 5); err != nil || av.ErrorCode != 0 {
		t.Fatalf("ApiVersions after a v0 login: %v %d", err, av.ErrorCode)
	}
}

// A client that does not finish its login in time is closed.
func TestSASLLoginDeadline(t *testing.T) {
	s, addr := serveSASL(t, SASLOptions{Timeout: 100 * time.Millisecond})
	c := dial(t, addr)
	handshake(t, c, 1, scram.SHA256)
	expectClosed(t, c)
	if got := testutil.ToFloat64(s.metrics.closed.WithLabelValues("auth_timeout")); got != 1 {
		t.Fatalf("auth_timeout closes %v", got)
	}
}

// On a listener without SASL the SASL requests are ILLEGAL_SASL_STATE.
func TestSASLRequestsOnAPlainListener(t *testing.T) {
	_, addr := serve(t, Limits{})
	c := dial(t, addr)
	if hs := handshake(t, c, 1, scram.SHA256); hs.ErrorCode != errIllegalSASLState {
		t.Fatalf("handshake %d, want ILLEGAL_SASL_STATE", hs.ErrorCode)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A client failing to log in over and over, each time on a new
// connection, is counted every time but warned about once per
// connlimit.RefusedWarnEvery: it cannot flood the log.
func TestFailedLoginsFromOneAddressAreWarnedOnce(t *testing.T) {
	var logs syncBuffer
	s, addr := serveSASLLogging(t, SASLOptions{Mechanisms: []string{scram.SHA256, scram.Plain}}, slog.New(slog.NewTextHandler(&logs, nil)))
	const attempts = 5
	for range attempts {
		c := dial(t, addr)
		handshake(t, c, 1, scram.Plain)
		if resp := login(t, c, 1, plain.Auth{User: "alice", Pass: "guess"}.AsMechanism()); resp.ErrorCode != 58 {
			t.Fatalf("answer %d", resp.ErrorCode)
		}
		expectClosed(t, c)
	}
	if n := testutil.ToFloat64(s.metrics.sasl.WithLabelValues(scram.Plain, "failure")); n != attempts {
		t.Fatalf("failed logins counted %v, want %d", n, attempts)
	}
	if n := strings.Count(logs.String(), "kafka SASL authentication failed"); n != 1 {
		t.Fatalf("%d warnings for %d failed logins within %v, want 1:\n%s", n, attempts, connlimit.RefusedWarnEvery, logs.String())
	}
}

// A failed login is logged with the user and the client's address, never
// the password (PLAIN carries it in the clear).
func TestSASLFailedLoginIsLoggedWithoutThePassword(t *testing.T) {
	var logs syncBuffer
	_, addr := serveSASLLogging(t, SASLOptions{Mechanisms: []string{scram.SHA256, scram.Plain}}, slog.New(slog.NewTextHandler(&logs, nil)))
	c := dial(t, addr)
	handshake(t, c, 1, scram.Plain)
	if resp := login(t, c, 1, plain.Auth{User: "alice", Pass: "not-the-password"}.AsMechanism()); resp.ErrorCode != 58 {
		t.Fatalf("answer %d", resp.ErrorCode)
	}
	expectClosed(t, c)
	got := logs.String()
	if !strings.Contains(got, "user=alice") || !strings.Contains(got, "remote="+c.LocalAddr().String()) || !strings.Contains(got, "mechanism=PLAIN") {
		t.Fatalf("log lacks the user, address or mechanism:\n%s", got)
	}
	if strings.Contains(got, "not-the-password") {
		t.Fatalf("log shows the password:\n%s", got)
	}
	// PLAIN enabled: the right password logs in.
	c = dial(t, addr)
	handshake(t, c, 1, scram.Plain)
	if resp := login(t, c, 1, plain.Auth{User: "alice", Pass: "wonderland"}.AsMechanism()); resp.ErrorCode != 0 {
		t.Fatalf("PLAIN login: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
}
