package cli_test

import (
	"strings"
	"testing"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// records delete moves the partition's log start and prints the low
// watermark: a consume from the beginning then starts there. An offset
// beyond the high watermark fails with OFFSET_OUT_OF_RANGE, and -1 deletes
// up to the high watermark.
func TestRecordsDeletePrintsLowWatermark(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "1", "--replication-factor", "3").ok(t)
	c.run(t, "a\nb\nc\nd\n", "produce", "--topic", "orders", "--partition", "0", "--acks", "all").ok(t)

	r := c.run(t, "", "records", "delete", "--topic", "orders", "--partition", "0", "--offset", "2").ok(t)
	contains(t, r.out, "partition: orders-0\tlow_watermark: 2\n")
	r = c.run(t, "", "consume", "--topic", "orders", "--partition", "0", "--from-beginning", "--print-offset").ok(t)
	contains(t, r.out, "Offset:2\tc", "Offset:3\td")
	if strings.Contains(r.out, "Offset:0\t") || strings.Contains(r.out, "Offset:1\t") {
		t.Fatalf("consume from the beginning after deleting below 2 read a deleted record:\n%s", r.out)
	}

	c.run(t, "", "records", "delete", "--topic", "orders", "--partition", "0", "--offset", "9").
		fails(t, cli.ExitFailed, "OFFSET_OUT_OF_RANGE")
	r = c.run(t, "", "records", "delete", "--topic", "orders", "--partition", "0", "--offset", "-1").ok(t)
	contains(t, r.out, "low_watermark: 4\n")
	c.run(t, "", "records", "delete", "--topic", "nosuch", "--partition", "0", "--offset", "0").
		fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
}
