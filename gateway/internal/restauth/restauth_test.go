package restauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"tidemark.io/services/platform/identity"
)

const token = "0123456789abcdef-alice"

func tokensFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokensFileErrorsNameTheLineNotTheToken(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"# c\n" + token + "\n", "line 2: 1 fields"},
		{token + " alice bob\n", "line 1: 3 fields"},
		{"short alice\n", "line 1: the token is shorter than 16 characters"},
		{token + " al\x01ice\n", "line 1: user name"},
		{token + " alice\n\n" + token + " bob\n", "line 3: the token is also on an earlier line"},
		{token + " broker-2\n", `line 1: "broker-2" is the name of a cluster broker, not a user`},
		{token + " gateway\n", `line 1: "gateway" is the name of a cluster gateway, not a user`},
	} {
		_, err := LoadTokens(tokensFile(t, tc.content), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.content, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "short alice") {
			t.Errorf("%q: the error quotes the token: %v", tc.content, err)
		}
	}
	if _, err := LoadTokens(filepath.Join(t.TempDir(), "none"), nil); err == nil || !strings.Contains(err.Error(), "--rest.tokens.file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestTokensLookup(t *testing.T) {
	tk, err := LoadTokens(tokensFile(t, "# users\n\n  "+token+"\talice  \n"+token+"-2 bob\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{token: "alice", token + "-2": "bob", token + "-3": "", "": "", token[:20]: ""} {
		if got, ok := tk.Lookup(tok); got != want || ok != (want != "") {
			t.Errorf("Lookup(%q) = %q %v, want %q", tok, got, ok, want)
		}
	}
}

func TestSessionsExpire(t *testing.T) {
	s := newSessions(time.Hour)
	now := time.Now()
	s.now = func() time.Time { return now }
	id, exp := s.open(digestOf(token), "alice")
	if !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("expiry %v", exp)
	}
	if ss, ok := s.get(id); !ok || ss.user != "alice" {
		t.Fatalf("fresh session: %+v %v", ss, ok)
	}
	if _, ok := s.get(id + "x"); ok {
		t.Fatal("an unknown id was accepted")
	}
	now = now.Add(time.Hour)
	if _, ok := s.get(id); ok {
		t.Fatal("an expired session was accepted")
	}
	if len(s.byID) != 0 {
		t.Fatal("the expired session was kept")
	}
}

// One token's holder logging in again and again ends only its own oldest
// sessions, never another user's. Before, past maxSessions logins of one
// token the others' sessions were dropped.
func TestOneTokensLoginsEndOnlyItsOwnSessions(t *testing.T) {
	s := newSessions(time.Hour)
	now := time.Now()
	s.now = func() time.Time { return now }
	other, _ := s.open(digestOf("another-token-of-bob"), "bob")
	first, _ := s.open(digestOf(token), "alice")
	for range maxSessions {
		now = now.Add(time.Millisecond)
		s.open(digestOf(token), "alice")
	}
	if _, ok := s.get(other); !ok {
		t.Fatal("another user's session was ended by one token's logins")
	}
	if _, ok := s.get(first); ok {
		t.Fatal("the token's oldest session outlived its per-token bound")
	}
	if len(s.byID) != maxSessionsPerToken+1 {
		t.Fatalf("%d sessions kept, want %d of the token and the other user's", len(s.byID), maxSessionsPerToken)
	}
}

func TestProtectStripsCredentialsEvenWhenOff(t *testing.T) {
	var seen http.Header
	h := New(Options{}).Protect(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() }))
	r := httptest.NewRequest("GET", "/v1/cluster", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Cookie", SessionCookie+"=x")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen.Get("Authorization") != "" || seen.Get("Cookie") != "" {
		t.Fatalf("credentials passed on: %v", seen)
	}
}

// The forwarding names exactly the context's user and drops whatever
// on-behalf-of or authorization metadata the context carried.
func TestForwardReplacesWhatTheContextCarries(t *testing.T) {
	ctx := metadata.AppendToOutgoingContext(context.Background(),
		identity.OnBehalfOf, "admin", "authorization", "Bearer x", "x-other", "kept")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		who  func(context.Context) (string, bool)
		want string
	}{
		{"request user", WithUser(ctx, "alice"), UserFrom, "alice"},
		{"no user", ctx, UserFrom, ""},
		{"fixed user", ctx, func(context.Context) (string, bool) { return "bob", true }, "bob"},
	} {
		md, _ := metadata.FromOutgoingContext(outgoing(tc.ctx, tc.who))
		if v := strings.Join(md.Get(identity.OnBehalfOf), ","); v != tc.want {
			t.Errorf("%s: on-behalf-of %q, want %q", tc.name, v, tc.want)
		}
		if len(md.Get("authorization")) != 0 || strings.Join(md.Get("x-other"), "") != "kept" {
			t.Errorf("%s: metadata %v", tc.name, md)
		}
	}
}

// A forwarded REST call names the address the request came from (the
// entry grpc-gateway appended last to x-forwarded-for), never one the
// client wrote.
func TestForwardNamesTheRequestsAddress(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   []string
		want string
	}{
		{"from the connection", []string{"x-forwarded-for", "10.0.0.9"}, "10.0.0.9"},
		{"after the client's own entries", []string{"x-forwarded-for", "1.2.3.4, 10.0.0.9"}, "10.0.0.9"},
		{"a client's host header is dropped", []string{identity.ClientHost, "1.2.3.4"}, ""},
		{"no REST request", nil, ""},
	} {
		ctx := WithUser(metadata.AppendToOutgoingContext(context.Background(), tc.md...), "alice")
		md, _ := metadata.FromOutgoingContext(outgoing(ctx, UserFrom))
		if v := strings.Join(md.Get(identity.ClientHost), ","); v != tc.want {
			t.Errorf("%s: client host %q, want %q", tc.name, v, tc.want)
		}
	}
}
