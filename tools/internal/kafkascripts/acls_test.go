package kafkascripts

import (
	"bytes"
	"strings"
	"testing"

	"tidemark.io/services/clustertest"
)

func runACLs(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	r, err := parseACLsFlags(args)
	if err != nil {
		code = ACLs(args, &out, &errw) // the refusal as the script prints it
		return code, out.String(), errw.String()
	}
	r.stdin = strings.NewReader(stdin)
	if err := r.run(&out); err != nil {
		errw.WriteString(err.Error())
		return 1, out.String(), errw.String()
	}
	return 0, out.String(), errw.String()
}

// kafka-acls.sh adds, lists and removes ACLs with Kafka's flags and
// Kafka's output.
func TestKafkaACLsAddListRemove(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	b := c.KafkaAddrs()[0]
	code, out, errOut := runACLs("", "--bootstrap-server", b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t")
	want := "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n" +
		" \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n"
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("--add: exit %d\n%s\n%s\nwant it to start with\n%s", code, out, errOut, want)
	}
	if !strings.Contains(out, "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n") {
		t.Errorf("--add lists the resource's ACLs after:\n%s", out)
	}
	code, out, errOut = runACLs("", "--bootstrap-server", b, "--add", "--allow-principal", "User:bob", "--producer", "--topic", "p-", "--resource-pattern-type", "prefixed")
	if code != 0 || strings.Count(out, "principal=User:bob") != 6 { // 3 being added, 3 listed
		t.Fatalf("--producer: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, op := range []string{"WRITE", "DESCRIBE", "CREATE"} {
		if !strings.Contains(out, "operation="+op) {
			t.Errorf("--producer did not grant %s:\n%s", op, out)
		}
	}
	code, out, _ = runACLs("", "--bootstrap-server", b, "--list")
	if code != 0 || !strings.Contains(out, "name=t, patternType=LITERAL") || !strings.Contains(out, "name=p-, patternType=PREFIXED") {
		t.Fatalf("--list: exit %d\n%s", code, out)
	}
	code, out, _ = runACLs("", "--bootstrap-server", b, "--list", "--topic", "p-1", "--resource-pattern-type", "match")
	if code != 0 || !strings.Contains(out, "name=p-, patternType=PREFIXED") || strings.Contains(out, "name=t,") {
		t.Fatalf("--list MATCH p-1: exit %d\n%s", code, out)
	}
	// Without --force the removal asks first; n keeps the ACLs.
	code, out, _ = runACLs("n\n", "--bootstrap-server", b, "--remove", "--topic", "t")
	if code != 0 || !strings.Contains(out, "Are you sure you want to delete all ACLs for resource filter `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)") ||
		!strings.Contains(out, "principal=User:alice") {
		t.Fatalf("--remove answered n: exit %d\n%s", code, out)
	}
	code, out, _ = runACLs("", "--bootstrap-server", b, "--remove", "--force", "--topic", "t")
	if code != 0 || strings.Contains(out, "principal=User:alice") {
		t.Fatalf("--remove --force: exit %d\n%s", code, out)
	}
	code, _, errOut = runACLs("", "--bootstrap-server", b, "--add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t")
	if code != 1 || !strings.Contains(errOut, "expected a string in format principalType:principalName but got alice") {
		t.Errorf("a principal without its type: exit %d, %q", code, errOut)
	}
	code, _, errOut = runACLs("", "--bootstrap-server", b, "--add", "--remove", "--topic", "t")
	if code != 1 || !strings.Contains(errOut, "Command must include exactly one action") {
		t.Errorf("two actions: exit %d, %q", code, errOut)
	}
}
