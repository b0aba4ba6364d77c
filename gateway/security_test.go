package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"tidemark.io/gateway/internal/restauth"
	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/pki"
)

// Tokens of the tests' tokens file.
const (
	aliceToken = "alice-token-0123456789abcdef"
	eveToken   = "eve-token-0123456789abcdef"
	malToken   = "mallet-token-0123456789abcdef"
)

// fakeAdmin is a controller's AdminService over mutual TLS that records
// who each call came from, as the services see it (identity.FromContext),
// and keeps a set of topics that DeleteTopics changes. It refuses eve with
// TOPIC_AUTHORIZATION_FAILED and mallet with a plain PermissionDenied, as a
// service's ACLs would.
type fakeAdmin struct {
	adminv1.UnimplementedAdminServiceServer

	mu     sync.Mutex
	topics map[string]bool
	calls  []seenCall
}

type seenCall struct {
	method string
	who    identity.Principal
	md     metadata.MD
}

func (f *fakeAdmin) note(ctx context.Context, method string) identity.Principal {
	md, _ := metadata.FromIncomingContext(ctx)
	who := identity.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, seenCall{method, who, md})
	return who
}

// seen returns the calls made so far and forgets them.
func (f *fakeAdmin) seen() []seenCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeAdmin) hasTopic(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.topics[name]
}

func (f *fakeAdmin) DescribeCluster(ctx context.Context, _ *adminv1.DescribeClusterRequest) (*adminv1.DescribeClusterResponse, error) {
	f.note(ctx, "DescribeCluster")
	return &adminv1.DescribeClusterResponse{ClusterId: "fake"}, nil
}

