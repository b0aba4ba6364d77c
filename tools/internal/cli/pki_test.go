package cli_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/pki"
	"tidemark.io/tools/internal/cli"
)

// readCert parses a PEM certificate file.
func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verify checks that the CA in dir signed name's certificate for host, for
// both ends of mutual TLS.
func verify(t *testing.T, dir, name, host string) *x509.Certificate {
	t.Helper()
	ca := readCert(t, pki.CAPath(dir))
	leaf := readCert(t, pki.CertPath(dir, name))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("%s for %s: %v", name, host, err)
	}
	if leaf.Subject.CommonName != name {
		t.Fatalf("%s: Common Name %q", name, leaf.Subject.CommonName)
	}
	st, err := os.Stat(pki.KeyPath(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v, want 0600", pki.KeyPath(dir, name), st.Mode().Perm())
	}
	return leaf
}

func TestPKIInitMakesTheClusterCertificatesOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	r := runCLI(t, "", "pki", "init", "--dir", dir).ok(t)
	names := []string{"controller-1", "controller-2", "broker-1", "broker-2", "broker-3", "gateway", "admin", "launcher", "etcd", "root"}
	for _, n := range names {
		contains(t, r.out, "issued "+n+": "+pki.CertPath(dir, n))
		for _, host := range []string{"localhost", "127.0.0.1", "::1", n} {
			verify(t, dir, n, host)
		}
	}
	before, err := os.ReadFile(pki.CertPath(dir, "broker-1"))
	if err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(pki.CAPath(dir))
	// A second run keeps the CA and every valid certificate.
	r = runCLI(t, "", "pki", "init", "--dir", dir).ok(t)
	contains(t, r.out, "kept   broker-1")
	after, _ := os.ReadFile(pki.CertPath(dir, "broker-1"))
	caAfter, _ := os.ReadFile(pki.CAPath(dir))
	if !bytes.Equal(before, after) || !bytes.Equal(caBefore, caAfter) {
		t.Fatal("a second pki init replaced valid certificates")
	}
	// Chosen names with an extra host; the others stay as they were.
	r = runCLI(t, "", "pki", "init", "--dir", dir, "--name", "broker-4", "--host", "kafka.example", "--host", "10.0.0.4").ok(t)
	contains(t, r.out, "issued broker-4")
	leaf := verify(t, dir, "broker-4", "kafka.example")
	if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.String() == "10.0.0.4" }) {
		t.Fatalf("broker-4 IPs %v lack 10.0.0.4", leaf.IPAddresses)
	}
	if strings.Contains(r.out, "broker-1") {
		t.Fatalf("--name broker-4 touched others:\n%s", r.out)
	}
}

func TestPKIIssueSignsWithTheExistingCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	runCLI(t, "", "pki", "init", "--dir", dir, "--name", "admin").ok(t)
	caBefore, _ := os.ReadFile(pki.CAPath(dir))
	r := runCLI(t, "", "pki", "issue", "--dir", dir, "--name", "alice", "--host", "alice.example", "--days", "10").ok(t)
	contains(t, r.out, "issued alice: "+pki.CertPath(dir, "alice")+" "+pki.KeyPath(dir, "alice"))
	leaf := verify(t, dir, "alice", "alice.example")
	verify(t, dir, "alice", "localhost")
	if left := time.Until(leaf.NotAfter); left < 9*24*time.Hour || left > 10*24*time.Hour {
		t.Fatalf("--days 10: valid for %v more", left)
	}
	if caAfter, _ := os.ReadFile(pki.CAPath(dir)); !bytes.Equal(caBefore, caAfter) {
		t.Fatal("pki issue changed the CA")
	}
	// Issuing again renews: a new certificate under the same name.
	first, _ := os.ReadFile(pki.CertPath(dir, "alice"))
	runCLI(t, "", "pki", "issue", "--dir", dir, "--name", "alice").ok(t)
	if again, _ := os.ReadFile(pki.CertPath(dir, "alice")); bytes.Equal(first, again) {
		t.Fatal("pki issue did not replace the certificate")
	}
	verify(t, dir, "alice", "alice")
}

func TestPKIRefusesBadInputAndChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	runCLI(t, "", "pki", "init", "--dir", dir, "--name", "admin").ok(t)
	snapshot := func() map[string]string {
		m := map[string]string{}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			m[e.Name()] = string(b)
		}
		return m
	}
	before := snapshot()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pki", "init"}, cli.ExitUsage, "--dir is required"},
		{[]string{"pki", "init", "--dir", dir, "--name", "ca"}, cli.ExitUsage, `--name "ca": its files would overwrite the CA's`},
		{[]string{"pki", "init", "--dir", dir, "--name", "ca-key"}, cli.ExitUsage, "overwrite the CA's"},
		{[]string{"pki", "init", "--dir", dir, "--name", "../evil"}, cli.ExitUsage, `--name "../evil"`},
		{[]string{"pki", "init", "--dir", dir, "--name", "a,a"}, cli.ExitUsage, `--name "a" given twice`},
		{[]string{"pki", "issue", "--name", "bob"}, cli.ExitUsage, "--dir is required"},
		{[]string{"pki", "issue", "--dir", dir}, cli.ExitUsage, "--name is required"},
		{[]string{"pki", "issue", "--dir", dir, "--name", "ca"}, cli.ExitUsage, "overwrite the CA's"},
		{[]string{"pki", "issue", "--dir", dir, "--name", "bob", "--days", "0"}, cli.ExitUsage, "--days must be 1..3650, got 0"},
		{[]string{"pki", "issue", "--dir", dir, "--name", "bob", "--days", "4000"}, cli.ExitUsage, "--days must be 1..3650, got 4000"},
	}
	for _, c := range cases {
		runCLI(t, "", c.args...).fails(t, c.code, c.want)
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Fatalf("files changed: %d before, %d after", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("%s changed", k)
		}
	}
	// No CA: issue says how to make one, and makes nothing.
	empty := filepath.Join(t.TempDir(), "empty")
	runCLI(t, "", "pki", "issue", "--dir", empty, "--name", "bob").fails(t, cli.ExitFailed, "no CA in "+empty)
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("issue without a CA created %s: %v", empty, err)
	}
	runCLI(t, "", "pki", "issue", "--dir", empty, "--name", "bob").fails(t, cli.ExitFailed, "tidemark pki init --dir "+empty)
}

// TestPKIInitExportsEachProcessItsOwnFiles: --export gives each folder the
// CA's certificate and its identities' files only (how the compose stack
// keeps the CA's key and other nodes' keys out of every container), and
// refuses a name it was not asked to issue.
func TestPKIInitExportsEachProcessItsOwnFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	out := t.TempDir()
	b1, gw := filepath.Join(out, "broker-1"), filepath.Join(out, "gateway")
	r := runCLI(t, "", "pki", "init", "--dir", dir, "--name", "broker-1,broker-2,gateway", "--rest-token", "admin",
		"--export", b1+"=broker-1", "--export", gw+"=gateway,tokens").ok(t)
	contains(t, r.out, "export broker-1: "+b1)
	for folder, want := range map[string][]string{
		b1: {"broker-1-key.pem", "broker-1.pem", "ca.pem"},
		gw: {"ca.pem", "gateway-key.pem", "gateway.pem", "tokens"},
	} {
		entries, err := os.ReadDir(folder)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want %v", folder, got, want)
		}
	}
	verify(t, b1, "broker-1", "broker-1")
	runCLI(t, "", "pki", "init", "--dir", dir, "--name", "broker-1", "--export", b1+"=broker-2").
		fails(t, 2, `"broker-2" is not one of the --name identities`)
}
