package tlsconf_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// whoami answers health checks with the caller's principal in the status
// message, so the test sees what the server saw.
type whoami struct {
	healthpb.UnimplementedHealthServer
}

func (whoami) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.Aborted, identity.FromContext(ctx).String())
}

func serve(t *testing.T, o tlsconf.Options) string {
	t.Helper()
	opt, err := o.ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opt)
	healthpb.RegisterHealthServer(srv, whoami{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func call(t *testing.T, addr string, o tlsconf.Options) error {
	t.Helper()
	dial, err := o.DialOption()
	if err != nil {
		t.Fatal(err)
	}
	return callWith(t, addr, dial)
}

func callWith(t *testing.T, addr string, dial grpc.DialOption) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestMutualTLSNamesTheCallerAndRefusesStrangers(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-1"}, pki.Leaf{Name: "broker-2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Ensure(other, pki.Leaf{Name: "controller-1"}); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	expired := pki.Leaf{Name: "expired", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}
	if err := ca.IssueFiles(dir, expired); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, pki.Options(dir, "broker-1"))

	err = call(t, addr, pki.Options(dir, "broker-2"))
	if status.Code(err) != codes.Aborted || status.Convert(err).Message() != "User:broker-2" {
		t.Fatalf("broker-2 with a good certificate: got %v, want the server to see User:broker-2", err)
	}

	// A certificate from another CA: the server refuses the handshake.
	foreign := pki.Options(other, "controller-1")
	foreign.CA = pki.CAPath(dir) // trusts the server, but is not trusted
	if err := call(t, addr, foreign); status.Code(err) != codes.Unavailable {
		t.Fatalf("certificate from another CA: got %v, want Unavailable (handshake refused)", err)
	}

	// An expired certificate: refused the same way.
	if err := call(t, addr, pki.Options(dir, "expired")); status.Code(err) != codes.Unavailable {
		t.Fatalf("expired certificate: got %v, want Unavailable", err)
	}

	// No certificate at all: plaintext against a TLS server fails.
	if err := call(t, addr, tlsconf.Plain()); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext client: got %v, want Unavailable", err)
	}

	// A client that does not trust the server's CA refuses the server.
	distrust := pki.Options(dir, "broker-2")
	distrust.CA = pki.CAPath(other)
	if err := call(t, addr, distrust); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("server from an unknown CA: got %v, want a certificate error", err)
	}
}

func TestValidateWantsAChoice(t *testing.T) {
	var o tlsconf.Options
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--plaintext") {
		t.Fatalf("no TLS settings: got %v, want an error that names --plaintext", err)
	}
	if err := tlsconf.Plain().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := tlsconf.Options{Plaintext: true, CA: "x"}
	if err := bad.Validate(); err == nil {
		t.Fatal("--plaintext with --tls.ca accepted")
	}
}

func TestRenewedCertificateIsUsedWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-1"}, pki.Leaf{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, pki.Options(dir, "broker-1"))
	ca, _ := pki.LoadCA(dir)
	// Replace alice's files with bob's certificate under alice's file name.
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	o := pki.Options(dir, "alice")
	dial, err := o.DialOption() // loads alice's files now
	if err != nil {
		t.Fatal(err)
	}
	if err := callWith(t, addr, dial); status.Convert(err).Message() != "User:alice" {
		t.Fatalf("before renewal: got %v, want User:alice", err)
	}
	time.Sleep(1100 * time.Millisecond) // past the once-a-second check, and a new mtime
	writeAll(t, o.Cert, certPEM)
	writeAll(t, o.Key, keyPEM)
	err = callWith(t, addr, dial) // a new connection, the same dial option
	if status.Convert(err).Message() != "User:bob" {
		t.Fatalf("after renewal: got %v, want User:bob", err)
	}
}

func writeAll(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
