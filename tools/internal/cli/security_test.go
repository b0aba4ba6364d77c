package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
	"tidemark.io/tools/internal/devcluster"
)

// devPKI makes a dev cluster's CA and admin certificate in a fresh dir.
func devPKI(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "admin"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wantUsage checks err is a usage error (exit 2) naming every want.
func wantUsage(t *testing.T, err error, wants ...string) {
	t.Helper()
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("want a usage error, got %v", err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
}

func TestResolveTLSFindsTheDevClusterCertificates(t *testing.T) {
	dir := devPKI(t)
	got, err := resolveTLS(tlsconf.Options{ServerName: "broker-1"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := tlsconf.Options{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "admin.pem"),
		Key: filepath.Join(dir, "admin-key.pem"), ServerName: "broker-1"}
	if got != want {
		t.Fatalf("resolved %+v, want %+v", got, want)
	}
}

func TestResolveTLSPrefersFlagsAndPlaintext(t *testing.T) {
	dev, mine := devPKI(t), devPKI(t)
	given := pki.Options(mine, "admin")
	got, err := resolveTLS(given, dev)
	if err != nil || got != given {
		t.Fatalf("flags given: resolved %+v, %v; want %+v", got, err, given)
	}
	got, err = resolveTLS(tlsconf.Options{Plaintext: true}, dev)
	if err != nil || got != tlsconf.Plain() {
		t.Fatalf("--plaintext: resolved %+v, %v", got, err)
	}
}

func TestResolveTLSWithoutCertificatesNamesTheFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	_, err := resolveTLS(tlsconf.Options{}, dir)
	wantUsage(t, err, "--tls.ca", "--tls.cert", "--tls.key", "TIDEMARK_TLS_CA", "--plaintext",
		filepath.Join(dir, "ca.pem"), filepath.Join(dir, "admin.pem"), filepath.Join(dir, "admin-key.pem"))
}

func TestResolveTLSNamesTheMissingDevFile(t *testing.T) {
	dir := devPKI(t)
	if err := os.Remove(filepath.Join(dir, "admin-key.pem")); err != nil {
		t.Fatal(err)
	}
	_, err := resolveTLS(tlsconf.Options{}, dir)
	wantUsage(t, err, "incomplete", filepath.Join(dir, "admin-key.pem")+" missing")
}

func TestResolveTLSRefusesBadFlagCombinations(t *testing.T) {
	dir := devPKI(t)
	ok := pki.Options(dir, "admin")
	cases := []struct {
		name  string
		given tlsconf.Options
		wants []string
	}{
		{"plaintext with a CA", tlsconf.Options{Plaintext: true, CA: ok.CA}, []string{"--plaintext", "cannot be combined with --tls.ca"}},
		{"a CA alone", tlsconf.Options{CA: ok.CA}, []string{"--tls.ca given without --tls.cert, --tls.key", "go together"}},
		{"no key", tlsconf.Options{CA: ok.CA, Cert: ok.Cert}, []string{"--tls.ca, --tls.cert given without --tls.key"}},
		{"a missing CA file", tlsconf.Options{CA: filepath.Join(dir, "nope.pem"), Cert: ok.Cert, Key: ok.Key},
			[]string{"--tls.ca " + filepath.Join(dir, "nope.pem"), "no such file"}},
		{"a CA that is no PEM", tlsconf.Options{CA: ok.Key, Cert: ok.Cert, Key: ok.Key}, []string{"--tls.ca", "no PEM certificate"}},
		{"a key of another certificate", tlsconf.Options{CA: ok.CA, Cert: ok.Cert, Key: filepath.Join(dir, "ca-key.pem")},
			[]string{"--tls.cert", "--tls.key", "private key does not match"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := resolveTLS(c.given, filepath.Join(t.TempDir(), "none"))
			wantUsage(t, err, c.wants...)
		})
	}
}

// `dev up` ends by saying where the certificates and the token are and how
// the CLI, grpcurl and curl use them, with paths that work from anywhere.
func TestDevUpPrintsWhereTheCertificatesAre(t *testing.T) {
	o := devcluster.DefaultOptions()
	o.DataDir = t.TempDir()
	var b strings.Builder
	printSecurity(&b, o)
	dir := filepath.Join(o.DataDir, "pki")
	for _, w := range []string{
		"mutual TLS",
		"export TIDEMARK_TLS_CA=" + filepath.Join(dir, "ca.pem") + " TIDEMARK_TLS_CERT=" + filepath.Join(dir, "admin.pem") +
			" TIDEMARK_TLS_KEY=" + filepath.Join(dir, "admin-key.pem"),
		"grpcurl -cacert " + filepath.Join(dir, "ca.pem") + " -cert " + filepath.Join(dir, "admin.pem") + " -key " +
			filepath.Join(dir, "admin-key.pem") + " 127.0.0.1:9092 list",
		"kcat -b 127.0.0.1:29092 -X security.protocol=ssl -X ssl.ca.location=" + filepath.Join(dir, "ca.pem"),
		filepath.Join(dir, "tokens"),
	} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("dev up's security note lacks %q:\n%s", w, b.String())
		}
	}
	o.Plaintext = true
	b.Reset()
	printSecurity(&b, o)
	if !strings.Contains(b.String(), "--plaintext") || strings.Contains(b.String(), "export") {
		t.Errorf("plaintext note:\n%s", b.String())
	}
}
