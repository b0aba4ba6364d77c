package cli_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/testenv"
)

// Right after a partition's leader is killed and restarted, `tidemark
// produce` bootstrapping from it alone succeeds: until the controller has
// sent the restarted broker the cluster's state, it answers metadata with
// a retriable error (not UNKNOWN_TOPIC_OR_PARTITION), and the CLI retries.
func TestProduceBootstrappingFromARestartedBroker(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.CreateTopic("restart", 1, 3, nil)
	leader := c.Partition("restart", 0).GetLeader()
	addr := c.BrokerConfig(leader).Listen
	c.CrashBroker(leader)
	// The new incarnation serves at once but registers only once the old
	// one's lease is gone (up to the 2 s session timeout): no metadata
	// from the controller until then.
	started := make(chan struct{})
	go func() { defer close(started); c.StartBroker(leader) }()
	defer func() { <-started }()

	dial, err := pki.Options(c.PKIDir, "admin").DialOption()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bc := brokerv1.NewBrokerServiceClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := bc.Metadata(ctx, &brokerv1.MetadataRequest{Topics: []string{"restart"}})
		cancel()
		if err == nil || kerr.FromStatus(err).Code != kerr.NetworkException && kerr.FromStatus(err).Code != kerr.RequestTimedOut {
			// Serving: without its metadata yet, unless the window closed.
			if err == nil && len(resp.GetTopics()) == 1 && resp.GetTopics()[0].GetErrorCode() == 0 {
				t.Logf("broker %d already had its metadata when first asked", leader)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d did not come back: %v", leader, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := runCLI(t, "after-restart\n", append([]string{"produce", "--topic", "restart", "--bootstrap-server", addr}, c.flags[2:]...)...)
	if r.code != 0 {
		t.Fatalf("produce bootstrapping from the restarted broker %d: exit %d\n%s%s", leader, r.code, r.out, r.err)
	}
	t.Logf("produce took %v", r.took)
}
