package devcluster

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// Certificate names besides the nodes' own (controller-N, broker-N) and
// AdminUser, the operator's (the CLI, grpcurl and curl).
const (
	// GatewayName is the REST gateway's identity.
	GatewayName = "gateway"
	// LauncherName is the identity of the launcher's control API server.
	LauncherName = "launcher"
)

// gatewaySpeaksTLS says whether the gateway binary takes --tls.ca,
// --tls.cert, --tls.key, --plaintext and --rest.tokens.file. Until it does,
// the launcher starts it without them (it then cannot reach brokers and
// controllers that require TLS); turn this on with the gateway's flags.
const gatewaySpeaksTLS = true

// GatewayTLS reports whether the launcher gives the gateway its TLS and
// token flags (see gatewaySpeaksTLS).
func GatewayTLS() bool { return gatewaySpeaksTLS }

// TokensPath is the gateway's bearer token file: lines of "<token> <user>".
func (o Options) TokensPath() string { return filepath.Join(o.PKIDir(), "tokens") }

// Security is how a client reaches the cluster: mutual TLS with the admin
// certificate, or plaintext with Options.Plaintext.
func (o Options) Security() tlsconf.Options {
	if o.Plaintext {
		return tlsconf.Plain()
	}
	return pki.Options(o.PKIDir(), AdminUser)
}

// ACLPath is the brokers' and controllers' ACL file, made on the first
// start and kept afterwards, so a developer can edit it (it is read again
// when it changes).
func (o Options) ACLPath() string { return filepath.Join(o.DataDir, "acl") }

// devACL lets the gateway make the console's shared view and fault buttons
// work as itself (README, "Who may call it"); admin is a super user by the
// services' default.
const devACL = `# The dev cluster's ACLs (principal operation resource); read again when it changes.
# User:admin, the operator's certificate and REST token, is a super user (--super.users).
allow User:gateway Describe        Cluster
allow User:gateway DescribeConfigs Topic:*
allow User:gateway InjectFault     Cluster
`

// tlsArgs are the flags that give the node named name its certificate and
// the cluster's ACL file, or --plaintext.
func (o Options) tlsArgs(name string) []string {
	if o.Plaintext {
		return []string{"--plaintext"}
	}
	t := pki.Options(o.PKIDir(), name)
	return []string{"--tls.ca", t.CA, "--tls.cert", t.Cert, "--tls.key", t.Key, "--acl.file", o.ACLPath()}
}

// gatewayTLSArgs are the gateway's TLS and token flags (none while the
// gateway cannot take them, see gatewaySpeaksTLS).
func (o Options) gatewayTLSArgs() []string {
	if !gatewaySpeaksTLS {
		return nil
	}
	if o.Plaintext {
		return []string{"--plaintext"}
	}
	t := pki.Options(o.PKIDir(), GatewayName)
	return []string{"--tls.ca", t.CA, "--tls.cert", t.Cert, "--tls.key", t.Key, "--rest.tokens.file", o.TokensPath()}
}

// ensurePKI makes the CA, every certificate, the admin's REST token and the
// ACL file on the first start, and keeps them on later ones (issuing only
// what is missing or near expiry), so exported paths and tokens stay valid.
func (o Options) ensurePKI() (issued []string, err error) {
	leaves := append(o.leaves(), pki.Leaf{Name: LauncherName}, pki.Leaf{Name: JaegerName})
	if issued, err = pki.Ensure(o.PKIDir(), leaves...); err != nil {
		return issued, err
	}
	if _, err := EnsureToken(o.TokensPath(), AdminUser); err != nil {
		return issued, err
	}
	if _, err := os.Stat(o.ACLPath()); os.IsNotExist(err) {
		if err := os.WriteFile(o.ACLPath(), []byte(devACL), 0o644); err != nil {
			return issued, err
		}
	}
	return issued, nil
}

// EnsureToken returns user's bearer token from the token file at path,
// adding a random one (32 bytes, hex) when the file has none for user. The
// file is kept at mode 0600: it holds secrets.
func EnsureToken(path, user string) (string, error) {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(old))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[1] == user {
			return f[0], os.Chmod(path, 0o600)
		}
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		old = append(old, '\n')
	}
	data := append(old, []byte(token+" "+user+"\n")...)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return token, os.Chmod(path, 0o600)
}

// dialOption is how the launcher itself dials node n (health checks, the
// first controller's election): with the admin certificate, except a
// gateway that does not speak TLS yet.
func (o Options) dialOption(n *Node) (grpc.DialOption, error) {
	if n.Kind == "gateway" && !gatewaySpeaksTLS {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	return o.Security().DialOption()
}

// controlServerOptions serve the launcher's control API with mutual TLS
// under the launcher's certificate, guarded by Options.Authorizer or, when
// there is none, by one whose super users are the operator (admin) and the
// gateway (the console's dev actions): a broker or controller has no
// business killing nodes.
func (o Options) controlServerOptions() ([]grpc.ServerOption, error) {
	// The gateway's connection to the launcher keeps itself alive.
	opts := []grpc.ServerOption{grpcserver.KeepaliveEnforcement()}
	a := o.Authorizer
	if !o.Plaintext {
		creds, err := pki.Options(o.PKIDir(), LauncherName).ServerOption()
		if err != nil {
			return nil, err
		}
		opts = append(opts, creds)
		if a == nil {
			cfg := authz.Config{SuperUsers: []string{"User:" + AdminUser, "User:" + GatewayName}}
			if a, err = authz.New(authz.Options{Config: cfg, TLS: true, Logger: slog.New(slog.DiscardHandler)}); err != nil {
				return nil, err
			}
		}
	}
	if a != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(a.Unary()), grpc.ChainStreamInterceptor(a.Stream()))
	}
	return opts, nil
}
