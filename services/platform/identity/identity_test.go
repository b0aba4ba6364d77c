package identity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

func TestParseGivesRolesOnlyToExactNames(t *testing.T) {
	for name, want := range map[string]Principal{
		"broker-2":      {Name: "broker-2", Role: Broker, ID: 2},
		"controller-10": {Name: "controller-10", Role: Controller, ID: 10},
		"gateway":       {Name: "gateway", Role: Gateway, ID: -1},
		"admin":         {Name: "admin", Role: User, ID: -1},
		"broker-02":     {Name: "broker-02", Role: User, ID: -1},
		"broker--1":     {Name: "broker--1", Role: User, ID: -1},
		"broker-":       {Name: "broker-", Role: User, ID: -1},
		"broker-x":      {Name: "broker-x", Role: User, ID: -1},
		"gateway2":      {Name: "gateway2", Role: User, ID: -1},
		"":              Anon,
	} {
		if got := Parse(name); got != want {
			t.Errorf("Parse(%q) = %+v, want %+v", name, got, want)
		}
	}
}

func TestOnBehalfOfIsIgnoredWithoutACertificate(t *testing.T) {
	md := metadata.Pairs(OnBehalfOf, "broker-1")
	ctx := metadata.NewIncomingContext(context.Background(), md)
	// No TLS peer: the header is ignored.
	if p := FromContext(ctx); p != Anon {
		t.Fatalf("header without a gateway certificate: got %+v, want anonymous", p)
	}
	// A stored decision wins, and a forwarded name is always a user.
	gw := With(ctx, Principal{Name: "alice", Role: User, ID: -1, Via: "gateway"})
	if p := FromContext(gw); p.Role != User || p.Name != "alice" {
		t.Fatalf("stored principal: %+v", p)
	}
	if p := ForUser("broker-1"); p.Role != User {
		t.Fatalf("ForUser gave %s a cluster role", p.Name)
	}
}

// peerCtx is an incoming call from a peer whose verified certificate names cn.
func peerCtx(cn string, md metadata.MD) context.Context {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		VerifiedChains: [][]*x509.Certificate{{cert}}}}})
	return metadata.NewIncomingContext(ctx, md)
}

// The gateway and the brokers (forwarding a Kafka client's admin request)
// may speak for a user, as a user only; anyone else's header is ignored.
func TestOnBehalfOfIsBelievedFromTheGatewayAndBrokers(t *testing.T) {
	for _, tc := range []struct {
		caller, forwarded string
		want              Principal
	}{
		{"gateway", "alice", Principal{Name: "alice", Role: User, ID: -1, Via: "gateway"}},
		{"broker-2", "alice", Principal{Name: "alice", Role: User, ID: -1, Via: "broker-2"}},
		{"broker-2", "controller-1", Principal{Name: "controller-1", Role: User, ID: -1, Via: "broker-2"}},
		{"alice", "admin", Principal{Name: "alice", Role: User, ID: -1}},
		{"controller-1", "admin", Principal{Name: "controller-1", Role: Controller, ID: 1}},
	} {
		if got := FromContext(peerCtx(tc.caller, metadata.Pairs(OnBehalfOf, tc.forwarded))); got != tc.want {
			t.Errorf("%s forwarding %s: got %+v, want %+v", tc.caller, tc.forwarded, got, tc.want)
		}
	}
}
