package cli_test

import (
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// groups reset-offsets checks each --topic first, as produce and consume
// do, so a topic that does not exist fails at once rather than after the
// client's retries fill --command-timeout.
func TestResetOffsetsUnknownTopicFailsFast(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "1", "--replication-factor", "3").ok(t)
	r := c.run(t, "", "groups", "reset-offsets", "--group", "billing", "--topic", "ghost", "--to-earliest")
	r.fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
	if r.took > 5*time.Second {
		t.Fatalf("reset-offsets of an unknown topic took %v to fail:\n%s", r.took.Round(time.Millisecond), r.err)
	}
}

// groups reset-offsets --topic orders:9 on a 1-partition topic names a
// partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION, not a wait
// for a leader.
func TestResetOffsetsUnknownPartitionNamed(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "1", "--replication-factor", "3").ok(t)
	r := c.run(t, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders:0,9", "--to-earliest")
	r.fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
	contains(t, r.err, "no partition 9")
	c.run(t, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders:0", "--to-earliest").ok(t)
}

// groups describe of a group the coordinator knows nothing of fails with
// Kafka's "Consumer group 'ghost' does not exist." in every view; a group
// with committed offsets and no members still describes.
func TestGroupsDescribeUnknownGroup(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	for _, view := range [][]string{nil, {"--members"}, {"--state"}} {
		r := c.run(t, "", append([]string{"groups", "describe", "ghost"}, view...)...)
		r.fails(t, cli.ExitFailed, "GROUP_ID_NOT_FOUND")
		contains(t, r.err, "Consumer group 'ghost' does not exist.")
	}

	c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "1", "--replication-factor", "3").ok(t)
	c.run(t, "", "groups", "reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest", "--execute").ok(t)
	r := c.run(t, "", "groups", "describe", "billing").ok(t)
	contains(t, r.out, "has no active members", "billing  orders")
	r = c.run(t, "", "groups", "describe", "billing", "--state").ok(t)
	if !strings.Contains(r.out, "Empty") {
		t.Fatalf("describe --state of a group with offsets only:\n%s", r.out)
	}
}
