package cli_test

import (
	"strings"
	"testing"

	"tidemark.io/services/platform/testenv"
)

// With --acks 0 no broker acknowledges anything, and the summary must not
// say it did.
func TestProduceAcksZeroClaimsNoAcknowledgement(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "topics", "create", "--topic", "fire", "--partitions", "1", "--replication-factor", "3").ok(t)
	r := c.run(t, "a\nb\n", "produce", "--topic", "fire", "--acks", "0").ok(t)
	contains(t, r.err, "2 records sent to fire: 2 written without acknowledgement (--acks 0), 0 failed")
	if strings.Contains(r.err, "acknowledged") {
		t.Fatalf("--acks 0 summary claims acknowledgements: %q", r.err)
	}
	r = c.run(t, "a\nb\n", "produce", "--topic", "fire", "--acks", "1").ok(t)
	contains(t, r.err, "2 records sent to fire: 2 acknowledged, 0 failed")
}
