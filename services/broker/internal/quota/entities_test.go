package quota

import (
	"fmt"
	"testing"
	"time"

	"tidemark.io/services/metastore"
)

type ent = metastore.QuotaEntity

func rates(kv ...any) metastore.ClientQuotaValues {
	v := metastore.ClientQuotaValues{}
	for i := 0; i < len(kv); i += 2 {
		v[kv[i].(string)] = kv[i+1].(float64)
	}
	return v
}

// Kafka's order: user+client over user+<default> client over user over
// <default> user+client ... over client over <default> client, then the
// static settings; each kind looked up on its own key.
func TestEntityPrecedence(t *testing.T) {
	m := New(nil, nil)
	all := map[metastore.QuotaEntity]metastore.ClientQuotaValues{
		{User: "alice", ClientID: "app"}:                     {ProducerByteRate: 1},
		{User: "alice", DefaultClientID: true}:               {ProducerByteRate: 2},
		{User: "alice"}:                                      {ProducerByteRate: 3, ConsumerByteRate: 33},
		{DefaultUser: true, ClientID: "app"}:                 {ProducerByteRate: 4},
		{DefaultUser: true, DefaultClientID: true}:           {ProducerByteRate: 5},
		{DefaultUser: true}:                                  {ProducerByteRate: 6},
		{ClientID: "app"}:                                    {ProducerByteRate: 7},
		{DefaultClientID: true}:                              {ProducerByteRate: 8},
		{User: "<default>"}:                                  {ProducerByteRate: 99}, // a user literally named so
		{User: "carol", ClientID: "app", DefaultUser: false}: rates(ConsumerByteRate, 50.0),
	}
	c := cfg(1000, "alice:500")
	cases := []struct {
		name  string
		drop  []metastore.QuotaEntity // removed before the lookup, in order
		who   Client
		kind  Kind
		limit float64
		key   key
	}{
		{"user+client", nil, Client{"alice", "app"}, Produce, 1, key{Produce, "alice", "app"}},
		{"user+default client", []ent{{User: "alice", ClientID: "app"}}, Client{"alice", "app"}, Produce, 2, key{Produce, "alice", "app"}},
		{"user", []ent{{User: "alice", DefaultClientID: true}}, Client{"alice", "app"}, Produce, 3, key{Produce, "alice", ""}},
		{"default user+client", []ent{{User: "alice"}}, Client{"alice", "app"}, Produce, 4, key{Produce, "alice", "app"}},
		{"default user+default client", []ent{{DefaultUser: true, ClientID: "app"}}, Client{"alice", "app"}, Produce, 5, key{Produce, "alice", "app"}},
		{"default user", []ent{{DefaultUser: true, DefaultClientID: true}}, Client{"alice", "app"}, Produce, 6, key{Produce, "alice", ""}},
		{"client", []ent{{DefaultUser: true}}, Client{"alice", "app"}, Produce, 7, key{Produce, "", "app"}},
		{"default client", []ent{{ClientID: "app"}}, Client{"alice", "app"}, Produce, 8, key{Produce, "", "app"}},
		{"static override", []ent{{DefaultClientID: true}}, Client{"alice", "app"}, Produce, 500, key{Produce, "alice", ""}},
		{"static default", nil, Client{"bob", "app"}, Produce, 1000, key{Produce, "bob", ""}},
		{"a literal <default> user is a user", nil, Client{"<default>", "x"}, Produce, 99, key{Produce, "<default>", ""}},
		{"the other kind's key is not this kind's quota", nil, Client{"carol", "app"}, Produce, 1000, key{Produce, "carol", ""}},
		{"its own key", nil, Client{"carol", "app"}, Fetch, 50, key{Fetch, "carol", "app"}},
	}
	for _, tc := range cases {
		for _, e := range tc.drop {
			delete(all, e)
		}
		m.SetEntities(all)
		m.mu.Lock()
		limit, k := m.resolveLocked(tc.kind, c, tc.who)
		m.mu.Unlock()
		if limit != tc.limit || k != tc.key {
			t.Errorf("%s: limit %v on %+v, want %v on %+v", tc.name, limit, k, tc.limit, tc.key)
		}
	}
}

// Without a client id (a gRPC caller) only the user-only entities match.
func TestEmptyClientIDMatchesUserEntitiesOnly(t *testing.T) {
	m := New(nil, nil)
	m.SetEntities(map[metastore.QuotaEntity]metastore.ClientQuotaValues{
		{User: "alice", DefaultClientID: true}: {ProducerByteRate: 2},
		{DefaultClientID: true}:                {ProducerByteRate: 8},
	})
	c := cfg(Unlimited, "")
	m.mu.Lock()
	limit, _ := m.resolveLocked(Produce, c, Client{Principal: "alice"})
	m.mu.Unlock()
	if limit != Unlimited {
		t.Fatalf("limit %v, want unlimited", limit)
	}
	m.SetEntities(map[metastore.QuotaEntity]metastore.ClientQuotaValues{{DefaultUser: true}: {ProducerByteRate: 6}})
	m.mu.Lock()
	limit, _ = m.resolveLocked(Produce, c, Client{Principal: "alice"})
	m.mu.Unlock()
	if limit != 6 {
		t.Fatalf("limit %v, want 6 from users/<default>", limit)
	}
}

// Clients matching one client-id entity share its rate: two principals
// with the same client id together go over it; another client id does not.
func TestClientsOfOneEntityShareItsRate(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(nil, clk.now)
	m.SetEntities(map[metastore.QuotaEntity]metastore.ClientQuotaValues{{ClientID: "app"}: {ProducerByteRate: 1000}})
	c := cfg(Unlimited, "")
	// 10,000 bytes over the minimum 10 s window is exactly the rate.
	if d := m.Record(Produce, c, Client{"alice", "app"}, 10_000); d != 0 {
		t.Fatalf("alice alone at the rate: throttled %v", d)
	}
	if d := m.Record(Produce, c, Client{"bob", "app"}, 10_000); d != 10*time.Second {
		t.Fatalf("bob on the same entity: throttle %v, want 10s (the rate is shared)", d)
	}
	if d := m.Record(Produce, c, Client{"bob", "other"}, 1<<20); d != 0 {
		t.Fatalf("another client id: throttled %v", d)
	}
	// The entity removed: nobody is limited any more.
	m.SetEntities(nil)
	if d := m.Owed(Produce, c, Client{"bob", "app"}); d != 0 {
		t.Fatalf("quota removed, still owed %v", d)
	}
}

// The rates of client ids gone idle for a whole window of samples are
// dropped as other clients go on: many short-lived client ids leave no
// lasting memory behind, and one that comes back starts a fresh rate.
func TestIdleClientIDsAreForgotten(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(nil, clk.now)
	m.SetEntities(map[metastore.QuotaEntity]metastore.ClientQuotaValues{{DefaultClientID: true}: {ProducerByteRate: 1000}})
	c := cfg(Unlimited, "")
	for i := range 5000 {
		m.Record(Produce, c, Client{"alice", fmt.Sprintf("app-%d", i)}, 20_000)
	}
	clk.t = clk.t.Add(12 * time.Second) // past the 11 samples of 1 s
	for range 1024 {
		m.Record(Produce, c, Client{"alice", "steady"}, 1)
	}
	if n := len(m.rates); n > 1 {
		t.Fatalf("%d rates kept after 5,000 client ids went idle, want only the active one", n)
	}
	if d := m.Record(Produce, c, Client{"alice", "app-7"}, 100); d != 0 {
		t.Fatalf("a client id back after the window is throttled %v for its old bytes", d)
	}
}
