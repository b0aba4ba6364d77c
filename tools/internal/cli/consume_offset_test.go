package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// consume --offset N past the partition's end fails at once, naming the
// offset, the partition and its end, with or without --follow: like Kafka's
// console consumer it never prints records from before the offset asked for.
func TestConsumeFollowOffsetPastEndDoesNotRewind(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "1", "--replication-factor", "3").ok(t)
	c.run(t, "a\nb\nc\nd\n", "produce", "--topic", "orders", "--partition", "0").ok(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r := runCtx(ctx, nil, "", append([]string{"consume", "--topic", "orders", "--partition", "0", "--offset", "100", "--follow", "--print-offset"}, c.flags...)...)
	if strings.Contains(r.out, "Offset:0\t") {
		t.Fatalf("consume --offset 100 --follow printed records from offset 0 (exit %d):\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
	}
	r.fails(t, cli.ExitFailed, "OFFSET_OUT_OF_RANGE")
	contains(t, r.err, "offset 100", "orders-0", "end offset is 4")
	c.run(t, "", "consume", "--topic", "orders", "--partition", "0", "--offset", "100").fails(t, cli.ExitFailed, "offset 100")

	// The end itself is a valid start: following waits there for new records.
	r = c.run(t, "", "consume", "--topic", "orders", "--partition", "0", "--offset", "4").ok(t)
	contains(t, r.err, "Consumed 0 records.")
}
