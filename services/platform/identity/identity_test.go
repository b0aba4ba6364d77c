package identity

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
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

func TestOnBehalfOfIsBelievedOnlyFromTheGateway(t *testing.T) {
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
