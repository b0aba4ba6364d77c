package cli_test

import (
	"strings"
	"testing"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// tidemark acls add, list and remove manage the bindings in etcd through
// the active controller, and print them as kafka-acls does.
func TestACLsAddListRemove(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startClusterWith(t, clustertest.Options{})
	out := c.run(t, "", "acls", "add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe",
		"--topic", "orders-", "--resource-pattern-type", "prefixed").ok(t).out
	for _, want := range []string{
		"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)`:",
		"\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)",
		"\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("acls add printed:\n%s\nwant a line %q", out, want)
		}
	}
	c.run(t, "", "acls", "add", "--deny-principal", "User:bob", "--operation", "Read", "--group", "g", "--host", "10.0.0.1").ok(t)
	c.run(t, "", "acls", "add", "--allow-principal", "bob", "--operation", "Read", "--group", "g").fails(t, cli.ExitFailed, "expected a string in format principalType:principalName but got bob")

	out = c.run(t, "", "acls", "list", "--topic", "orders-1", "--resource-pattern-type", "match").ok(t).out
	if !strings.Contains(out, "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)`:") || strings.Contains(out, "GROUP") {
		t.Errorf("acls list matching orders-1:\n%s", out)
	}
	out = c.run(t, "", "acls", "list").ok(t).out
	if !strings.Contains(out, "\t(principal=User:bob, host=10.0.0.1, operation=READ, permissionType=DENY)") {
		t.Errorf("acls list:\n%s", out)
	}
	out = c.run(t, "", "acls", "remove", "--allow-principal", "User:alice", "--topic", "orders-", "--resource-pattern-type", "prefixed").ok(t).out
	if strings.Count(out, "principal=User:alice") != 2 {
		t.Errorf("acls remove printed:\n%s", out)
	}
	if out = c.run(t, "", "acls", "list").ok(t).out; strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Errorf("after the remove:\n%s", out)
	}
}
