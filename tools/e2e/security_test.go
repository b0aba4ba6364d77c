package e2e

import (
	"archive/tar"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/testenv"
)

// containerUser is the unprivileged user every image runs as.
const containerUser = "65532"

// needSecure returns the stack, or skips when it runs in plain text (there
// is nothing to refuse then).
func needSecure(t *testing.T) *stack {
	t.Helper()
	s := need(t)
	if !s.secure {
		testenv.Skip(t, "the stack runs in plain text (TIDEMARK_E2E_PLAINTEXT=1)")
	}
	return s
}

// TestEachContainerHoldsOnlyItsOwnKeys reads /pki out of every service's
// container (docker cp to a tar stream): each holds the CA's certificate
// and its own certificate and key (the gateway also the REST tokens, etcd
// also root's for its health check), and no container but pki holds the
// CA's key or another identity's key.
func TestEachContainerHoldsOnlyItsOwnKeys(t *testing.T) {
	s := need(t)
	want := map[string][]string{
		"etcd":      {"ca.pem", "etcd-key.pem", "etcd.pem", "root-key.pem", "root.pem"},
		"etcd-init": {"ca.pem", "root-key.pem", "root.pem"},
		"gateway":   {"ca.pem", "gateway-key.pem", "gateway.pem", "tokens"},
		"jaeger":    {"ca.pem", "jaeger-key.pem", "jaeger.pem"},
	}
	for _, svc := range []string{"controller-1", "controller-2", "broker-1", "broker-2", "broker-3"} {
		want[svc] = []string{"ca.pem", svc + "-key.pem", svc + ".pem"}
	}
	for svc, files := range want {
		out, err := s.docker(30*time.Second, "cp", s.id(svc)+":/pki/.", "-")
		if err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
		var got []string
		tr := tar.NewReader(strings.NewReader(out))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: reading /pki: %v", svc, err)
			}
			if name := path.Base(h.Name); h.Typeflag == tar.TypeReg {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		slices.Sort(files)
		if !slices.Equal(got, files) {
			t.Errorf("%s holds %v in /pki, want %v", svc, got, files)
		}
	}
}

// TestContainersRunAsNonRoot checks every process of every running
// container with ps as the Docker daemon runs it (docker top), not only
// what the image declares, and the one-shot services' configured user.
func TestContainersRunAsNonRoot(t *testing.T) {
	s := need(t)
	for _, svc := range append(append([]string{}, services...), oneShots...) {
		user, err := s.docker(30*time.Second, "inspect", "-f", "{{.Config.User}}", s.id(svc))
		if err != nil {
			t.Fatal(err)
		}
		if user != containerUser+":"+containerUser {
			t.Errorf("%s: configured user %q, want %s:%s", svc, user, containerUser, containerUser)
		}
	}
	for _, svc := range services {
		out, err := s.docker(30*time.Second, "top", s.id(svc), "-o", "pid,uid,gid,comm")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 2 {
			t.Errorf("%s: no process listed:\n%s", svc, out)
			continue
		}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) < 4 || f[1] != containerUser || f[2] != containerUser {
				t.Errorf("%s: process %q does not run as %s:%s", svc, l, containerUser, containerUser)
			}
		}
		t.Logf("%s: %s", svc, strings.Join(lines[1:], "; "))
	}
}

// TestNodesRefuseClientsWithoutTheStackCertificate: a broker and a
// controller answer only clients presenting a certificate from the stack's
// CA: plain text, TLS without a certificate and a certificate of another CA
// are all refused at the handshake, and the admin certificate is answered.
func TestNodesRefuseClientsWithoutTheStackCertificate(t *testing.T) {
	s := needSecure(t)
	other := t.TempDir()
	if _, err := pki.Ensure(other, pki.Leaf{Name: "admin"}); err != nil {
		t.Fatal(err)
	}
	caOnly := pki.Options(s.pkiDir, "admin")
	caOnlyTLS, err := caOnly.Client()
	if err != nil {
		t.Fatal(err)
	}
	caOnlyTLS.GetClientCertificate = nil // present no certificate
	foreign, err := pki.Options(other, "admin").Client()
	if err != nil {
		t.Fatal(err)
	}
	foreign.RootCAs = caOnlyTLS.RootCAs // trust the stack, present another CA's certificate

	refused := []struct {
		name  string
		creds grpc.DialOption
		want  string
	}{
		{"plain text", grpc.WithTransportCredentials(insecure.NewCredentials()), ""},
		{"no client certificate", grpc.WithTransportCredentials(credentials.NewTLS(caOnlyTLS)), "certificate required"},
		{"another CA's certificate", grpc.WithTransportCredentials(credentials.NewTLS(foreign)), "unknown certificate authority"},
	}
	// Jaeger's OTLP receiver, which the services export spans to, is held
	// to the same rule; past the handshake it has no health service, so the
	// admin certificate gets Unimplemented, not Unavailable.
	otlp := "127.0.0.1:" + stackPorts["JAEGER_OTLP_PORT"]
	for _, c := range refused {
		if _, err := healthCheck(otlp, c.creds); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Jaeger's OTLP port with %s: %v, want Unavailable naming %q", c.name, err, c.want)
		}
	}
	if _, err := healthCheck(otlp, s.transportCreds(t, "admin")); status.Code(err) != codes.Unimplemented {
		t.Errorf("Jaeger's OTLP port with the admin certificate: %v, want Unimplemented (the handshake passed)", err)
	}

	for _, addr := range []string{brokerAddrs[0], controllerAddrs[0]} {
		for _, c := range refused {
			_, err := healthCheck(addr, c.creds)
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s with %s: %v, want Unavailable naming %q", addr, c.name, err, c.want)
			}
		}
		st, err := healthCheck(addr, s.transportCreds(t, "admin"))
		if err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s with the admin certificate: %v %v, want SERVING", addr, st, err)
		}
	}
}

