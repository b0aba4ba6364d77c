package cli_test

import (
	"testing"
	"time"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/testenv"
)

// A topic created a moment ago reaches each broker with the controller's
// next UpdateMetadata. Produce through a broker that has not had it yet
// waits for it (a typo still fails: TestResetOffsetsUnknownTopicFailsFast)
// instead of answering "does not exist" for a topic the create just
// confirmed.
func TestProduceRightAfterCreateWaitsForTheBrokersMetadata(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	ctrl, _ := c.ActiveController()
	// Broker 1 hosts no replica of the topic, so the create waits for
	// none of its answers; it hears of the topic 1 s late.
	c.Net.Delay(clustertest.ControllerName(ctrl), clustertest.BrokerName(1), time.Second)
	defer c.Net.Delay(clustertest.ControllerName(ctrl), clustertest.BrokerName(1), 0)
	c.run(t, "", "topics", "create", "--topic", "fresh", "--replica-assignment", "2:3").ok(t)

	admin := pki.Options(c.PKIDir, "admin")
	r := runCLI(t, "one\n", "produce", "--topic", "fresh", "--bootstrap-server", c.BrokerConfig(1).Listen,
		"--tls.ca", admin.CA, "--tls.cert", admin.Cert, "--tls.key", admin.Key)
	r.ok(t)
}
