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

// Every command that dials checks its TLS settings first: with no
// certificate given and none of `make run` found, it exits 2 naming the
// flags, before any connection is tried.
func TestCommandsWithoutCertificatesNameTheTLSFlags(t *testing.T) {
	t.Chdir(t.TempDir()) // no .data/pki here
	dead := closedAddr(t)
	for _, args := range [][]string{
		{"health", "--addr", dead},
		{"topics", "list", "--controller", dead},
		{"cluster", "describe", "--controller", dead},
		{"produce", "--topic", "t", "--bootstrap-server", dead},
		{"watch", "--once", "--controller", dead},
		{"dev", "status", "--control", dead},
		{"dev", "kill", "broker-1", "--control", dead},
		{"scenario", "run", "min-isr", "--control", dead},
	} {
		r := runCLI(t, "x\n", args...)
		if r.code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %q", args, r.code, cli.ExitUsage, r.err)
			continue
		}
		for _, w := range []string{"--tls.ca", "--tls.cert", "--tls.key", "--plaintext", filepath.Join(".data", "pki", "admin.pem")} {
			if !strings.Contains(r.err, w) {
				t.Errorf("%v: stderr %q does not name %s", args, r.err, w)
			}
		}
	}
}

// TLS against a plaintext node says the cluster may run with --plaintext.
func TestTLSAgainstAPlaintextNodeSaysSo(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "admin"}); err != nil {
		t.Fatal(err)
	}
	o := pki.Options(dir, "admin")
	addr := lis.Addr().String()
	runCLI(t, "", "health", "--addr", addr, "--tls.ca", o.CA, "--tls.cert", o.Cert, "--tls.key", o.Key).
		fails(t, cli.ExitFailed, addr+": it answers without TLS: the cluster may run with --plaintext (give --plaintext)")
	runCLI(t, "", "topics", "list", "--controller", addr, "--tls.ca", o.CA, "--tls.cert", o.Cert, "--tls.key", o.Key).
		fails(t, cli.ExitFailed, "give --plaintext")
	r := runCLI(t, "", "health", "--addr", addr, "--plaintext").ok(t)
	contains(t, r.out, "SERVING")
}

func TestTLSFlagMistakesAreUsageErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	dead := closedAddr(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"health", "--addr", dead, "--plaintext", "--tls.ca", ca}, nil, "--plaintext (TIDEMARK_PLAINTEXT) cannot be combined with --tls.ca"},
		{[]string{"health", "--addr", dead}, map[string]string{"TIDEMARK_PLAINTEXT": "true", "TIDEMARK_TLS_CERT": ca}, "cannot be combined with --tls.cert"},
		{[]string{"health", "--addr", dead}, map[string]string{"TIDEMARK_TLS_CA": ca}, "--tls.ca given without --tls.cert, --tls.key"},
		{[]string{"health", "--addr", dead, "--tls.ca", ca, "--tls.cert", ca, "--tls.key", ca}, nil, "no PEM certificate"},
		{[]string{"health", "--addr", dead}, map[string]string{"TIDEMARK_PLAINTEXT": "maybe"}, "TIDEMARK_PLAINTEXT"},
	}
	for _, c := range cases {
		r := runEnv(t, c.env, c.args...)
		if r.code != cli.ExitUsage || !strings.Contains(r.err, c.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want %d naming %q", c.args, c.env, r.code, r.err, cli.ExitUsage, c.want)
		}
	}
	// The environment twin turns TLS off like the flag: the command then
	// gets as far as dialling.
	r := runEnv(t, map[string]string{"TIDEMARK_PLAINTEXT": "true"}, "health", "--addr", dead)
	if r.code != cli.ExitFailed || !strings.Contains(r.err, dead) {
		t.Errorf("TIDEMARK_PLAINTEXT=true: exit %d, stderr %q; want 1 naming %s", r.code, r.err, dead)
	}
}