func (f *fakeAdmin) DeleteTopics(ctx context.Context, req *adminv1.DeleteTopicsRequest) (*adminv1.DeleteTopicsResponse, error) {
	who := f.note(ctx, "DeleteTopics")
	switch who.Name {
	case "eve":
		return nil, kerr.ToStatus(kerr.New(kerr.TopicAuthorizationFailed, "User:eve may not delete %v", req.GetTopics())).Err()
	case "mallet":
		return nil, status.Error(codes.PermissionDenied, "User:mallet may not delete topics")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &adminv1.DeleteTopicsResponse{}
	for _, t := range req.GetTopics() {
		delete(f.topics, t)
		resp.Results = append(resp.Results, &adminv1.DeleteTopicResult{Name: t})
	}
	return resp, nil
}

func (f *fakeAdmin) WatchCluster(req *adminv1.WatchClusterRequest, s adminv1.AdminService_WatchClusterServer) error {
	f.note(s.Context(), "WatchCluster")
	if err := s.Send(&adminv1.WatchClusterResponse{Time: time.Now().UnixMilli(),
		Cluster: &adminv1.DescribeClusterResponse{ClusterId: "fake"}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// secureSetup is a gateway with HTTPS and REST authentication in front of
// a fake controller, every link with certificates of one test CA.
type secureSetup struct {
	dir, otherDir string
	tokens        string
	admin         *fakeAdmin
	g             *Gateway
	logs          *syncBuffer
	base          string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startSecure(t *testing.T) *secureSetup {
	t.Helper()
	s := &secureSetup{dir: t.TempDir(), otherDir: t.TempDir(), logs: &syncBuffer{},
		admin: &fakeAdmin{topics: map[string]bool{"orders": true, "payments": true}}}
	if _, err := pki.Ensure(s.dir, pki.Leaf{Name: "gateway"}, pki.Leaf{Name: "controller-1"}, pki.Leaf{Name: "carol"}); err != nil {
		t.Fatal(err)
	}
	// The same user name, signed by a CA the cluster does not trust.
	if _, err := pki.Ensure(s.otherDir, pki.Leaf{Name: "carol"}); err != nil {
		t.Fatal(err)
	}
	s.tokens = filepath.Join(s.dir, "tokens")
	writeTokens(t, s.tokens, "# user tokens\n"+aliceToken+" alice\n\n"+eveToken+"\teve\n"+malToken+" mallet\n")

	creds, err := pki.Options(s.dir, "controller-1").ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(creds)
	adminv1.RegisterAdminServiceServer(srv, s.admin)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	o := DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.Controllers = config.StringList{lis.Addr().String()}
	o.Brokers = config.StringList{lis.Addr().String()}
	o.RetryTimeout, o.RequestTimeout = time.Second, 5*time.Second
	o.TLS = pki.Options(s.dir, "gateway")
	o.Auth.TokensFile = s.tokens
	log := slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s.g, err = Start(context.Background(), o, log)
	if err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.g.Stop(ctx)
	})
	s.base = "https://" + s.g.Addr()
	return s
}

func writeTokens(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// client is an HTTPS client trusting the test CA, presenting the
// certificate of name in certDir when name is not empty.
func (s *secureSetup) client(t *testing.T, certDir, name string) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(pki.CAPath(s.dir))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool}
	if name != "" {
		c, err := tls.LoadX509KeyPair(pki.CertPath(certDir, name), pki.KeyPath(certDir, name))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
}

// req is one request of a test: headers as pairs; "Host" sets the Host.
func (s *secureSetup) req(t *testing.T, hc *http.Client, method, path, body string, hdr ...string) answer {
	t.Helper()
	resp, err := s.send(hc, method, path, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

func (s *secureSetup) send(hc *http.Client, method, path, body string, hdr ...string) (*http.Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			r.Host = hdr[i+1]
			continue
		}
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return hc.Do(r)
}

const deleteOrders = `{"topics":["orders"]}`

var jsonCT = []string{"Content-Type", "application/json"}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

func hdrs(parts ...[]string) []string { return slices.Concat(parts...) }

// nothingChanged requires that the controller saw no call and still has
// the topic orders.
func (s *secureSetup) nothingChanged(t *testing.T, what string) {
	t.Helper()
	if calls := s.admin.seen(); len(calls) != 0 {
		t.Fatalf("%s: the controller was called: %+v", what, calls)
	}
	if !s.admin.hasTopic("orders") {
		t.Fatalf("%s: topic orders is gone", what)
	}
}

// onlyCall requires exactly one call of method, made for user through the
// gateway, without the caller's credentials, and returns it.
func (s *secureSetup) onlyCall(t *testing.T, what, method, user string) seenCall {
	t.Helper()
	calls := s.admin.seen()
	if len(calls) != 1 || calls[0].method != method {
		t.Fatalf("%s: calls %+v, want one %s", what, calls, method)
	}
	c := calls[0]
	want := identity.Principal{Name: user, Role: identity.User, ID: -1, Via: "gateway"}
	if c.who != want {
		t.Fatalf("%s: the service saw %+v, want %+v", what, c.who, want)
	}
	for k := range c.md {
		if k == "authorization" || k == "cookie" || strings.HasPrefix(k, "grpcgateway-") {
			t.Fatalf("%s: the caller's header %q reached the service: %v", what, k, c.md)
		}
	}
	return c
}

func TestRESTRefusesWhatIsNotAuthenticated(t *testing.T) {
	s := startSecure(t)
	anon := s.client(t, "", "")

	a := s.req(t, anon, "POST", "/v1/topics:delete", deleteOrders, jsonCT...)
	e := expectError(t, a, "delete without credentials", http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	if !strings.Contains(e.Message, "Authorization: Bearer") || a.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("401 without the way to authenticate: %+v %v", e, a.header)
	}
	s.nothingChanged(t, "delete without credentials")

	a = s.req(t, anon, "POST", "/v1/topics:delete", deleteOrders, hdrs(jsonCT, bearer("not-a-token-of-this-cluster"))...)
	e = expectError(t, a, "delete with a wrong token", http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	if e.Message != "the bearer token is not valid" {
		t.Fatalf("wrong token: message %q", e.Message)
	}
	s.nothingChanged(t, "delete with a wrong token")

	a = s.req(t, anon, "POST", "/v1/topics:delete", deleteOrders, hdrs(jsonCT, []string{"Authorization", "Basic YWxpY2U6eA=="})...)
	expectError(t, a, "basic authorization", http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	s.nothingChanged(t, "basic authorization")

	for _, path := range []string{"/v1/cluster", "/v1/cluster:watch", "/console/events", "/console/api/state", "/console/api/config"} {
		expectError(t, s.req(t, anon, "GET", path, ""), "GET "+path+" without credentials", http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	}
	s.nothingChanged(t, "reads without credentials")

	// A certificate of the cluster's own roles is not a REST user.
	node := s.client(t, s.dir, "controller-1")
	e = expectError(t, s.req(t, node, "POST", "/v1/topics:delete", deleteOrders, jsonCT...), "delete with a controller's certificate",
		http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	if !strings.Contains(e.Message, `"controller-1" is the name of a cluster controller`) {
		t.Fatalf("controller certificate: %q", e.Message)
	}
	s.nothingChanged(t, "delete with a controller's certificate")

	// The page, its assets and the health check stay open.
	for _, path := range []string{"/", "/console/static/app.js", "/healthz", "/openapi.json"} {
		if a := s.req(t, anon, "GET", path, ""); a.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
	}
	// gRPC health on the same port, over TLS (ALPN h2).
	dial, err := pki.Options(s.dir, "carol").DialOption()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(s.g.Addr(), dial)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hr, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health over TLS: %v %v", hr, err)
	}
}

func TestRESTTokenAndCertificateAuthenticateAndForwardTheUser(t *testing.T) {
	s := startSecure(t)
	anon := s.client(t, "", "")

	if a := s.req(t, anon, "GET", "/v1/cluster", "", bearer(aliceToken)...); a.status != http.StatusOK || !strings.Contains(string(a.body), `"fake"`) {
		t.Fatalf("GET /v1/cluster with alice's token: %d %s", a.status, a.body)
	}
	s.onlyCall(t, "describe with a token", "DescribeCluster", "alice")

	// A header that would name another user to the services is not passed on.
	a := s.req(t, anon, "POST", "/v1/topics:delete", deleteOrders,
		hdrs(jsonCT, bearer(aliceToken), []string{"Grpc-Metadata-Tidemark-On-Behalf-Of", "admin"})...)
	if a.status != http.StatusOK {
		t.Fatalf("delete with alice's token: %d %s", a.status, a.body)
	}
	c := s.onlyCall(t, "delete with a token", "DeleteTopics", "alice")
	if v := c.md.Get(identity.OnBehalfOf); len(v) != 1 || v[0] != "alice" {
		t.Fatalf("on-behalf-of %v, want [alice]", v)
	}
	if s.admin.hasTopic("orders") {
		t.Fatal("topic orders still there after an authenticated delete")
	}

	// A client certificate of the cluster's CA: its Common Name is the user.
	carol := s.client(t, s.dir, "carol")
	if a := s.req(t, carol, "GET", "/v1/cluster", ""); a.status != http.StatusOK {
		t.Fatalf("GET /v1/cluster with carol's certificate: %d %s", a.status, a.body)
	}
	s.onlyCall(t, "describe with a certificate", "DescribeCluster", "carol")

	// The same name from another CA does not get through the handshake.
	stranger := s.client(t, s.otherDir, "carol")
	resp, err := s.send(stranger, "POST", "/v1/topics:delete", `{"topics":["payments"]}`, jsonCT...)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a certificate of another CA was accepted: %d", resp.StatusCode)
	}
	// The client may see the server's alert or just a closed connection;
	// the server says why.
	waitFor(t, 10*time.Second, "the gateway's log of the refused handshake", func() bool {
		return strings.Contains(s.logs.String(), "certificate signed by unknown authority")
	})
	if calls := s.admin.seen(); len(calls) != 0 || !s.admin.hasTopic("payments") {
		t.Fatalf("another CA's certificate reached the controller: %+v", calls)
	}

	// A stream: the watch's call speaks for the user too.
	resp, err = s.send(anon, "GET", "/v1/cluster:watch", "", bearer(aliceToken)...)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(line, `{"result":`) || err != nil {
		t.Fatalf("watch with a token: %d %q %v", resp.StatusCode, line, err)
	}
	s.onlyCall(t, "watch with a token", "WatchCluster", "alice")
}

func TestRESTAnswersTheServicesRefusalsAs403(t *testing.T) {
	s := startSecure(t)
	anon := s.client(t, "", "")
	for _, tc := range []struct {
		token, user, name string
	}{
		{eveToken, "eve", "TOPIC_AUTHORIZATION_FAILED"},
		{malToken, "mallet", "CLUSTER_AUTHORIZATION_FAILED"},
	} {
		a := s.req(t, anon, "POST", "/v1/topics:delete", deleteOrders, hdrs(jsonCT, bearer(tc.token))...)
		e := expectError(t, a, tc.user+" deletes", http.StatusForbidden, tc.name)
		if !strings.Contains(e.Message, "User:"+tc.user) {
			t.Fatalf("%s: message %q does not carry the service's words", tc.user, e.Message)
		}
		s.onlyCall(t, tc.user+" deletes", "DeleteTopics", tc.user)
		if !s.admin.hasTopic("orders") {
			t.Fatalf("%s: topic deleted though refused", tc.user)
		}
	}
}

func TestRESTRefusesCrossSiteWrites(t *testing.T) {
	s := startSecure(t)
	anon := s.client(t, "", "")
	auth := bearer(aliceToken)

	a := s.req(t, anon, "POST", "/v1/topics:delete", deleteOrders, hdrs(auth, []string{"Content-Type", "text/plain;charset=UTF-8"})...)
	e := expectError(t, a, "text/plain delete", http.StatusUnsupportedMediaType, "INVALID_REQUEST")
	if e.Field != "Content-Type" || !strings.Contains(e.Message, `"text/plain;charset=UTF-8"`) {
		t.Fatalf("text/plain delete: %+v, want the content type named", e)
	}
	s.nothingChanged(t, "text/plain delete")

	a = s.req(t, anon, "POST", "/v1/elect-leaders", "", auth...)
	e = expectError(t, a, "POST without a body or Content-Type", http.StatusUnsupportedMediaType, "INVALID_REQUEST")
	if !strings.Contains(e.Message, "none was sent") {
		t.Fatalf("no content type: %q", e.Message)
	}
	s.nothingChanged(t, "POST without Content-Type")

	a = s.req(t, anon, "POST", "/v1/login", `{"token":"`+aliceToken+`"}`, "Content-Type", "application/x-www-form-urlencoded")
	expectError(t, a, "form login", http.StatusUnsupportedMediaType, "INVALID_REQUEST")
	if a.header.Get("Set-Cookie") != "" {
		t.Fatal("a form login opened a session")
	}

	a = s.req(t, anon, "POST", "/v1/topics:delete", deleteOrders, hdrs(jsonCT, auth, []string{"Origin", "https://evil.example"})...)
	expectError(t, a, "cross-origin delete", http.StatusForbidden, "POLICY_VIOLATION")
	s.nothingChanged(t, "cross-origin delete")

	// DNS rebinding: a page of evil.example whose name now resolves to the
	// gateway sends its own name as Host.
	for _, path := range []string{"/v1/topics:delete", "/v1/brokers/1/faults"} {
		a = s.req(t, anon, "POST", path, deleteOrders, hdrs(jsonCT, auth, []string{"Host", "evil.example:8080"})...)
		e = expectError(t, a, "wrong Host on "+path, http.StatusMisdirectedRequest, "INVALID_REQUEST")
		if e.Field != "Host" || !strings.Contains(e.Message, `"evil.example:8080"`) {
			t.Fatalf("wrong Host: %+v, want the host named", e)
		}
	}
	a = s.req(t, anon, "GET", "/", "", "Host", "evil.example")
	expectError(t, a, "console page with a wrong Host", http.StatusMisdirectedRequest, "INVALID_REQUEST")
	s.nothingChanged(t, "wrong Host")

	// Names of the certificate and localhost are the gateway's.
	for _, host := range []string{"localhost", "gateway", "[::1]:8080"} {
		if a := s.req(t, anon, "GET", "/v1/cluster", "", hdrs(auth, []string{"Host", host})...); a.status != http.StatusOK {
			t.Fatalf("Host %s: %d %s", host, a.status, a.body)
		}
		s.onlyCall(t, "Host "+host, "DescribeCluster", "alice")
	}
}

func TestConsoleLoginSessionWorksForEventStreams(t *testing.T) {
	s := startSecure(t)
	anon := s.client(t, "", "")

	a := s.req(t, anon, "POST", "/v1/login", `{"token":"wrong-token-0123456789"}`, jsonCT...)
	expectError(t, a, "login with a wrong token", http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	if a.header.Get("Set-Cookie") != "" {
		t.Fatal("a refused login set a cookie")
	}

	a = s.req(t, anon, "POST", "/v1/login", `{"token":"`+aliceToken+`"}`, jsonCT...)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"user":"alice"`) {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	cookie := a.header.Get("Set-Cookie")
	for _, attr := range []string{restauth.SessionCookie + "=", "HttpOnly", "Secure", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, attr) {
			t.Fatalf("session cookie %q has no %s", cookie, attr)
		}
	}
	session := []string{"Cookie", strings.SplitN(cookie, ";", 2)[0]}

	// The console's event stream (EventSource sends cookies, not headers).
	resp, err := s.send(anon, "GET", "/console/events", "", session...)
	if err != nil {
		t.Fatal(err)
	}
	events := bufio.NewReader(resp.Body)
	var hello bool
	for i := 0; i < 10 && !hello; i++ {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("console events: %v", err)
		}
		hello = line == "event: hello\n"
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || !hello {
		t.Fatalf("console events with the session: %d %q hello=%v", resp.StatusCode, resp.Header.Get("Content-Type"), hello)
	}

	// The REST watch with the session speaks for alice.
	s.admin.seen() // the console's own watch runs as the gateway
	resp, err = s.send(anon, "GET", "/v1/cluster:watch", "", session...)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(line, `{"result":`) || err != nil {
		t.Fatalf("watch with the session: %d %q %v", resp.StatusCode, line, err)
	}
	var watched bool
	for _, c := range s.admin.seen() {
		if c.method == "WatchCluster" && c.who.Name == "alice" && c.who.Via == "gateway" {
			watched = true
		}
	}
	if !watched {
		t.Fatal("the REST watch with the session did not reach the controller as alice")
	}

	// Logging out ends the session.
	if a := s.req(t, anon, "POST", "/v1/logout", "{}", hdrs(jsonCT, session)...); a.status != http.StatusOK ||
		!strings.Contains(a.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %v %s", a.status, a.header, a.body)
	}
	a = s.req(t, anon, "GET", "/console/api/state", "", session...)
	e := expectError(t, a, "state after logout", http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	if !strings.Contains(e.Message, "log in again") {
		t.Fatalf("after logout: %q", e.Message)
	}
}

func TestTokensFileIsReadAgainWhenItChanges(t *testing.T) {
	s := startSecure(t)
	anon := s.client(t, "", "")
	a := s.req(t, anon, "POST", "/v1/login", `{"token":"`+aliceToken+`"}`, jsonCT...)
	if a.status != http.StatusOK {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	session := []string{"Cookie", strings.SplitN(a.header.Get("Set-Cookie"), ";", 2)[0]}

	const newToken = "alice-second-token-0123456789"
	writeTokens(t, s.tokens, newToken+" alice\n")
	expectError(t, s.req(t, anon, "GET", "/v1/cluster", "", bearer(aliceToken)...), "revoked token",
		http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	e := expectError(t, s.req(t, anon, "GET", "/v1/cluster", "", session...), "session of a revoked token",
		http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	if !strings.Contains(e.Message, "revoked") {
		t.Fatalf("session of a revoked token: %q", e.Message)
	}
	if a := s.req(t, anon, "GET", "/v1/cluster", "", bearer(newToken)...); a.status != http.StatusOK {
		t.Fatalf("new token: %d %s", a.status, a.body)
	}
	s.onlyCall(t, "new token", "DescribeCluster", "alice")

	// A version that does not parse is not taken: the last good one stays.
	writeTokens(t, s.tokens, newToken+" alice extra\n")
	if a := s.req(t, anon, "GET", "/v1/cluster", "", bearer(newToken)...); a.status != http.StatusOK {
		t.Fatalf("after a bad rewrite: %d %s", a.status, a.body)
	}
	if !strings.Contains(s.logs.String(), "line 1: 3 fields") {
		t.Fatalf("the bad tokens file was not reported by line:\n%s", s.logs.String())
	}
}

func TestTokensNeverReachTheLogs(t *testing.T) {
	s := startSecure(t)
	anon := s.client(t, "", "")
	s.req(t, anon, "GET", "/v1/cluster", "", bearer(aliceToken)...)
	s.req(t, anon, "GET", "/v1/cluster", "", bearer(aliceToken+"x")...)
	s.req(t, anon, "POST", "/v1/login", `{"token":"`+eveToken+`"}`, jsonCT...)
	s.req(t, anon, "POST", "/v1/login", `{"token":"`+eveToken+`x"}`, jsonCT...)
	s.req(t, anon, "POST", "/v1/login", `{"token":"`+malToken+`",`, jsonCT...) // malformed JSON
	s.req(t, anon, "POST", "/v1/topics:delete", deleteOrders, hdrs(jsonCT, bearer(eveToken))...)
	writeTokens(t, s.tokens, malToken+" mallet extra\n")
	s.req(t, anon, "GET", "/v1/cluster", "", bearer(malToken)...)
	logs := s.logs.String()
	if !strings.Contains(logs, "REST caller not authenticated") || !strings.Contains(logs, "console login") {
		t.Fatalf("the test did not produce the logs it looks into:\n%s", logs)
	}
	for _, tok := range []string{aliceToken, eveToken, malToken} {
		if strings.Contains(logs, tok) {
			t.Fatalf("token %q in the logs:\n%s", tok, logs)
		}
	}
}

func TestGatewayOptionsRefuseUnsafeAuthSettings(t *testing.T) {
	base := DefaultOptions()
	for _, tc := range []struct {
		name   string
		adjust func(*Options)
		flag   string
	}{
		{"no TLS and no --plaintext", func(o *Options) {}, "--tls.ca"},
		{"tokens with --plaintext only", func(o *Options) { o.TLS.Plaintext = true; o.Auth.TokensFile = "tokens" }, "--rest.tokens.file"},
		{"auth required in plaintext without tokens", func(o *Options) { o.TLS.Plaintext = true; o.Auth.Required = true }, "--rest.auth.required"},
	} {
		o := base
		tc.adjust(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.flag)
		}
	}
}

// With --plaintext and --rest.auth.required the in-process cluster (plain
// gRPC) is behind REST authentication: a delete without a token leaves the
// topic there.
func TestRESTAuthOnAPlaintextClusterProtectsTopics(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("kept", 1, 3, nil)
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, tokens, aliceToken+" alice\n")
	g := startGateway(t, tc, func(o *Options) {
		o.Auth.Required = true
		o.Auth.TokensFile = tokens
	})
	api := newREST(t, g)
	api.fails("POST", "/v1/topics:delete", map[string]any{"topics": []string{"kept"}}, http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	a := api.do("GET", "/v1/topics?topics=kept", nil, "Authorization", "Bearer "+aliceToken)
	var described struct {
		Topics []struct {
			Name      string `json:"name"`
			ErrorCode string `json:"errorCode"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(a.body, &described); a.status != http.StatusOK || err != nil ||
		len(described.Topics) != 1 || described.Topics[0].Name != "kept" {
		t.Fatalf("topic kept after an unauthenticated delete: %d %s", a.status, a.body)
	}
	if a := api.do("POST", "/v1/topics:delete", map[string]any{"topics": []string{"kept"}}, "Authorization", "Bearer "+aliceToken); a.status != http.StatusOK {
		t.Fatalf("delete with the token: %d %s", a.status, a.body)
	}
}

// startSecureCluster starts a cluster over mutual TLS whose nodes read
// acl (the ACL file's lines), and a gateway with HTTPS, its certificate of
// the cluster's CA and tokens (the tokens file's lines).
func startSecureCluster(t *testing.T, acl, tokens string, adjust func(*Options)) (*testCluster, *Gateway) {
	t.Helper()
	aclFile := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	tc := startClusterWith(t, clustertest.Options{Secure: true,
		Adjust:           func(cfg *broker.Config) { cfg.Authz.ACLFile = aclFile },
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = aclFile },
	})
	if _, err := pki.Ensure(tc.PKIDir, pki.Leaf{Name: "gateway"}); err != nil {
		t.Fatal(err)
	}
	tokensFile := filepath.Join(tc.PKIDir, "tokens")
	writeTokens(t, tokensFile, tokens)
	g := startGateway(t, tc, func(o *Options) {
		o.TLS = pki.Options(tc.PKIDir, "gateway")
		o.Auth.TokensFile = tokensFile
		if adjust != nil {
			adjust(o)
		}
	})
	return tc, g
}

// aliceMayDoAll lets alice do anything, and nobody else anything.
const aliceMayDoAll = "allow User:alice All Topic:*\nallow User:alice All Cluster\nallow User:alice All Group:*\n"

// The whole path over mutual TLS: a cluster whose nodes require
// certificates and check ACLs, a gateway with its own certificate (Common
// Name gateway) serving HTTPS and speaking for the REST user.
func TestRESTOverHTTPSToAMutualTLSCluster(t *testing.T) {
	tc, g := startSecureCluster(t, aliceMayDoAll, aliceToken+" alice\n"+eveToken+" eve\n", nil)
	tc.CreateTopic("kept", 1, 3, nil)
	tc.CreateTopic("orders", 1, 3, nil)
	s := &secureSetup{dir: tc.PKIDir, base: "https://" + g.Addr()}
	hc := s.client(t, "", "")
	a := s.req(t, hc, "POST", "/v1/topics:delete", `{"topics":["kept"]}`, jsonCT...)
	expectError(t, a, "delete without a token", http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
	// The brokers and controllers decide on the forwarded user: eve has no ACL.
	a = s.req(t, hc, "POST", "/v1/topics:delete", `{"topics":["kept"]}`, hdrs(jsonCT, bearer(eveToken))...)
	e := expectError(t, a, "delete by eve", http.StatusForbidden, "TOPIC_AUTHORIZATION_FAILED")
	if !strings.Contains(e.Message, "User:eve") {
		t.Fatalf("eve's refusal does not name her: %q", e.Message)
	}
	a = s.req(t, hc, "GET", "/v1/topics?topics=kept", "", bearer(aliceToken)...)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"name":"kept"`) {
		t.Fatalf("topic kept after refused deletes: %d %s", a.status, a.body)
	}
	a = s.req(t, hc, "POST", "/v1/topics:delete", `{"topics":["kept"]}`, hdrs(jsonCT, bearer(aliceToken))...)
	if a.status != http.StatusOK {
		t.Fatalf("delete with alice's token over mutual TLS: %d %s", a.status, a.body)
	}
	// A produce goes to the partition's leader, over mutual TLS too.
	produce := `{"acks":-1,"records":{"records":[{"value":"cGFpZA=="}]}}`
	a = s.req(t, hc, "POST", "/v1/topics/orders/partitions/0/records", produce, hdrs(jsonCT, bearer(aliceToken))...)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"baseOffset"`) {
		t.Fatalf("produce with alice's token over mutual TLS: %d %s", a.status, a.body)
	}
	a = s.req(t, hc, "POST", "/v1/topics/orders/partitions/0/records", produce, hdrs(jsonCT, bearer(eveToken))...)
	expectError(t, a, "produce by eve", http.StatusForbidden, "TOPIC_AUTHORIZATION_FAILED")
}

// The console's view is one watch the gateway makes as itself (its ACL
// allows Describe on the cluster); a page's user sees it only when the
// services let that user describe the cluster.
func TestConsoleViewNeedsTheUsersOwnRight(t *testing.T) {
	tc, g := startSecureCluster(t, aliceMayDoAll+"allow User:gateway Describe Cluster\n",
		aliceToken+" alice\n"+eveToken+" eve\n", nil)
	s := &secureSetup{dir: tc.PKIDir, base: "https://" + g.Addr()}
	hc := s.client(t, "", "")

	e := expectError(t, s.req(t, hc, "GET", "/console/events", "", bearer(eveToken)...), "eve's console events",
		http.StatusForbidden, "CLUSTER_AUTHORIZATION_FAILED")
	if !strings.Contains(e.Message, "User:eve") {
		t.Fatalf("eve's refusal does not name her: %q", e.Message)
	}
	expectError(t, s.req(t, hc, "GET", "/console/api/state", "", bearer(eveToken)...), "eve's console state",
		http.StatusForbidden, "CLUSTER_AUTHORIZATION_FAILED")

	resp, err := s.send(hc, "GET", "/console/events", "", bearer(aliceToken)...)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's console events: %d", resp.StatusCode)
	}
	events := bufio.NewReader(resp.Body)
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("alice's console events ended before a snapshot: %v", err)
		}
		if line == "event: snapshot\n" {
			break
		}
	}
}

// The console's buttons call the REST API under /v1 with the page's login
// cookie: the session speaks for its user exactly as a token does (the
// services judge the user, not the gateway), and the demonstration routes
// stay refused (403) unless the console's actions are on.
func TestConsoleSessionActsAsTheUser(t *testing.T) {
	tc, g := startSecureCluster(t, aliceMayDoAll+"allow User:gateway Describe Cluster\nallow User:eve Describe Cluster\n",
		aliceToken+" alice\n"+eveToken+" eve\n", nil)
	tc.CreateTopic("orders", 1, 3, nil)
	s := &secureSetup{dir: tc.PKIDir, base: "https://" + g.Addr()}
	hc := s.client(t, "", "")
	session := func(token string) []string {
		a := s.req(t, hc, "POST", "/v1/login", `{"token":"`+token+`"}`, jsonCT...)
		if a.status != http.StatusOK {
			t.Fatalf("login: %d %s", a.status, a.body)
		}
		return []string{"Cookie", strings.SplitN(a.header.Get("Set-Cookie"), ";", 2)[0]}
	}
	alice, eve := session(aliceToken), session(eveToken)
	produce := `{"acks":-1,"records":{"records":[{"value":"eA=="},{"value":"eQ=="}]}}`
	const path = "/v1/topics/orders/partitions/0/records"

	a := s.req(t, hc, "POST", path, produce, hdrs(jsonCT, eve)...)
	e := expectError(t, a, "eve produces with her session", http.StatusForbidden, "TOPIC_AUTHORIZATION_FAILED")
	if !strings.Contains(e.Message, "User:eve") {
		t.Fatalf("eve's refusal does not name her: %q", e.Message)
	}
	a = s.req(t, hc, "POST", path, produce, hdrs(jsonCT, alice)...)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"lastOffset":"1"`) {
		t.Fatalf("alice produces with her session: %d %s", a.status, a.body)
	}
	// The session's guard is the REST API's: JSON only, same origin.
	a = s.req(t, hc, "POST", path, produce, hdrs([]string{"Content-Type", "text/plain"}, alice)...)
	expectError(t, a, "a text/plain produce with the session", http.StatusUnsupportedMediaType, "INVALID_REQUEST")
	a = s.req(t, hc, "POST", path, produce, hdrs(jsonCT, alice, []string{"Origin", "https://evil.example"})...)
	expectError(t, a, "a cross-origin produce with the session", http.StatusForbidden, "POLICY_VIOLATION")

	// Console actions off (the default): the demonstration routes are
	// refused even to alice.
	a = s.req(t, hc, "POST", "/v1/brokers/1/faults", `{"fault":{"stall":true}}`, hdrs(jsonCT, alice)...)
	expectError(t, a, "a fault with console actions off", http.StatusForbidden, "POLICY_VIOLATION")
	a = s.req(t, hc, "POST", "/v1/brokers/1/faults", `{"fault":{"stall":true}}`, jsonCT...)
	expectError(t, a, "a fault without a session", http.StatusUnauthorized, "SASL_AUTHENTICATION_FAILED")
}

// A stream lives as long as its credential: the console's event stream
// ends once its session is logged out, and a watch by bearer token once
// the token is removed from the file. Authentication was checked only when
// a request arrived, so open streams went on sending after a logout.
func TestStreamsEndWithTheirSessionOrToken(t *testing.T) {
	s := startSecure(t)
	anon := s.client(t, "", "")
	a := s.req(t, anon, "POST", "/v1/login", `{"token":"`+aliceToken+`"}`, jsonCT...)
	if a.status != http.StatusOK {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	session := []string{"Cookie", strings.SplitN(a.header.Get("Set-Cookie"), ";", 2)[0]}
	// ended reads a stream until it ends and reports when.
	ended := func(body io.ReadCloser) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer body.Close()
			_, _ = io.Copy(io.Discard, body)
		}()
		return done
	}
	events, err := s.send(anon, "GET", "/console/events", "", session...)
	if err != nil || events.StatusCode != http.StatusOK {
		t.Fatalf("console events: %v %v", events, err)
	}
	watch, err := s.send(anon, "GET", "/v1/cluster:watch", "", bearer(aliceToken)...)
	if err != nil || watch.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", watch, err)
	}
	eventsEnded, watchEnded := ended(events.Body), ended(watch.Body)

	if a := s.req(t, anon, "POST", "/v1/logout", "{}", hdrs(jsonCT, session)...); a.status != http.StatusOK {
		t.Fatalf("logout: %d %s", a.status, a.body)
	}
	select {
	case <-eventsEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the console's event stream went on after its session was logged out")
	}
	select {
	case <-watchEnded:
		t.Fatal("the token's watch ended with the other session's logout")
	case <-time.After(1500 * time.Millisecond):
	}
	writeTokens(t, s.tokens, "alice-second-token-0123456789 alice\n")
	select {
	case <-watchEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch went on after its token was removed from the file")
	}
}
