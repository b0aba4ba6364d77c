package cli_test

import (
	"testing"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// quotas alter and describe: the client quota entities every broker
// throttles by, kept by the controller.
func TestCLIQuotas(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "quotas", "alter", "--user", "alice", "--client-id", "app", "--add", "producer_byte_rate=1024,consumer_byte_rate=2048").ok(t)
	c.run(t, "", "quotas", "alter", "--client-id-default", "--add", "producer_byte_rate=500").ok(t)
	c.run(t, "", "quotas", "alter", "--user-default", "--add", "consumer_byte_rate=100", "--validate-only").ok(t)
	r := c.run(t, "", "quotas", "describe").ok(t)
	if want := "USER   CLIENT-ID  QUOTAS\n-      <default>  producer_byte_rate=500\nalice  app        consumer_byte_rate=2048,producer_byte_rate=1024\n"; r.out != want {
		t.Fatalf("describe:\n%s\nwant\n%s", r.out, want)
	}
	c.run(t, "", "quotas", "alter", "--client-id", "app", "--add", "request_percentage=5").fails(t, cli.ExitFailed, "request_percentage is not supported")
	c.run(t, "", "quotas", "alter", "--add", "producer_byte_rate=5").fails(t, cli.ExitUsage, "name the entity")
	c.run(t, "", "quotas", "alter", "--user", "a", "--user-default", "--add", "producer_byte_rate=5").fails(t, cli.ExitUsage, "--user-default")
	c.run(t, "", "quotas", "alter", "--user", "a", "--add", "producer_byte_rate").fails(t, cli.ExitUsage, "KEY=VALUE")
	c.run(t, "", "quotas", "alter", "--user", "alice", "--client-id", "app", "--delete", "producer_byte_rate").ok(t)
	r = c.run(t, "", "quotas", "describe", "--user", "alice", "--client-id", "app", "--strict").ok(t)
	if want := "USER   CLIENT-ID  QUOTAS\nalice  app        consumer_byte_rate=2048\n"; r.out != want {
		t.Fatalf("describe alice/app:\n%s\nwant\n%s", r.out, want)
	}
}
