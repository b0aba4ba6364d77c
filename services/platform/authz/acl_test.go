package authz

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/identity"
)

const sampleACL = `
# orders team
allow User:alice Write Topic:orders-*
allow User:alice Read  Topic:orders-*   # and reads them back
deny  User:alice Write Topic:orders-frozen
allow User:*     Describe Cluster:*
allow User:bob   All Topic:scratch
deny  User:bob   Read Topic:scratch
allow User:ops   AlterConfigs Topic:*
allow User:broker-9 Read Topic:audit
`

func mustParse(t *testing.T, s string) *ACL {
	t.Helper()
	acl, err := Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return acl
}

func TestACLDecisions(t *testing.T) {
	acl := mustParse(t, sampleACL)
	alice, bob, ops := identity.Parse("alice"), identity.Parse("bob"), identity.Parse("ops")
	broker9, gateway := identity.Parse("broker-9"), identity.Parse("gateway")
	for _, c := range []struct {
		why  string
		p    identity.Principal
		op   Operation
		res  Resource
		want bool
	}{
		{"prefix allow", alice, Write, TopicNamed("orders-1"), true},
		{"prefix does not match other names", alice, Write, TopicNamed("other"), false},
		{"prefix is a prefix, not a substring", alice, Write, TopicNamed("my-orders-1"), false},
		{"deny wins over a matching allow", alice, Write, TopicNamed("orders-frozen"), false},
		{"deny of Write leaves Read", alice, Read, TopicNamed("orders-frozen"), true},
		{"Write implies Describe", alice, Describe, TopicNamed("orders-2"), true},
		{"no rule for Delete", alice, Delete, TopicNamed("orders-1"), false},
		{"User:* matches users", bob, Describe, TheCluster, true},
		{"All covers Write", bob, Write, TopicNamed("scratch"), true},
		{"deny Read beats All", bob, Read, TopicNamed("scratch"), false},
		{"AlterConfigs implies DescribeConfigs", ops, DescribeConfigs, TopicNamed("any"), true},
		{"AlterConfigs does not imply Alter", ops, Alter, TopicNamed("any"), false},
		{"User:* does not give a broker user powers", broker9, Describe, TheCluster, false},
		{"User:* does not give the gateway user powers", gateway, Describe, TheCluster, false},
		{"a cluster role named literally gets what it is granted", broker9, Read, TopicNamed("audit"), true},
		{"anonymous matches nothing", identity.Anon, Describe, TheCluster, false},
	} {
		if got := acl.Allows(c.p, c.op, c.res); got != c.want {
			t.Errorf("%s: %s %s %s = %v, want %v", c.why, c.p, c.op, c.res, got, c.want)
		}
	}
	if !acl.AllowsAny(alice, Write, Topic) || acl.AllowsAny(ops, Write, Topic) {
		t.Errorf("AllowsAny(Write, Topic): alice has a Write rule, ops has none")
	}
	var none *ACL
	if none.Allows(alice, Describe, TheCluster) {
		t.Errorf("no ACL allowed something: allow.everyone.if.no.acl.found must be false")
	}
}

func TestACLParseErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"allow User:a Read", "line 1: want 4 or 5 fields"},
		{"# ok\n\npermit User:a Read Topic:x", `line 3: "permit": want allow or deny`},
		{"allow alice Read Topic:x", `line 1: principal "alice": want User:NAME or User:*`},
		{"allow User:ali* Read Topic:x", `line 1: principal "User:ali*": '*' stands alone`},
		{"allow User:a Wrte Topic:x", `line 1: unknown operation "Wrte" (want one of Read, Write, Create, Delete, Alter, Describe, AlterConfigs, DescribeConfigs, IdempotentWrite, InjectFault, All)`},
		{"allow User:a Read Cluster", "line 1: operation Read does not apply to Cluster resources"},
		{"allow User:a InjectFault Topic:x", "line 1: operation InjectFault does not apply to Topic resources"},
		{"allow User:a Read Topic:a*b", `line 1: resource "Topic:a*b": '*' may only end a prefix`},
		{"allow User:a Read Topic:", `line 1: resource "Topic:": want Topic:NAME`},
		{"allow User:a Read Widget:g", `line 1: resource "Widget:g": want Topic:..., Group:... or Cluster`},
		{"allow User:a Write Group:g", "line 1: operation Write does not apply to Group resources"},
		{"allow User:a Read Group:", `line 1: resource "Group:": want Group:NAME`},
		{"allow User:a Alter Cluster:prod", `line 1: resource "Cluster:prod": the cluster is Cluster, Cluster:* or Cluster:cluster`},
	} {
		_, err := Parse(strings.NewReader(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.text, err, c.want)
		}
	}
}

