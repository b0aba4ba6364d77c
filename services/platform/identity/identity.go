// Package identity names who is calling: the principal a peer's TLS
// certificate proves, and the role tidemark gives that name.
//
// A certificate's Common Name is the principal's name. Three shapes of name
// are roles of the cluster itself — broker-N, controller-N and gateway — and
// every other name is a user. The CA that signs a certificate is the
// authority: it must sign a broker-N name only for broker N.
//
// The gateway speaks for the REST user it authenticated, and a broker for the
// Kafka client whose admin request it forwards to the active controller (as
// Kafka's brokers do with their envelope): each sends the user's name in the
// OnBehalfOf header, and FromContext believes that header only from a caller
// whose certificate says gateway or broker-N, and only as a user (a
// forwarded name never gets a cluster role).
package identity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// OnBehalfOf is the gRPC metadata key in which the gateway names the REST
// user it forwards a call for.
const OnBehalfOf = "tidemark-on-behalf-of"

// ClientHost is the gRPC metadata key in which a forwarding broker names
// the address its client connected from, for ACL rules that name a host;
// believed, like OnBehalfOf, only from a broker or the gateway.
const ClientHost = "tidemark-client-host"

// Role is what a principal is to the cluster.
type Role int

const (
	// Anonymous: no verified certificate (a plaintext listener).
	Anonymous Role = iota
	// User: a client or operator, governed by ACLs.
	User
	// Broker: broker N; may fetch as replica N and speak as broker N.
	Broker
	// Controller: a controller instance; may send control requests.
	Controller
	// Gateway: the REST gateway; may forward a user's identity.
	Gateway
)

func (r Role) String() string {
	switch r {
	case User:
		return "user"
	case Broker:
		return "broker"
	case Controller:
		return "controller"
	case Gateway:
		return "gateway"
	}
	return "anonymous"
}

// Principal is a verified caller.
type Principal struct {
	// Name is the certificate's Common Name, or the forwarded user name.
	Name string
	Role Role
	// ID is the broker or controller id for those roles, else -1.
	ID int32
	// Via is "gateway" when the gateway forwarded the call for Name.
	Via string
}

// Anon is the principal of a call with no verified certificate.
var Anon = Principal{Name: "ANONYMOUS", Role: Anonymous, ID: -1}

// String is Kafka's principal form, e.g. User:broker-2, User:alice.
func (p Principal) String() string {
	if p.Role == Anonymous {
		return "User:ANONYMOUS"
	}
	return "User:" + p.Name
}

// Parse gives a certificate name its role: broker-N, controller-N and
// gateway are the cluster's own; anything else is a user.
func Parse(name string) Principal {
	if name == "" {
		return Anon
	}
	if name == "gateway" {
		return Principal{Name: name, Role: Gateway, ID: -1}
	}
	for _, r := range []struct {
		prefix string
		role   Role
	}{{"broker-", Broker}, {"controller-", Controller}} {
		if rest, ok := strings.CutPrefix(name, r.prefix); ok {
			if n, err := strconv.ParseInt(rest, 10, 32); err == nil && n >= 0 && strconv.FormatInt(n, 10) == rest {
				return Principal{Name: name, Role: r.role, ID: int32(n)}
			}
		}
	}
	return Principal{Name: name, Role: User, ID: -1}
}

// ForUser makes a user principal whatever the name looks like: the form for a
// name that did not come from a certificate (a REST token, a forwarded name).
func ForUser(name string) Principal {
	if name == "" {
		return Anon
	}
	return Principal{Name: name, Role: User, ID: -1}
}

// FromCert is the principal a verified leaf certificate names.
func FromCert(c *x509.Certificate) Principal {
	if c == nil {
		return Anon
	}
	return Parse(c.Subject.CommonName)
}

// FromTLS is the principal of a TLS connection state, or Anon when the peer
// sent no verified certificate.
func FromTLS(cs *tls.ConnectionState) Principal {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Anon
	}
	return FromCert(cs.VerifiedChains[0][0])
}

// FromPeer is the principal of a gRPC call's transport alone (no
// forwarding), or Anon on a plaintext connection.
func FromPeer(ctx context.Context) Principal {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return Anon
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return Anon
	}
	return FromTLS(&ti.State)
}

// FromContext is the principal a gRPC call acts as: its certificate's, or,
// when the gateway or a broker forwards a user, that user.
func FromContext(ctx context.Context) Principal {
	if p, ok := ctx.Value(ctxKey{}).(Principal); ok {
		return p
	}
	p := FromPeer(ctx)
	if p.Role != Gateway && p.Role != Broker {
		return p
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(OnBehalfOf); len(v) == 1 && v[0] != "" {
		u := ForUser(v[0])
		u.Via = p.Name
		return u
	}
	return p
}

type ctxKey struct{}

// With stores p in ctx, where FromContext finds it first: the authorizing
// interceptor stores what it decided so handlers (quotas, logs) agree.
func With(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// Forward adds the on-behalf-of header for user to an outgoing context (the
// gateway's and a broker's forwarded calls).
func Forward(ctx context.Context, user string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, OnBehalfOf, user)
}

// ForwardFrom is Forward that also names the address the user connected
// from (empty: unknown).
func ForwardFrom(ctx context.Context, user, host string) context.Context {
	ctx = Forward(ctx, user)
	if host != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, ClientHost, host)
	}
	return ctx
}

// ForwardedHost is the client address a broker or the gateway named for
// the user it forwards this call for; "" when it named none or the caller
// is not one that may forward.
func ForwardedHost(ctx context.Context) string {
	if p := FromPeer(ctx); p.Role != Gateway && p.Role != Broker {
		return ""
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(ClientHost); len(v) == 1 {
		return v[0]
	}
	return ""
}

// Describe is a short form for logs: "broker-2 (broker 2)", "alice via gateway".
func (p Principal) Describe() string {
	switch {
	case p.Via != "":
		return fmt.Sprintf("%s via %s", p.Name, p.Via)
	case p.Role == Broker || p.Role == Controller:
		return fmt.Sprintf("%s (%s %d)", p.Name, p.Role, p.ID)
	}
	return p.Name
}
