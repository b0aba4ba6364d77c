package authz

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

func bind(rt, name, pt, principal, host, op, perm string) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, PermissionType: perm}
}

func TestStoredBindingsAreDecidedWithTheFileRules(t *testing.T) {
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte("allow User:alice Read Topic:logs-*\nallow User:carol Write Topic:t host=10.0.0.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Config: Config{ACLFile: file, SuperUsers: []string{"User:admin"}}, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	a.SetStored(RulesOf([]Binding{
		bind("TOPIC", "orders-", "PREFIXED", "User:bob", "*", "WRITE", "ALLOW"),
		bind("TOPIC", "orders-frozen", "LITERAL", "User:bob", "*", "WRITE", "DENY"),
		bind("TOPIC", "logs-secret", "LITERAL", "User:alice", "*", "READ", "DENY"), // denies what the file allows
		bind("TOPIC", "*", "LITERAL", "User:dave", "10.0.0.7", "READ", "ALLOW"),
		bind("TOPIC", "*", "LITERAL", "User:admin", "*", "READ", "DENY"), // super users bypass ACLs
		bind("GROUP", "g", "LITERAL", "User:bob", "*", "READ", "ALLOW"),
		bind("CLUSTER", "kafka-cluster", "LITERAL", "User:bob", "*", "ALTER", "ALLOW"),
		bind("TOPIC", "", "LITERAL", "User:evil", "*", "ALL", "ALLOW"),          // no name: ignored
		bind("TOPIC", "x", "ANY", "User:evil", "*", "ALL", "ALLOW"),             // not a pattern: ignored
		bind("TOPIC", "x", "LITERAL", "evil", "*", "ALL", "ALLOW"),              // no principal type: ignored
		bind("TOPIC", "x", "LITERAL", "User:evil", "not-an-ip", "ALL", "ALLOW"), // bad host: ignored
	}, func(b Binding, err error) { bad = append(bad, b.Principal) }))
	if len(bad) != 4 {
		t.Errorf("bad bindings reported: %v, want the 4 broken ones", bad)
	}
	ctx := func(user, host string) context.Context {
		c := identity.With(context.Background(), identity.ForUser(user))
		if host != "" {
			c = WithClientHost(c, host)
		}
		return c
	}
	for _, c := range []struct {
		why        string
		user, host string
		op         Operation
		res        Resource
		want       bool
	}{
		{"stored prefixed allow", "bob", "", Write, TopicNamed("orders-1"), true},
		{"a prefix is not a substring", "bob", "", Write, TopicNamed("my-orders-1"), false},
		{"stored deny wins over stored prefixed allow", "bob", "", Write, TopicNamed("orders-frozen"), false},
		{"file allow still in force", "alice", "", Read, TopicNamed("logs-1"), true},
		{"stored deny wins over the file's allow", "alice", "", Read, TopicNamed("logs-secret"), false},
		{"host rule from its host", "dave", "10.0.0.7", Read, TopicNamed("any"), true},
		{"host rule from another host", "dave", "10.0.0.8", Read, TopicNamed("any"), false},
		{"host rule from an unknown host", "dave", "", Read, TopicNamed("any"), false},
		{"file host rule from its host", "carol", "10.0.0.9", Write, TopicNamed("t"), true},
		{"file host rule from another", "carol", "10.0.0.1", Write, TopicNamed("t"), false},
		{"super user bypasses a stored deny", "admin", "", Read, TopicNamed("x"), true},
		{"group binding", "bob", "", Read, GroupNamed("g"), true},
		{"cluster binding by Kafka's name", "bob", "", Alter, TheCluster, true},
		{"broken binding grants nothing", "evil", "", Read, TopicNamed("x"), false},
	} {
		if got := a.Allowed(ctx(c.user, c.host), c.op, c.res); got != c.want {
			t.Errorf("%s: %s %s %s from %q = %v, want %v", c.why, c.user, c.op, c.res, c.host, got, c.want)
		}
	}
	// Taking the bindings away leaves the file's rules alone.
	a.SetStored(nil)
	if a.Allowed(ctx("bob", ""), Write, TopicNamed("orders-1")) || !a.Allowed(ctx("alice", ""), Read, TopicNamed("logs-secret")) {
		t.Error("after the stored bindings are gone only the file's rules decide")
	}
}