func TestACLFileIsReloadedWhenItChangesAndABadEditIsIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("allow User:alice Read Topic:a\n")
	a, err := New(Options{Config: Config{ACLFile: path}, TLS: true, ReloadEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	alice := identity.Parse("alice")
	if !a.acl().Allows(alice, Read, TopicNamed("a")) || a.acl().Allows(alice, Read, TopicNamed("b")) {
		t.Fatal("first load: want Read on a only")
	}
	write("allow User:alice Read Topic:b   # moved\n")
	if a.acl().Allows(alice, Read, TopicNamed("a")) || !a.acl().Allows(alice, Read, TopicNamed("b")) {
		t.Fatal("after the edit: want Read on b only")
	}
	write("allow User:alice Read Topic:b\nallow User:alice Reed Topic:c\n")
	if !a.acl().Allows(alice, Read, TopicNamed("b")) || a.acl().Allows(alice, Read, TopicNamed("c")) {
		t.Fatal("a broken edit must leave the rules in force")
	}

	// A broken file at start is an error naming file and line.
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("allow User:a Read Topic:x\ndeny User:b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Config: Config{ACLFile: bad}, TLS: true})
	if err == nil || !strings.Contains(err.Error(), "--acl.file "+bad+": line 2: want 4 or 5 fields") {
		t.Fatalf("bad file at start: %v", err)
	}
	_, err = New(Options{Config: Config{ACLFile: filepath.Join(t.TempDir(), "missing")}, TLS: true})
	if err == nil || !strings.Contains(err.Error(), "--acl.file") || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("missing file at start: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func TestSuperUsersFlag(t *testing.T) {
	c := DefaultConfig()
	if len(c.SuperUsers) != 1 || c.SuperUsers[0] != "User:admin" {
		t.Fatalf("default super users %v, want [User:admin]", c.SuperUsers)
	}
	for _, bad := range []string{"admin", "User:", "User:*"} {
		c := Config{SuperUsers: []string{bad}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "super.users") {
			t.Errorf("super user %q: %v, want an error naming --super.users", bad, err)
		}
	}
}

func TestSuperUsersFlagTakesKafkasSeparator(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--super.users=User:root; User:ops,User:sre", "--acl.file=/etc/tidemark/acl"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.SuperUsers, "|"); got != "User:root|User:ops|User:sre" || c.ACLFile != "/etc/tidemark/acl" {
		t.Fatalf("super users %q, acl file %q", got, c.ACLFile)
	}
}

func TestDenialLogsAreRateLimitedPerPrincipalAndMethod(t *testing.T) {
	l := newDenialLog(time.Hour)
	if _, ok := l.should("User:a /m"); !ok {
		t.Fatal("first denial not logged")
	}
	for range 3 {
		if _, ok := l.should("User:a /m"); ok {
			t.Fatal("repeated denial logged within the interval")
		}
	}
	if _, ok := l.should("User:b /m"); !ok {
		t.Fatal("another principal's first denial not logged")
	}
	l.every = 0 // the interval has passed
	if n, ok := l.should("User:a /m"); !ok || n != 3 {
		t.Fatalf("after the interval: logged=%v suppressed=%d, want true and 3", ok, n)
	}
}