func healthCheck(addr string, creds grpc.DialOption) (healthpb.HealthCheckResponse_ServingStatus, error) {
	cc, err := grpc.NewClient("passthrough:///"+addr, creds, grpc.WithContextDialer(dialStack))
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return resp.GetStatus(), err
}

// TestEtcdRunsWithClientCertificatesAndRoles: etcd has auth on, takes the
// certificate's Common Name as the user, and holds each one to its role: a
// broker cannot write outside its own registration, the administrator only
// reads, a client without a certificate is refused, and nothing the refused
// writes tried is there afterwards.
func TestEtcdRunsWithClientCertificatesAndRoles(t *testing.T) {
	s := needSecure(t)
	out, err := s.etcdctl("root", "auth", "status")
	if err != nil || !strings.Contains(out, "Authentication Status: true") {
		t.Fatalf("etcd auth status: %v\n%s\nwant Authentication Status: true", err, out)
	}
	const probe = "/tidemark/controller"
	before, err := s.etcdctl("root", "get", probe, "-w", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"broker-1", "admin"} {
		out, err := s.etcdctl(user, "put", probe, "forged by "+user)
		if err == nil || !strings.Contains(out, "permission denied") {
			t.Errorf("put %s as %s: %v\n%s\nwant permission denied", probe, user, err, out)
		}
	}
	// Without a certificate the client sees its connection fail (how
	// depends on when TLS 1.3 reports the alert); etcd's log says why.
	noCert := time.Now()
	out, err = s.etcdctl("", "--command-timeout=3s", "get", probe)
	if err == nil {
		t.Errorf("get without a client certificate answered: %s", out)
	}
	if log := s.logsSince("etcd", noCert.Add(-time.Second)); !strings.Contains(log, "client didn't provide a certificate") {
		t.Errorf("etcd's log after a get without a client certificate does not name the missing certificate:\n%s", log)
	}
	after, err := s.etcdctl("root", "get", probe, "-w", "json")
	if err != nil {
		t.Fatal(err)
	}
	if revKV(t, before) != revKV(t, after) {
		t.Errorf("%s changed under refused writes:\nbefore %s\nafter  %s", probe, before, after)
	}
	// The administrator reads tidemark's keys (what `tidemark metadata` and
	// the playbooks' etcd reads need).
	if out, err := s.etcdctl("admin", "get", "/tidemark/", "--prefix", "--keys-only", "--limit", "1"); err != nil || out == "" {
		t.Errorf("admin reading /tidemark/: %v %q", err, out)
	}
}

// revKV is the key's modification revision and value from etcdctl -w json.
func revKV(t *testing.T, out string) string {
	t.Helper()
	var r struct {
		Kvs []struct {
			ModRevision int64  `json:"mod_revision"`
			Value       []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("etcdctl json %q: %v", out, err)
	}
	if len(r.Kvs) == 0 {
		return "absent"
	}
	return fmt.Sprintf("rev %d %q", r.Kvs[0].ModRevision, r.Kvs[0].Value)
}

// TestGatewayServesHTTPSWithTokens: the REST API answers only over HTTPS,
// and only callers with a token from the tokens file the pki service wrote
// or a client certificate from the stack's CA.
func TestGatewayServesHTTPSWithTokens(t *testing.T) {
	s := needSecure(t)
	base := "https://127.0.0.1:" + stackPorts["GATEWAY_PORT"]
	token := restToken(t, s, "admin")
	serverOnly, err := pki.Options(s.pkiDir, "admin").Client()
	if err != nil {
		t.Fatal(err)
	}
	serverOnly.GetClientCertificate = nil
	withCert, err := s.clientTLS("admin")
	if err != nil {
		t.Fatal(err)
	}
	get := func(tc *tls.Config, url, bearer string) (int, string) {
		t.Helper()
		hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := get(serverOnly, base+"/v1/cluster", ""); code != http.StatusUnauthorized || !strings.Contains(body, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("GET /v1/cluster without a token: %d %s, want 401 SASL_AUTHENTICATION_FAILED", code, body)
	}
	if code, body := get(serverOnly, base+"/v1/cluster", strings.Repeat("0", len(token))); code != http.StatusUnauthorized || !strings.Contains(body, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("GET /v1/cluster with a wrong token: %d %s, want 401 SASL_AUTHENTICATION_FAILED", code, body)
	}
	if code, body := get(serverOnly, base+"/v1/cluster", token); code != http.StatusOK {
		t.Errorf("GET /v1/cluster with admin's token: %d %s, want 200", code, body)
	}
	if code, body := get(withCert, base+"/v1/cluster", ""); code != http.StatusOK {
		t.Errorf("GET /v1/cluster with admin's certificate: %d %s, want 200", code, body)
	}
	hc := &http.Client{Timeout: 15 * time.Second}
	if resp, err := hc.Get("http://127.0.0.1:" + stackPorts["GATEWAY_PORT"] + "/v1/cluster"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET /v1/cluster over plain HTTP answered 200")
		}
	}
}

// restToken is user's token in the tokens file of the pki volume.
func restToken(t *testing.T, s *stack, user string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.pkiDir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[1] == user {
			return f[0]
		}
	}
	t.Fatalf("no token for %s in the tokens file", user)
	return ""
}
