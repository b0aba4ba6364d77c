package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tidemark.io/tools/internal/cli"
)

// The kafka-reassign-partitions flow on a mutual TLS cluster: decommission
// a broker of an RF 2 topic, generate a plan, raise the replication factor
// to 3 by executing a plan with a throttle, verify until done (which clears
// the throttles), list, then add partitions.
func TestReassignFlow(t *testing.T) {
	c := startCluster(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c.run(t, "", "topics", "create", "--topic", "rf", "--replica-assignment", "1:2").ok(t)

	r := c.run(t, "", "brokers", "decommission", "--broker", "2", "--wait").ok(t)
	contains(t, r.out, `"partitions":[{"topic":"rf","partition":0,"replicas":[1,3]}]`, "Broker 2 holds no replica; it can be stopped.")
	contains(t, c.run(t, "", "topics", "describe", "--topic", "rf").ok(t).out, "Replicas: 1,3\t")

	topics := write("topics.json", `{"version":1,"topics":[{"topic":"rf"}]}`)
	r = c.run(t, "", "reassign", "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2,3").ok(t)
	contains(t, r.out, "Current partition replica assignment\n{\"version\":1,\"partitions\":[{\"topic\":\"rf\",\"partition\":0,\"replicas\":[1,3]}]}",
		"Proposed partition reassignment configuration\n")
	var proposed struct {
		Partitions []struct{ Replicas []int32 } `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.out[strings.LastIndex(r.out, "\n{"):])), &proposed); err != nil ||
		len(proposed.Partitions) != 1 || len(proposed.Partitions[0].Replicas) != 2 {
		t.Fatalf("proposal %q: %v", r.out, err)
	}

	plan := write("plan.json", `{"version":1,"partitions":[{"topic":"rf","partition":0,"replicas":[3,1,2]}]}`)
	r = c.run(t, "", "reassign", "--execute", "--reassignment-json-file", plan, "--throttle", "50000000").ok(t)
	contains(t, r.out, `{"version":1,"partitions":[{"topic":"rf","partition":0,"replicas":[1,3]}]}`,
		"The inter-broker throttle limit was set to 50000000 B/s on brokers 1,2,3",
		"Successfully started partition reassignments for rf-0")
	r = c.until(t, "the move to finish", func(r result) bool { return strings.Contains(r.out, "is completed") },
		"reassign", "--verify", "--reassignment-json-file", plan)
	contains(t, r.out, "Reassignment of partition rf-0 is completed.", "Clearing broker-level throttles on brokers 1,2,3",
		"Clearing topic-level throttles on topics rf")
	contains(t, c.run(t, "", "topics", "describe", "--topic", "rf").ok(t).out, "ReplicationFactor: 3", "Replicas: 3,1,2\t")
	if out := c.run(t, "", "topics", "describe-config", "--topic", "rf").ok(t).out; strings.Contains(out, "throttled.replicas=0") {
		t.Errorf("throttles left behind:\n%s", out)
	}
	contains(t, c.run(t, "", "reassign", "--list").ok(t).out, "No partition reassignments found.")
	c.run(t, "", "reassign", "--cancel", "--reassignment-json-file", plan).fails(t, cli.ExitFailed, "NO_REASSIGNMENT_IN_PROGRESS")
	c.run(t, "", "reassign", "--execute").fails(t, cli.ExitUsage, "--reassignment-json-file is required")
	c.run(t, "", "reassign", "--verify", "--execute").fails(t, cli.ExitUsage, "exactly one of")

	r = c.run(t, "", "topics", "alter", "--topic", "rf", "--partitions", "3").ok(t)
	contains(t, r.out, "Topic rf now has 3 partitions", "partition 1: replicas ", "partition 2: replicas ")
	c.run(t, "", "topics", "alter", "--topic", "rf", "--partitions", "2").fails(t, cli.ExitFailed, "INVALID_PARTITIONS")
	c.run(t, "", "brokers", "decommission", "--broker", "3").fails(t, cli.ExitFailed, "INVALID_REPLICA_ASSIGNMENT")
}
