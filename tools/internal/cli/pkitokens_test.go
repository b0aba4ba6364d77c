package cli_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"tidemark.io/services/platform/pki"
	"tidemark.io/tools/internal/cli"
)

func TestPKIInitIssuesOnceAndKeepsValidCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	r := runCLI(t, "", "pki", "init", "--dir", dir, "--name", "broker-1,etcd", "--rest-token", "admin").ok(t)
	contains(t, r.out, "issued broker-1, etcd", "new REST token for admin")
	for _, f := range []string{"ca.pem", "ca-key.pem", "broker-1.pem", "broker-1-key.pem", "etcd.pem", "etcd-key.pem", "rest.tokens"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	before, err := os.ReadFile(filepath.Join(dir, "broker-1.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := os.ReadFile(filepath.Join(dir, "rest.tokens"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(tokens))
	if len(f) != 2 || f[1] != "admin" || len(f[0]) < 16 {
		t.Fatalf("tokens file %q: want one line `TOKEN admin` with a long token", tokens)
	}

	// A second run keeps the certificates and the token, and adds only
	// what is missing.
	r = runCLI(t, "", "pki", "init", "--dir", dir, "--name", "broker-1,etcd,admin", "--rest-token", "admin,ops").ok(t)
	contains(t, r.out, "issued admin", "new REST token for ops")
	if strings.Contains(r.out, "broker-1") {
		t.Fatalf("second run issued broker-1 again:\n%s", r.out)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "broker-1.pem"))
	if string(after) != string(before) {
		t.Fatal("second run replaced broker-1's valid certificate")
	}
	tokens2, _ := os.ReadFile(filepath.Join(dir, "rest.tokens"))
	if !strings.HasPrefix(string(tokens2), string(tokens)) || strings.Count(string(tokens2), "\n") != 2 {
		t.Fatalf("tokens file after the second run %q: want the first line kept and one for ops", tokens2)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "rest.tokens")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestPKIInitRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	runCLI(t, "", "pki", "init").fails(t, cli.ExitUsage, "--dir is required")
	runCLI(t, "", "pki", "init", "--dir", dir, "--name", "../x").fails(t, cli.ExitUsage, `invalid name "../x"`)
	runCLI(t, "", "pki", "init", "--dir", dir, "--name", "ca").fails(t, cli.ExitUsage, `invalid name "ca"`)
	runCLI(t, "", "pki", "init", "--dir", dir, "--rest-token", "a b").fails(t, cli.ExitUsage, "--rest-token: invalid name")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("refused runs wrote %d files", len(entries))
	}
}

// TestHealthOverMutualTLS: the health probe the images use reaches a node
// that requires client certificates, with the settings from the
// environment twins a container gives it, and fails naming the problem
// without them.
func TestHealthOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-1"}, pki.Leaf{Name: "admin"}); err != nil {
		t.Fatal(err)
	}
	creds, err := pki.Options(dir, "broker-1").ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(creds)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	addr := lis.Addr().String()

	env := map[string]string{
		"TIDEMARK_TLS_CA":   pki.CAPath(dir),
		"TIDEMARK_TLS_CERT": pki.CertPath(dir, "admin"),
		"TIDEMARK_TLS_KEY":  pki.KeyPath(dir, "admin"),
	}
	r := runEnv(t, env, "health", "--addr", addr).ok(t)
	contains(t, r.out, addr+" SERVING")

	r = runEnv(t, nil, "health", "--addr", addr, "--timeout", "2s")
	if r.code != cli.ExitFailed || !strings.Contains(r.err, addr) {
		t.Fatalf("plaintext probe of a TLS node: exit %d, stderr %q; want exit 1 naming %s", r.code, r.err, addr)
	}
	runEnv(t, map[string]string{"TIDEMARK_TLS_CA": pki.CAPath(dir)}, "health", "--addr", addr).
		fails(t, cli.ExitUsage, "--tls.ca needs --tls.cert and --tls.key")
	// --plaintext wins over the environment (Jaeger's plaintext health
	// endpoint probed from a container whose environment may hold TLS
	// settings): here it fails against the TLS node.
	r = runEnv(t, env, "health", "--plaintext", "--addr", addr, "--timeout", "2s")
	if r.code != cli.ExitFailed || !strings.Contains(r.err, addr) {
		t.Fatalf("--plaintext probe of a TLS node: exit %d, stderr %q; want exit 1 naming %s", r.code, r.err, addr)
	}
	runEnv(t, nil, "health", "--addr", addr, "--tls.cert", pki.CertPath(dir, "admin")).
		fails(t, cli.ExitUsage, "--tls.cert and --tls.key need --tls.ca")
}