func TestBindingValidationUsesKafkaMessages(t *testing.T) {
	ok := bind("TOPIC", "t", "LITERAL", "User:a", "*", "READ", "ALLOW")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mut  func(*Binding)
		want string
	}{
		{func(b *Binding) { b.ResourceType = "ANY" }, "Invalid resourceType ANY"},
		{func(b *Binding) { b.ResourceType = "UNKNOWN" }, "Invalid resourceType UNKNOWN"},
		{func(b *Binding) { b.ResourceType = "TRANSACTIONAL_ID" }, "Resource type TRANSACTIONAL_ID is not supported"},
		{func(b *Binding) { b.PatternType = "MATCH" }, "Invalid patternType MATCH"},
		{func(b *Binding) { b.PatternType = "ANY" }, "Invalid patternType ANY"},
		{func(b *Binding) { b.Operation = "ANY" }, "Invalid operation ANY"},
		{func(b *Binding) { b.PermissionType = "ANY" }, "Invalid permissionType ANY"},
		{func(b *Binding) { b.ResourceName = "" }, "Invalid empty resource name"},
		{func(b *Binding) { b.ResourceType, b.ResourceName = "CLUSTER", "c" }, "The only valid name for the CLUSTER resource is kafka-cluster"},
		{func(b *Binding) { b.Principal = "" }, "Invalid empty principal specified in ACL binding"},
		{func(b *Binding) { b.Principal = "alice" }, "expected a string in format principalType:principalName but got alice"},
		{func(b *Binding) { b.Host = "somewhere" }, `invalid host "somewhere"`},
		{func(b *Binding) { b.Operation = "IDEMPOTENT_WRITE" }, "Operation IDEMPOTENT_WRITE does not apply to TOPIC resources"},
	} {
		b := ok
		c.mut(&b)
		err := b.Validate()
		if kerr.CodeOf(err) != kerr.InvalidRequest || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want INVALID_REQUEST %q", b, err, c.want)
		}
	}
}

func TestFilterMatchesAsKafkaAclBindingFilter(t *testing.T) {
	lit := bind("TOPIC", "foo", "LITERAL", "User:a", "*", "READ", "ALLOW")
	wild := bind("TOPIC", "*", "LITERAL", "User:a", "*", "READ", "ALLOW")
	pre := bind("TOPIC", "fo", "PREFIXED", "User:a", "*", "READ", "ALLOW")
	other := bind("TOPIC", "bar", "PREFIXED", "User:a", "*", "READ", "ALLOW")
	grp := bind("GROUP", "foo", "LITERAL", "User:b", "10.0.0.1", "DESCRIBE", "DENY")
	all := []Binding{lit, wild, pre, other, grp}
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		why  string
		f    Filter
		want []Binding
	}{
		{"ANY everything", Filter{ResourceType: Any, PatternType: Any, Operation: Any, PermissionType: Any}, all},
		{"MATCH: literal equal, wildcard, prefixes of the name", Filter{ResourceType: "TOPIC", ResourceName: s("foo"), PatternType: Match, Operation: Any, PermissionType: Any}, []Binding{lit, wild, pre}},
		{"ANY with a name: exact names of any pattern type", Filter{ResourceType: "TOPIC", ResourceName: s("fo"), PatternType: Any, Operation: Any, PermissionType: Any}, []Binding{pre}},
		{"LITERAL with a name", Filter{ResourceType: "TOPIC", ResourceName: s("foo"), PatternType: Literal, Operation: Any, PermissionType: Any}, []Binding{lit}},
		{"PREFIXED without a name", Filter{ResourceType: Any, PatternType: Prefixed, Operation: Any, PermissionType: Any}, []Binding{pre, other}},
		{"entry fields", Filter{ResourceType: Any, PatternType: Any, Principal: s("User:b"), Host: s("10.0.0.1"), Operation: "DESCRIBE", PermissionType: "DENY"}, []Binding{grp}},
		{"host must be equal", Filter{ResourceType: Any, PatternType: Any, Host: s("*"), Operation: Any, PermissionType: "DENY"}, nil},
	} {
		var got []Binding
		for _, b := range all {
			if c.f.Matches(b) {
				got = append(got, b)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: matched %v, want %v", c.why, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: matched %v, want %v", c.why, got, c.want)
			}
		}
	}
	if err := (Filter{ResourceType: "UNKNOWN", PatternType: Any, Operation: Any, PermissionType: Any}).Validate(); kerr.CodeOf(err) != kerr.InvalidRequest {
		t.Errorf("UNKNOWN in a filter: %v", err)
	}
	if err := (Filter{ResourceType: "TOPICS", PatternType: Any, Operation: Any, PermissionType: Any}).Validate(); err == nil || kerr.As(err).Field != "resource_type" {
		t.Errorf("a misspelt resource type in a filter: %v", err)
	}
	if err := (Filter{ResourceType: "DELEGATION_TOKEN", PatternType: Match, Operation: "DESCRIBE_TOKENS", PermissionType: DenyPT}).Validate(); err != nil {
		t.Errorf("Kafka's names tidemark has nothing of, in a filter: %v", err)
	}
}

