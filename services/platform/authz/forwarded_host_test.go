package authz

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"tidemark.io/services/platform/identity"
)

// forwardedBy is the incoming context of a call that the peer named by its
// certificate's Common Name forwards for user, naming host ("" names none).
func forwardedBy(cn, user, host string) context.Context {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	ctx := peer.NewContext(context.Background(), &peer.Peer{
		Addr:     &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9000},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}},
	})
	md := metadata.Pairs(identity.OnBehalfOf, user)
	if host != "" {
		md.Append(identity.ClientHost, host)
	}
	return metadata.NewIncomingContext(ctx, md)
}

// A call a broker forwards for a Kafka client is decided by the client's
// address as the broker names it; a forwarder that names none cannot get
// round a host's deny, and only a broker or the gateway is believed.
func TestForwardedCallsAreDecidedByTheClientsHost(t *testing.T) {
	a, err := New(Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	a.SetStored(RulesOf([]Binding{
		bind("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "10.0.0.5", "ALTER", "ALLOW"),
		bind("CLUSTER", "kafka-cluster", "LITERAL", "User:dev", "*", "ALTER", "ALLOW"),
		bind("CLUSTER", "kafka-cluster", "LITERAL", "User:dev", "10.0.0.66", "ALTER", "DENY"),
	}, func(b Binding, err error) { t.Errorf("binding %v refused: %v", b, err) }))
	for _, c := range []struct {
		why            string
		by, user, host string
		want           bool
	}{
		{"allow from the client's named host", "broker-1", "ops", "10.0.0.5", true},
		{"allow from another named host", "broker-1", "ops", "10.0.0.6", false},
		{"allow for one host, none named", "broker-1", "ops", "", false},
		{"deny of the named host", "broker-1", "dev", "10.0.0.66", false},
		{"deny of another host", "broker-1", "dev", "10.0.0.7", true},
		{"deny of a host, none named: refused", "broker-1", "dev", "", false},
		{"via the gateway", "gateway", "ops", "10.0.0.5", true},
		{"a user cannot name its own host", "ops", "ops", "10.0.0.5", false},
	} {
		if got := a.Allowed(forwardedBy(c.by, c.user, c.host), Alter, TheCluster); got != c.want {
			t.Errorf("%s: %s for %s from %q = %v, want %v", c.why, c.by, c.user, c.host, got, c.want)
		}
	}
}
