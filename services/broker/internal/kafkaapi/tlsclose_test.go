package kafkaapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSignedTLS is a server TLS config with a throwaway certificate.
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// Closing the server closes a TLS connection from the closing goroutine
// while the connection's own goroutine, its handshake just done, swaps in
// the TLS layer: the two met unsynchronized on one field, a data race the
// race detector reported (run with -race).
func TestServerCloseOfATLSConnectionIsNoDataRace(t *testing.T) {
	s := New(Options{Limits: Limits{}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.ServeListener(Listener{TLS: selfSignedTLS(t)}, lis) }()
	c, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	s.Close() // as the server ends its handshake
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, _, err := readAnswer(t, c); err == nil {
		t.Fatal("the connection is still open after Close")
	}
}
