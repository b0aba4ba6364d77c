// Package tlsconf is the one set of TLS settings every tidemark binary
// takes: a certificate and key that prove who it is, a CA that proves who
// its peers are, and an explicit --plaintext to turn all of it off.
//
// The same files serve both directions: a node presents its certificate as
// a server to its callers and as a client to the nodes it calls (mutual
// TLS), and trusts only certificates the CA signed. Certificates are read
// again when their file changes, so a renewed certificate is used from the
// next handshake without a restart.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"tidemark.io/services/platform/config"
)

// Options are the TLS settings of one binary. The zero value is "not
// configured", which Validate refuses unless Plaintext is set: a node never
// falls back to plaintext silently.
type Options struct {
	// CA is a PEM file of the CA certificates peers must chain to.
	CA string
	// Cert and Key are this node's PEM certificate and private key.
	Cert string
	Key  string
	// ServerName, when set, is the name a client expects in every server's
	// certificate instead of the host it dials.
	ServerName string
	// Plaintext turns TLS off on every link (development and tests).
	Plaintext bool
}

// AddFlags registers --tls.ca, --tls.cert, --tls.key, --tls.server.name and
// --plaintext.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.CA, "tls.ca", o.CA, "PEM file of the CA that signs every tidemark certificate")
	fs.StringVar(&o.Cert, "tls.cert", o.Cert, "PEM certificate of this process (its Common Name is its identity)")
	fs.StringVar(&o.Key, "tls.key", o.Key, "PEM private key of --tls.cert")
	fs.StringVar(&o.ServerName, "tls.server.name", o.ServerName, "name expected in servers' certificates; empty uses the dialled host")
	fs.BoolVar(&o.Plaintext, "plaintext", o.Plaintext, "no TLS and no authentication on any link (development only)")
}

// Enabled reports whether TLS is on.
func (o Options) Enabled() bool { return !o.Plaintext }

// Validate names the first setting that cannot work.
func (o Options) Validate() error {
	if o.Plaintext {
		if o.CA != "" || o.Cert != "" || o.Key != "" {
			return config.Invalid("plaintext", true, "--plaintext cannot be combined with --tls.ca, --tls.cert or --tls.key")
		}
		return nil
	}
	for _, f := range []struct{ name, path string }{{"tls.ca", o.CA}, {"tls.cert", o.Cert}, {"tls.key", o.Key}} {
		if f.path == "" {
			return config.Invalid(f.name, "", "TLS is on by default: give --tls.ca, --tls.cert and --tls.key, or --plaintext to run without TLS")
		}
		if _, err := os.Stat(f.path); err != nil {
			return config.Invalid(f.name, f.path, "%v", err)
		}
	}
	return nil
}

// Server is the server side: present Cert, and require a client
// certificate signed by CA (mutual TLS).
func (o Options) Server() (*tls.Config, error) {
	pool, err := o.pool()
	if err != nil {
		return nil, err
	}
	kp := o.keyPair()
	if _, err := kp.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get() },
	}, nil
}

// Client is the client side: verify the server against CA (and
// ServerName), and present Cert.
func (o Options) Client() (*tls.Config, error) {
	pool, err := o.pool()
	if err != nil {
		return nil, err
	}
	kp := o.keyPair()
	if _, err := kp.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		RootCAs:              pool,
		ServerName:           o.ServerName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() },
	}, nil
}

// ServerCredentials is the gRPC server's transport credentials; nil with
// Plaintext.
func (o Options) ServerCredentials() (credentials.TransportCredentials, error) {
	if o.Plaintext {
		return nil, nil
	}
	c, err := o.Server()
	if err != nil {
		return nil, err
	}
	return Credentials(c), nil
}

// ServerOption is ServerCredentials as a grpc.ServerOption (a no-op with
// Plaintext).
func (o Options) ServerOption() (grpc.ServerOption, error) {
	c, err := o.ServerCredentials()
	if err != nil || c == nil {
		return grpc.EmptyServerOption{}, err
	}
	return grpc.Creds(c), nil
}

// ClientOrNil is Client, or nil with Plaintext: the form the Go client's
// Options.TLS takes.
func (o Options) ClientOrNil() (*tls.Config, error) {
	if o.Plaintext {
		return nil, nil
	}
	return o.Client()
}

// DialOption is a gRPC client's transport credentials: mutual TLS, or
// insecure with Plaintext.
func (o Options) DialOption() (grpc.DialOption, error) {
	if o.Plaintext {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	c, err := o.Client()
	if err != nil {
		return nil, err
	}
	return grpc.WithTransportCredentials(Credentials(c)), nil
}

// Plain is the Options of a plaintext process (tests, --plaintext).
func Plain() Options { return Options{Plaintext: true} }

func (o Options) pool() (*x509.CertPool, error) {
	pem, err := os.ReadFile(o.CA)
	if err != nil {
		return nil, fmt.Errorf("--tls.ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls.ca %s: no PEM certificate in it", o.CA)
	}
	return pool, nil
}

func (o Options) keyPair() *keyPair { return &keyPair{cert: o.Cert, key: o.Key} }

// keyPair loads a certificate and key, and loads them again when either
// file's modification time changes (checked at most once a second).
type keyPair struct {
	cert, key string

	mu      sync.Mutex // guards the fields below
	loaded  *tls.Certificate
	stamp   [2]time.Time
	checked time.Time
}

func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if k.loaded != nil && now.Sub(k.checked) < time.Second {
		return k.loaded, nil
	}
	k.checked = now
	var stamp [2]time.Time
	for i, p := range []string{k.cert, k.key} {
		st, err := os.Stat(p)
		if err != nil {
			if k.loaded != nil {
				return k.loaded, nil // keep serving with what we have
			}
			return nil, fmt.Errorf("tls: %w", err)
		}
		stamp[i] = st.ModTime()
	}
	if k.loaded != nil && stamp == k.stamp {
		return k.loaded, nil
	}
	c, err := tls.LoadX509KeyPair(k.cert, k.key)
	if err != nil {
		if k.loaded != nil {
			return k.loaded, nil // a half-written renewal: try again later
		}
		return nil, fmt.Errorf("--tls.cert %s / --tls.key %s: %w", k.cert, k.key, err)
	}
	k.loaded, k.stamp = &c, stamp
	return k.loaded, nil
}

// ErrNoTLS is returned where a feature needs TLS identities.
var ErrNoTLS = errors.New("this needs TLS (not available with --plaintext)")
