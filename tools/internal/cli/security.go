package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// devPKIDir is where `make run` keeps its CA and the admin certificate,
// relative to the repository root it runs from.
var devPKIDir = filepath.Join(".data", "pki")

// devCertName is the dev cluster's operator identity.
const devCertName = "admin"

// addTLSFlags registers the TLS flags every command shares, with the
// services' names and environment twins (TIDEMARK_TLS_CA, ...).
func addTLSFlags(f *pflag.FlagSet, o *tlsconf.Options) {
	f.StringVar(&o.CA, "tls.ca", "", "PEM file of the CA the cluster's certificates chain to (default: "+filepath.Join(devPKIDir, "ca.pem")+" when it exists)")
	f.StringVar(&o.Cert, "tls.cert", "", "PEM certificate to present; its Common Name is who you are (default: "+pki.CertPath(devPKIDir, devCertName)+" when it exists)")
	f.StringVar(&o.Key, "tls.key", "", "PEM private key of --tls.cert (default: "+pki.KeyPath(devPKIDir, devCertName)+" when it exists)")
	f.StringVar(&o.ServerName, "tls.server.name", "", "name expected in the servers' certificates; empty uses the host dialled")
	f.BoolVar(&o.Plaintext, "plaintext", false, "no TLS: for a cluster started with --plaintext")
	withEnv(f, "tls.ca", "tls.cert", "tls.key", "tls.server.name", "plaintext")
}

// resolveTLS turns the TLS flags into settings: --plaintext alone; all of
// --tls.ca, --tls.cert and --tls.key; or, with none of them, the dev
// cluster's CA and admin certificate in dir when they are there.
func resolveTLS(o tlsconf.Options, dir string) (tlsconf.Options, error) {
	given := map[string]string{"--tls.ca": o.CA, "--tls.cert": o.Cert, "--tls.key": o.Key}
	var set, missing []string
	for _, name := range []string{"--tls.ca", "--tls.cert", "--tls.key"} {
		if given[name] != "" {
			set = append(set, name)
		} else {
			missing = append(missing, name)
		}
	}
	if o.Plaintext {
		if len(set) > 0 {
			return o, usagef("--plaintext (TIDEMARK_PLAINTEXT) cannot be combined with %s: choose TLS or plaintext", strings.Join(set, ", "))
		}
		return tlsconf.Plain(), nil
	}
	if len(set) > 0 && len(missing) > 0 {
		return o, usagef("%s given without %s: --tls.ca, --tls.cert and --tls.key go together (env TIDEMARK_TLS_CA, TIDEMARK_TLS_CERT, TIDEMARK_TLS_KEY)",
			strings.Join(set, ", "), strings.Join(missing, ", "))
	}
	if len(set) == 0 {
		d := pki.Options(dir, devCertName)
		var found, absent []string
		for _, p := range []string{d.CA, d.Cert, d.Key} {
			if _, err := os.Stat(p); err == nil {
				found = append(found, p)
			} else {
				absent = append(absent, p)
			}
		}
		switch {
		case len(absent) == 0:
			d.ServerName = o.ServerName
			o = d
		case len(found) == 0:
			return o, usagef("TLS is on by default and no certificate was given: pass --tls.ca, --tls.cert and --tls.key "+
				"(env TIDEMARK_TLS_CA, TIDEMARK_TLS_CERT, TIDEMARK_TLS_KEY), run where `make run` keeps %s, "+
				"or pass --plaintext for a cluster without TLS", strings.Join([]string{d.CA, d.Cert, d.Key}, ", "))
		default:
			return o, usagef("the dev cluster's certificates are incomplete: %s found but %s missing (`make run` makes them again; or pass --tls.ca, --tls.cert and --tls.key)",
				strings.Join(found, ", "), strings.Join(absent, ", "))
		}
	}
	for _, f := range []struct{ flag, path string }{{"--tls.ca", o.CA}, {"--tls.cert", o.Cert}, {"--tls.key", o.Key}} {
		if _, err := os.Stat(f.path); err != nil {
			return o, usagef("%s %s: %v", f.flag, f.path, errors.Unwrap(err))
		}
	}
	// Load once here, so that a broken file is named before anything dials.
	if _, err := o.Client(); err != nil {
		return o, usagef("%v", err)
	}
	return o, nil
}

// security resolves the TLS flags once per command.
func (g *globals) security() (tlsconf.Options, error) {
	if !g.tlsResolved {
		g.tlsResolved = true
		g.tls, g.tlsErr = resolveTLS(g.tlsFlags, devPKIDir)
	}
	return g.tls, g.tlsErr
}

// dialOption is how commands dial tidemark's gRPC services.
func (g *globals) dialOption() (grpc.DialOption, error) {
	o, err := g.security()
	if err != nil {
		return nil, err
	}
	return o.DialOption()
}

// clientOptions are the Go client's options: timeouts and TLS.
func (g *globals) clientOptions() (client.Options, error) {
	o, err := g.security()
	if err != nil {
		return client.Options{}, err
	}
	tc, err := o.ClientOrNil()
	if err != nil {
		return client.Options{}, err
	}
	return client.Options{APITimeout: g.commandTimeout, RequestTimeout: min(g.commandTimeout, client.DefaultRequestTimeout), TLS: tc}, nil
}
