package metastore

import (
	"testing"
	"time"
)

// Entities are stored as Kafka's ZooKeeper paths name them, each name
// escaped, and read back as the same entity; a key under the prefix that
// names no entity is not one.
func TestClientQuotaKeysRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	_, s := startStore(t)
	sess := elect(t, ctx, s, 1, 2*time.Second)
	for _, e := range []QuotaEntity{{User: "ops/alice"}, {ClientID: "app"}, {User: "ops/alice", DefaultClientID: true},
		{User: QuotaDefault}, {DefaultUser: true}, {DefaultUser: true, DefaultClientID: true},
		{DefaultUser: true, ClientID: "a b%c"}, {DefaultClientID: true}, {ClientID: QuotaDefault, User: "x"}} {
		if err := sess.PutClientQuotas(ctx, []StoredClientQuota{{Entity: e, Values: ClientQuotaValues{"producer_byte_rate": 1}}}); err != nil {
			t.Fatal(err)
		}
		stored, _, err := s.ClientQuotas(ctx)
		if err != nil || len(stored) != 1 || stored[0].Entity != e {
			t.Fatalf("%+v: read back %+v %v", e, stored, err)
		}
		if err := sess.PutClientQuotas(ctx, []StoredClientQuota{{Entity: e}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{"quotas/users/", "quotas/users/a%2", "quotas/users/a/clients", "quotas/clients/b/users/a",
		"quotas/users/a b", "quotas/ips/10.0.0.1", "quotas/users/a/clients/b/x"} {
		if e, ok := s.ClientQuotaEntityOf(s.Prefix() + "/" + rel); ok {
			t.Errorf("%s parsed as the entity %+v", rel, e)
		}
	}
}