func TestACLFileRulesWithHostsAndPrefixes(t *testing.T) {
	acl := mustParse(t, "allow User:a Read Topic:p-* host=10.1.1.1\ndeny User:a Read Topic:p-x\n")
	if r := acl.Rules[0]; !r.Prefixed || r.Pattern != "p-" || r.Host != "10.1.1.1" || r.String() != "allow User:a Read Topic:p-* host=10.1.1.1" {
		t.Errorf("rule %+v (%s)", r, r)
	}
	a := identity.Parse("a")
	if !allows([]*ACL{acl}, a, "10.1.1.1", Read, TopicNamed("p-1")) || allows([]*ACL{acl}, a, "10.1.1.2", Read, TopicNamed("p-1")) ||
		allows([]*ACL{acl}, a, "10.1.1.1", Read, TopicNamed("p-x")) {
		t.Error("host and deny in a file")
	}
	if _, err := Parse(strings.NewReader("allow User:a Read Topic:t host=nowhere\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad host: %v", err)
	}
}

// While the bindings kept in etcd are not loaded, no user is allowed
// anything, not even what the file allows: a deny kept there must not be
// missed; a request waits for them, and is refused if they do not come.
// Super users are not held up.
func TestNothingIsAllowedBeforeTheStoredBindingsLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte("allow User:alice Read Topic:logs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Config: Config{ACLFile: file, SuperUsers: []string{"User:admin"}}, TLS: true, StoredBindings: true})
	if err != nil {
		t.Fatal(err)
	}
	a.storedWait = 10 * time.Millisecond
	alice := identity.With(context.Background(), identity.ForUser("alice"))
	admin := identity.With(context.Background(), identity.ForUser("admin"))
	if a.Allowed(alice, Read, TopicNamed("logs")) {
		t.Error("the file's allow decided before the stored bindings (which may deny it) were loaded")
	}
	// A request that comes while they load waits for them.
	a.storedWait = time.Minute
	decided := make(chan bool)
	go func() { decided <- a.Allowed(alice, Read, TopicNamed("logs")) }()
	a.SetStored(RulesOf([]Binding{bind("TOPIC", "logs", "LITERAL", "User:alice", "*", "READ", "DENY")}, nil))
	if <-decided {
		t.Error("a request waiting for the stored bindings was allowed past their deny")
	}
	if !a.Allowed(admin, Read, TopicNamed("logs")) {
		t.Error("a super user was held up by the stored bindings' load")
	}
	if a.Allowed(alice, Read, TopicNamed("logs")) {
		t.Error("the stored deny is not in force once loaded")
	}
	a.SetStored(RulesOf(nil, nil))
	if !a.Allowed(alice, Read, TopicNamed("logs")) {
		t.Error("the file's allow is not in force once the stored bindings (none) are loaded")
	}
}
