package devcluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/services/platform/tlsconf"
)

// Every broker and controller gets its own certificate, the CA and key
// from <data dir>/pki, and no --plaintext; with Plaintext, only that.
func TestPlanGivesEveryNodeItsCertificate(t *testing.T) {
	o := DefaultOptions()
	o.BinDir = fakeBinDir(t)
	o.DataDir = t.TempDir()
	nodes, err := o.plan()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(o.DataDir, "pki")
	for _, n := range nodes {
		args := strings.Join(n.Args, " ")
		if n.Kind == "gateway" {
			if GatewayTLS() != strings.Contains(args, "--tls.cert "+filepath.Join(dir, "gateway.pem")) ||
				GatewayTLS() != strings.Contains(args, "--rest.tokens.file "+filepath.Join(dir, "tokens")) {
				t.Errorf("gateway args %q with GatewayTLS() %v", args, GatewayTLS())
			}
			continue
		}
		want := "--tls.ca " + filepath.Join(dir, "ca.pem") + " --tls.cert " + filepath.Join(dir, n.Name+".pem") +
			" --tls.key " + filepath.Join(dir, n.Name+"-key.pem") + " --acl.file " + filepath.Join(o.DataDir, "acl")
		if !strings.Contains(args, want) || strings.Contains(args, "--plaintext") {
			t.Errorf("%s args %q, want %q and no --plaintext", n.Name, args, want)
		}
	}
	o.Plaintext = true
	if nodes, err = o.plan(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		args := strings.Join(n.Args, " ")
		if strings.Contains(args, " --tls.") || strings.Contains(args, "--rest.tokens.file") || strings.Contains(args, "--acl.file") ||
			!slices.Contains(n.Args, "--plaintext") {
			t.Errorf("plaintext: %s args %q", n.Name, args)
		}
	}
	if o.Security() != tlsconf.Plain() {
		t.Errorf("plaintext cluster's client settings %+v", o.Security())
	}
}

