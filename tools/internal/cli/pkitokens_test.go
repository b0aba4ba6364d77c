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

// TestPKIInitRESTTokens: --rest-token gives each user one token in
// DIR/tokens (the compose stack's gateway reads it) and keeps it on later
// runs, so a restarted stack keeps its callers' tokens.
func TestPKIInitRESTTokens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	path := filepath.Join(dir, "tokens")
	r := runCLI(t, "", "pki", "init", "--dir", dir, "--name", "gateway", "--rest-token", "admin").ok(t)
	contains(t, r.out, "token  admin: "+path)
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(first))
	if len(f) != 2 || f[1] != "admin" || len(f[0]) < 16 {
		t.Fatalf("tokens file %q: want one line `TOKEN admin` with a long token", first)
	}

	runCLI(t, "", "pki", "init", "--dir", dir, "--name", "gateway", "--rest-token", "admin,ops").ok(t)
	second, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(second), string(first)) || strings.Count(string(second), "\n") != 2 || !strings.HasSuffix(string(second), " ops\n") {
		t.Fatalf("tokens file after a second run %q: want admin's line kept and one for ops", second)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestPKIInitRefusesABadTokenUserBeforeWriting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	runCLI(t, "", "pki", "init", "--dir", dir, "--rest-token", "a b").fails(t, cli.ExitUsage, `--rest-token "a b"`)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused init created %s: %v", dir, err)
	}
}

// TestHealthProbeFromAContainerEnvironment: the compose health checks run
// `tidemark health` with the service's own TIDEMARK_TLS_* in the
// environment, which is enough to reach a node that requires client
// certificates; Jaeger's probe (a container without them) says --plaintext.
func TestHealthProbeFromAContainerEnvironment(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-1"}); err != nil {
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
		"TIDEMARK_TLS_CERT": pki.CertPath(dir, "broker-1"),
		"TIDEMARK_TLS_KEY":  pki.KeyPath(dir, "broker-1"),
	}
	r := runEnv(t, env, "health", "--addr", addr).ok(t)
	contains(t, r.out, addr+" SERVING")

	r = runEnv(t, nil, "health", "--plaintext", "--addr", addr, "--timeout", "2s")
	if r.code != cli.ExitFailed || !strings.Contains(r.err, addr) {
		t.Fatalf("plaintext probe of a TLS node: exit %d, stderr %q; want exit 1 naming %s", r.code, r.err, addr)
	}
}
