package cli_test

import (
	"testing"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// brokers decommission of an id that is neither a registered broker nor
// in any replica list fails: "holds no replica" would tell the operator a
// mistyped broker is safe to stop.
func TestDecommissionUnknownBroker(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "3", "--replication-factor", "3").ok(t)
	r := c.run(t, "", "brokers", "decommission", "--broker", "9")
	r.fails(t, cli.ExitFailed, "broker 9 is not in the cluster")
}
