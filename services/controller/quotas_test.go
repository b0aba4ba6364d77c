package controller

import (
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

func qpart(typ string, name *string) *adminv1.ClientQuotaEntityPart {
	return &adminv1.ClientQuotaEntityPart{EntityType: typ, EntityName: name}
}

func sp(s string) *string { return &s }

func setQuota(key string, v float64) *adminv1.ClientQuotaOp {
	return &adminv1.ClientQuotaOp{Key: key, Value: v}
}

// Client quota entities are validated as Kafka's controller validates
// them, stored one key an entity in etcd (none with validate_only),
// listed by Kafka's filters, and still there, and alterable, after the
// active controller fails over.
func TestClientQuotasAlteredDescribedAndSurviveFailover(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c2 := c.startController(2)
	admin := c.admin(c1)

	user, client := "user", "client-id"
	alter := func(validateOnly bool, alts ...*adminv1.ClientQuotaAlteration) []*adminv1.AlterClientQuotasResult {
		t.Helper()
		resp, err := admin.AlterClientQuotas(ctx(t), &adminv1.AlterClientQuotasRequest{Entries: alts, ValidateOnly: validateOnly})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetResults()) != len(alts) {
			t.Fatalf("%d results for %d alterations", len(resp.GetResults()), len(alts))
		}
		return resp.GetResults()
	}
	alt := func(ops []*adminv1.ClientQuotaOp, parts ...*adminv1.ClientQuotaEntityPart) *adminv1.ClientQuotaAlteration {
		return &adminv1.ClientQuotaAlteration{Entity: parts, Ops: ops}
	}
	ops := func(o ...*adminv1.ClientQuotaOp) []*adminv1.ClientQuotaOp { return o }

	refused := []struct {
		a    *adminv1.ClientQuotaAlteration
		want string
	}{
		{alt(ops(setQuota("producer_byte_rate", 1))), "Invalid empty client quota entity"},
		{alt(ops(setQuota("producer_byte_rate", 1)), qpart(user, sp("a")), qpart(user, sp("b"))), "duplicate entity entry user"},
		{alt(ops(setQuota("connection_creation_rate", 1)), qpart("ip", sp("10.0.0.1"))), "ip quota entities"},
		{alt(ops(setQuota("producer_byte_rate", 1)), qpart("group", sp("g"))), "Unhandled client quota entity type: group"},
		{alt(ops(setQuota("producer_byte_rate", 1)), qpart(user, sp(""))), "Empty user not supported"},
		{alt(ops(setQuota("producer_byte_rate", 0)), qpart(user, sp("a"))), "producer_byte_rate must be a positive number"},
		{alt(ops(setQuota("consumer_byte_rate", -5)), qpart(client, sp("a"))), "consumer_byte_rate must be a positive number"},
		{alt(ops(setQuota("producer_byte_rate", 1.5)), qpart(client, sp("a"))), "Configuration producer_byte_rate must be a Long value"},
		{alt(ops(setQuota("bogus", 1)), qpart(client, sp("a"))), "Invalid configuration key bogus"},
		{alt(ops(setQuota("request_percentage", 50)), qpart(client, sp("a"))), "Quota request_percentage is not supported"},
		{alt(ops(setQuota("controller_mutation_rate", 5)), qpart(user, nil)), "Quota controller_mutation_rate is not supported"},
		// One bad op spoils the entity's good ones.
		{alt(ops(setQuota("producer_byte_rate", 100), setQuota("bogus", 1)), qpart(user, sp("spoiled"))), "Invalid configuration key bogus"},
	}
	for i, r := range alter(false, func() []*adminv1.ClientQuotaAlteration {
		var out []*adminv1.ClientQuotaAlteration
		for _, r := range refused {
			out = append(out, r.a)
		}
		return out
	}()...) {
		if kerr.Code(r.GetErrorCode()) != kerr.InvalidRequest || !strings.Contains(r.GetErrorMessage(), refused[i].want) {
			t.Errorf("alteration %d: %v %q, want INVALID_REQUEST %q", i, r.GetErrorCode(), r.GetErrorMessage(), refused[i].want)
		}
	}

	good := []*adminv1.ClientQuotaAlteration{
		alt(ops(setQuota("producer_byte_rate", 1024), setQuota("consumer_byte_rate", 2048)), qpart(user, sp("alice")), qpart(client, sp("app"))),
		alt(ops(setQuota("producer_byte_rate", 4096)), qpart(user, sp("alice"))),
		alt(ops(setQuota("producer_byte_rate", 8192)), qpart(client, nil)),
		alt(ops(setQuota("consumer_byte_rate", 1e6)), qpart(user, nil), qpart(client, nil)),
		alt(ops(setQuota("producer_byte_rate", 7)), qpart(user, sp("<default>"))), // a user so named, not the default
	}
	for i, r := range alter(true, good...) {
		if r.GetErrorCode() != 0 {
			t.Fatalf("validate_only alteration %d: %v %s", i, r.GetErrorCode(), r.GetErrorMessage())
		}
	}
	if stored, _, err := c.store.ClientQuotas(ctx(t)); err != nil || len(stored) != 0 {
		t.Fatalf("validate_only stored %+v (%v)", stored, err)
	}
	for i, r := range alter(false, good...) {
		if r.GetErrorCode() != 0 {
			t.Fatalf("alteration %d: %v %s", i, r.GetErrorCode(), r.GetErrorMessage())
		}
	}
	stored, _, err := c.store.ClientQuotas(ctx(t))
	if err != nil || len(stored) != 5 {
		t.Fatalf("stored %+v (%v), want 5 entities", stored, err)
	}

	describe := func(strict bool, comps ...*adminv1.ClientQuotaFilterComponent) *adminv1.DescribeClientQuotasResponse {
		t.Helper()
		resp, err := c.admin(c1).DescribeClientQuotas(ctx(t), &adminv1.DescribeClientQuotasRequest{Components: comps, Strict: strict})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	comp := func(typ, match string, name *string) *adminv1.ClientQuotaFilterComponent {
		return &adminv1.ClientQuotaFilterComponent{EntityType: typ, MatchType: match, Match: name}
	}
	count := []struct {
		name   string
		strict bool
		comps  []*adminv1.ClientQuotaFilterComponent
		n      int
	}{
		{"everything", false, nil, 5},
		{"user alice", false, []*adminv1.ClientQuotaFilterComponent{comp(user, "EXACT", sp("alice"))}, 2},
		{"user alice strictly", true, []*adminv1.ClientQuotaFilterComponent{comp(user, "EXACT", sp("alice"))}, 1},
		{"any user", false, []*adminv1.ClientQuotaFilterComponent{comp(user, "SPECIFIED", nil)}, 4},
		{"default user", false, []*adminv1.ClientQuotaFilterComponent{comp(user, "DEFAULT", nil)}, 1},
		{"default client strictly", true, []*adminv1.ClientQuotaFilterComponent{comp(client, "DEFAULT", nil)}, 1},
		{"the user named <default>", false, []*adminv1.ClientQuotaFilterComponent{comp(user, "EXACT", sp("<default>"))}, 1},
		{"ip", false, []*adminv1.ClientQuotaFilterComponent{comp("ip", "SPECIFIED", nil)}, 0},
	}
	for _, tc := range count {
		if r := describe(tc.strict, tc.comps...); r.GetErrorCode() != 0 || len(r.GetEntries()) != tc.n {
			t.Errorf("%s: %v %s, %d entries, want %d: %v", tc.name, r.GetErrorCode(), r.GetErrorMessage(), len(r.GetEntries()), tc.n, r.GetEntries())
		}
	}
	r := describe(true, comp(user, "EXACT", sp("alice")), comp(client, "EXACT", sp("app")))
	if len(r.GetEntries()) != 1 || r.GetEntries()[0].GetValues()["producer_byte_rate"] != 1024 || r.GetEntries()[0].GetValues()["consumer_byte_rate"] != 2048 {
		t.Fatalf("alice/app: %v", r.GetEntries())
	}
	badFilters := []struct {
		comps []*adminv1.ClientQuotaFilterComponent
		code  kerr.Code
		want  string
	}{
		{[]*adminv1.ClientQuotaFilterComponent{comp(user, "EXACT", nil)}, kerr.InvalidRequest, "MATCH_TYPE_EXACT, but set match string to null"},
		{[]*adminv1.ClientQuotaFilterComponent{comp(user, "DEFAULT", sp("x"))}, kerr.InvalidRequest, "MATCH_TYPE_DEFAULT, but also specified a match string"},
		{[]*adminv1.ClientQuotaFilterComponent{comp(user, "SPECIFIED", nil), comp(user, "DEFAULT", nil)}, kerr.InvalidRequest, "Entity type user cannot appear more than once"},
		{[]*adminv1.ClientQuotaFilterComponent{comp("group", "SPECIFIED", nil)}, kerr.UnsupportedVersion, "Unsupported entity type group"},
		{[]*adminv1.ClientQuotaFilterComponent{comp("ip", "SPECIFIED", nil), comp(user, "SPECIFIED", nil)}, kerr.InvalidRequest, "IP filter component should not be used"},
		{[]*adminv1.ClientQuotaFilterComponent{comp(user, "7", nil)}, kerr.InvalidRequest, "Unknown match type 7"},
	}
	for i, bf := range badFilters {
		if r := describe(false, bf.comps...); kerr.Code(r.GetErrorCode()) != bf.code || !strings.Contains(r.GetErrorMessage(), bf.want) {
			t.Errorf("filter %d: %v %q, want %v %q", i, r.GetErrorCode(), r.GetErrorMessage(), bf.code, bf.want)
		}
	}

	// Removing every key removes the entity; removing an absent key is fine.
	for _, r := range alter(false, alt([]*adminv1.ClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "bogus", Remove: true}}, qpart(user, sp("alice")))) {
		if r.GetErrorCode() != 0 {
			t.Fatalf("remove: %v %s", r.GetErrorCode(), r.GetErrorMessage())
		}
	}
	if r := describe(true, comp(user, "EXACT", sp("alice"))); len(r.GetEntries()) != 0 {
		t.Fatalf("user alice after removing its only key: %v", r.GetEntries())
	}

	// The entities live in etcd: the next controller has them, and writes.
	c1.kill()
	c.waitActive(c2, ctrlTTL+5*time.Second)
	admin = c.admin(c2)
	resp, err := admin.DescribeClientQuotas(ctx(t), &adminv1.DescribeClientQuotasRequest{})
	if err != nil || len(resp.GetEntries()) != 4 {
		t.Fatalf("after failover: %v (%v), want 4 entities", resp.GetEntries(), err)
	}
	for _, r := range alter(false, alt(ops(setQuota("producer_byte_rate", 1)), qpart(client, sp("late")))) {
		if r.GetErrorCode() != 0 {
			t.Fatalf("alter after failover: %v %s", r.GetErrorCode(), r.GetErrorMessage())
		}
	}
	stored, _, err = c.store.ClientQuotas(ctx(t))
	found := false
	for _, q := range stored {
		found = found || q.Entity == (metastore.QuotaEntity{ClientID: "late"})
	}
	if err != nil || !found {
		t.Fatalf("the new controller's write is not in etcd: %+v %v", stored, err)
	}
}
