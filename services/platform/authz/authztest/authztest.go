// Package authztest holds what the refusal tests share: certificates for
// every role in a temporary directory, clients that present them, and the
// one assertion that a call was refused with the exact code and message.
package authztest

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// PKI is a CA and certificates in a test's temporary directory.
type PKI struct {
	Dir string
}

// New issues a certificate for each name (broker-1, controller-1, alice...)
// under a fresh CA in t.TempDir().
func New(t testing.TB, names ...string) *PKI {
	t.Helper()
	dir := t.TempDir()
	leaves := make([]pki.Leaf, len(names))
	for i, n := range names {
		leaves[i] = pki.Leaf{Name: n}
	}
	if _, err := pki.Ensure(dir, leaves...); err != nil {
		t.Fatal(err)
	}
	return &PKI{Dir: dir}
}

// Issue adds certificates for more names.
func (p *PKI) Issue(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := pki.Ensure(p.Dir, pki.Leaf{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
}

// Options are name's TLS settings.
func (p *PKI) Options(name string) tlsconf.Options { return pki.Options(p.Dir, name) }

// Dial connects to addr presenting name's certificate.
func (p *PKI) Dial(t testing.TB, addr, name string) *grpc.ClientConn {
	t.Helper()
	p.Issue(t, name)
	opt, err := p.Options(name).DialOption()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// WantRefused fails t unless err is a refusal with code, the gRPC status
// the error table gives code, and a message containing msg.
func WantRefused(t testing.TB, err error, code kerr.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want %s (%q)", code, msg)
	}
	st, _ := status.FromError(err)
	if want := kerr.Lookup(code).GRPC; st.Code() != want {
		t.Fatalf("gRPC status %s (%v), want %s", st.Code(), err, want)
	}
	if got := kerr.FromStatus(err); got.Code != code || !strings.Contains(got.Message, msg) {
		t.Fatalf("refusal %s %q, want %s with %q", got.Code, got.Message, code, msg)
	}
}
