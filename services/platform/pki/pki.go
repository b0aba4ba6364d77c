// Package pki makes the certificates a tidemark cluster runs on: a local CA
// and, for each process or user, a certificate whose Common Name is its
// identity (broker-2, controller-1, gateway, admin). It is what lets `make
// run` start with mutual TLS on and no setup, and what `tidemark pki`
// offers operators who have no CA of their own. Pure Go: no openssl.
//
// A directory holds ca.pem and ca-key.pem, and NAME.pem and NAME-key.pem
// for each name. Keys are ECDSA P-256 and written 0600.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"tidemark.io/services/platform/tlsconf"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore: a leaf closer than this to expiry is issued again.
	renewBefore = 30 * 24 * time.Hour
)

// CA signs certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte
}

// Paths of a name's files in dir.
func CertPath(dir, name string) string { return filepath.Join(dir, name+".pem") }
func KeyPath(dir, name string) string  { return filepath.Join(dir, name+"-key.pem") }
func CAPath(dir string) string         { return filepath.Join(dir, "ca.pem") }

// Options gives the tlsconf settings for name's files in dir.
func Options(dir, name string) tlsconf.Options {
	return tlsconf.Options{CA: CAPath(dir), Cert: CertPath(dir, name), Key: KeyPath(dir, name)}
}

// NewCA makes a fresh CA in memory.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"tidemark"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadOrCreateCA loads dir's CA, or creates one there when it has none.
func LoadOrCreateCA(dir string) (*CA, error) {
	if ca, err := LoadCA(dir); err == nil {
		return ca, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := NewCA("tidemark local CA")
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, "ca-key.pem"), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(CAPath(dir), ca.PEM, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// LoadCA reads dir's ca.pem and ca-key.pem.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(CAPath(dir))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		return nil, err
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CAPath(dir), err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%s: no PEM key", filepath.Join(dir, "ca-key.pem"))
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "ca-key.pem"), err)
	}
	return &CA{Cert: cert, Key: key, PEM: certPEM}, nil
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// Name is the Common Name: the identity.
	Name string
	// Hosts are the DNS names and IP addresses it serves on; empty means
	// localhost, 127.0.0.1, ::1 and Name.
	Hosts []string
	// NotBefore and NotAfter default to an hour ago and a year from now
	// (tests set them to make expired certificates).
	NotBefore, NotAfter time.Time
}

// Issue signs a certificate for l, usable as both server and client (every
// tidemark process is both), and returns the PEM certificate and key.
func (ca *CA) Issue(l Leaf) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	if l.NotBefore.IsZero() {
		l.NotBefore = now.Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = now.Add(leafValidity)
	}
	hosts := l.Hosts
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1", l.Name}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.Name, Organization: []string{"tidemark"}},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// IssueFiles issues l into dir as NAME.pem and NAME-key.pem.
func (ca *CA) IssueFiles(dir string, l Leaf) error {
	certPEM, keyPEM, err := ca.Issue(l)
	if err != nil {
		return err
	}
	if err := writeFile(KeyPath(dir, l.Name), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(CertPath(dir, l.Name), certPEM, 0o644)
}

// Ensure makes dir's CA if it has none, and issues a certificate for every
// leaf that has none, one the CA did not sign, or one near expiry. It
// reports the names it issued. Safe to run on every start.
func Ensure(dir string, leaves ...Leaf) (issued []string, err error) {
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		return nil, fmt.Errorf("CA in %s: %w", dir, err)
	}
	for _, l := range leaves {
		if ca.valid(dir, l.Name) {
			continue
		}
		if err := ca.IssueFiles(dir, l); err != nil {
			return issued, fmt.Errorf("certificate for %s: %w", l.Name, err)
		}
		issued = append(issued, l.Name)
	}
	return issued, nil
}

func (ca *CA) valid(dir, name string) bool {
	b, err := os.ReadFile(CertPath(dir, name))
	if err != nil {
		return false
	}
	if _, err := os.Stat(KeyPath(dir, name)); err != nil {
		return false
	}
	c, err := parseCert(b)
	if err != nil || time.Until(c.NotAfter) < renewBefore {
		return false
	}
	return c.CheckSignatureFrom(ca.Cert) == nil
}

func parseCert(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// writeFile writes atomically (temp file and rename), so a process reading
// the file never sees half of it.
func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