// The first start makes the CA, a certificate for each node, the gateway,
// the operator and the launcher, and the admin's REST token; a later start
// keeps all of them, so exported paths and tokens stay good.
func TestEnsurePKIOnceAndKeepsIt(t *testing.T) {
	o := DefaultOptions()
	o.DataDir = t.TempDir()
	issued, err := o.ensurePKI()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"etcd", "root", "admin", "gateway", "broker-1", "broker-2", "broker-3", "controller-1", "controller-2", "launcher", "jaeger"}
	if !slices.Equal(issued, want) {
		t.Fatalf("issued %v, want %v", issued, want)
	}
	tokens := filepath.Join(o.DataDir, "pki", "tokens")
	b, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[1] != "admin" || len(f[0]) != 64 || strings.Trim(f[0], "0123456789abcdef") != "" {
		t.Fatalf("tokens file %q, want one line \"<64 hex digits> admin\"", b)
	}
	if st, _ := os.Stat(tokens); st.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file mode %v, want 0600", st.Mode().Perm())
	}
	acl, err := os.ReadFile(filepath.Join(o.DataDir, "acl"))
	if err != nil || !strings.Contains(string(acl), "allow User:gateway Describe        Cluster") {
		t.Fatalf("ACL file %q, %v: want the gateway's rules", acl, err)
	}
	// A developer's edit of the ACL file survives a restart.
	if err := os.WriteFile(filepath.Join(o.DataDir, "acl"), []byte("allow User:alice Read Topic:*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cert, _ := os.ReadFile(filepath.Join(o.DataDir, "pki", "broker-2.pem"))
	if issued, err = o.ensurePKI(); err != nil || len(issued) != 0 {
		t.Fatalf("second start issued %v, %v; want nothing", issued, err)
	}
	again, _ := os.ReadFile(tokens)
	cert2, _ := os.ReadFile(filepath.Join(o.DataDir, "pki", "broker-2.pem"))
	if string(again) != string(b) || string(cert2) != string(cert) {
		t.Fatal("a second start changed the token or a certificate")
	}
	if acl, _ := os.ReadFile(filepath.Join(o.DataDir, "acl")); string(acl) != "allow User:alice Read Topic:*\n" {
		t.Fatalf("a second start replaced the edited ACL file: %q", acl)
	}
}

func TestEnsureTokenAddsAUserAndKeepsOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("s3cret alice"), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := EnsureToken(path, "admin")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "s3cret alice\n"+tok+" admin\n" {
		t.Fatalf("tokens file %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	if again, err := EnsureToken(path, "alice"); err != nil || again != "s3cret" {
		t.Fatalf("alice's token %q, %v", again, err)
	}
}

// The launcher's control API takes the operator's and the gateway's
// certificates, and refuses no certificate, a stranger's, and a broker's.
func TestControlAPIOnlyForOperators(t *testing.T) {
	o := DefaultOptions()
	o.DataDir = t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.ControlAddr = lis.Addr().String()
	if _, err := o.ensurePKI(); err != nil {
		lis.Close()
		t.Fatal(err)
	}
	c := &Cluster{opts: o}
	if err := c.serveControlOn(lis); err != nil {
		t.Fatal(err)
	}
	defer c.ctl.Stop()
	other := t.TempDir()
	if _, err := pki.Ensure(other, pki.Leaf{Name: "admin"}); err != nil {
		t.Fatal(err)
	}
	list := func(dial grpc.DialOption) error {
		conn, err := grpc.NewClient(o.ControlAddr, dial)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = devclusterv1.NewDevClusterServiceClient(conn).ListNodes(ctx, &devclusterv1.ListNodesRequest{})
		return err
	}
	withCert := func(dir, name string) grpc.DialOption {
		d, err := pki.Options(dir, name).DialOption()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, ok := range []string{"admin", "gateway"} {
		if err := list(withCert(o.PKIDir(), ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := list(withCert(o.PKIDir(), "broker-1")); status.Code(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "User:broker-1 is not allowed Describe on Cluster") {
		t.Errorf("broker-1: %v, want PermissionDenied: User:broker-1 is not allowed Describe on Cluster", err)
	}
	if err := list(withCert(other, "admin")); status.Code(err) != codes.Unavailable {
		t.Errorf("another CA's admin: %v, want the handshake refused", err)
	}
	if err := list(grpc.WithTransportCredentials(insecure.NewCredentials())); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext: %v, want the connection refused", err)
	}
}

// The ACL file the dev cluster writes is one the services accept.
func TestDevACLParses(t *testing.T) {
	acl, err := authz.Parse(strings.NewReader(devACL))
	if err != nil {
		t.Fatal(err)
	}
	gw := identity.Parse("gateway")
	if !acl.Allows(gw, authz.Describe, authz.TheCluster) || !acl.Allows(gw, authz.InjectFault, authz.TheCluster) ||
		!acl.Allows(gw, authz.DescribeConfigs, authz.TopicNamed("orders")) {
		t.Fatalf("the dev ACL does not let the gateway run the console: %+v", acl)
	}
	if acl.Allows(gw, authz.Delete, authz.TopicNamed("orders")) {
		t.Fatal("the dev ACL lets the gateway delete topics as itself")
	}
}

// The gateway's pooled connection to the launcher pings when it hears
// nothing for 10 s (connpool.Keepalive); the launcher's server accepts
// that, where gRPC's default policy counts a strike for each ping after the
// first and answers the fourth with GOAWAY "too_many_pings", ending the
// calls in flight (a scenario's stream of steps to the console).
func TestControlAPIKeepsAPingingConnection(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: waits for four keepalive pings")
	}
	o := DefaultOptions()
	o.DataDir = t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.ControlAddr = lis.Addr().String()
	if _, err := o.ensurePKI(); err != nil {
		lis.Close()
		t.Fatal(err)
	}
	c := &Cluster{opts: o}
	if err := c.serveControlOn(lis); err != nil {
		t.Fatal(err)
	}
	defer c.ctl.Stop()
	dial, err := pki.Options(o.PKIDir(), GatewayName).DialOption()
	if err != nil {
		t.Fatal(err)
	}
	pool := connpool.New(dial)
	defer pool.Close()
	cc, err := pool.Get(o.ControlAddr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := devclusterv1.NewDevClusterServiceClient(cc).ListNodes(ctx, &devclusterv1.ListNodesRequest{}); err != nil {
		t.Fatal(err)
	}
	// Idle through four pings and more: the connection must stay up.
	idle, cancelIdle := context.WithTimeout(context.Background(), 4*connpool.KeepaliveTime+8*time.Second)
	defer cancelIdle()
	for cc.WaitForStateChange(idle, connectivity.Ready) {
		t.Fatalf("the idle connection to the launcher went %s", cc.GetState())
	}
}
