package clustertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// Unclean leader election with real brokers. A follower is cut off and
// leaves the ISR while acknowledged writes continue; then every ISR member
// dies. With unclean.leader.election.enable off the partition stays offline
// and, once an ISR member returns, nothing acknowledged is missing. Turned on
// at run time, the out-of-sync replica leads at once with only what it had:
// the acknowledged records it missed are gone.
func TestUncleanElectionOffThenOn(t *testing.T) {
	c := Start(t, Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("u", 1, 3, map[string]string{"min.insync.replicas": "1"})
	pd := c.Partition("u", 0)
	reps := pd.GetReplicas()
	leader, other, lagging := reps[0], reps[1], reps[2]
	ctx := context.Background()
	if _, err := c.Produce(ctx, "u", 0, -1, "a0"); err != nil {
		t.Fatal(err)
	}
	c.SameLogs("u", 0, reps...)
	c.Net.Partition(BrokerName(leader), BrokerName(lagging))
	var acked []string
	for i := 1; i <= 5; i++ {
		v := fmt.Sprintf("a%d", i)
		if _, err := c.Produce(ctx, "u", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		acked = append(acked, v)
	}
	c.WaitFor(10*time.Second, "the cut-off follower to leave the ISR", func() bool {
		return !slices.Contains(c.Partition("u", 0).GetIsr(), lagging)
	})

	// Every ISR member dies; only the out-of-sync replica is alive.
	c.CrashBroker(leader)
	c.CrashBroker(other)
	c.Net.HealAll()
	c.WaitFor(10*time.Second, "the partition to go offline", func() bool {
		return c.Partition("u", 0).GetLeader() == -1
	})
	time.Sleep(500 * time.Millisecond)
	if pd := c.Partition("u", 0); pd.GetLeader() != -1 || slices.Contains(pd.GetIsr(), lagging) || len(pd.GetIsr()) == 0 {
		t.Fatalf("unclean election off: leader %d isr %v; want offline, ISR kept without %d", pd.GetLeader(), pd.GetIsr(), lagging)
	}

	// Case "off", continued: the ISR member the controller kept (F19: it
	// never empties the ISR) returns and leads with every acknowledged record.
	kept := c.Partition("u", 0).GetIsr()[0]
	c.StartBroker(kept)
	c.WaitFor(15*time.Second, "the returning ISR member to lead", func() bool {
		return c.Partition("u", 0).GetLeader() == kept && c.Leads(kept, "u", 0)
	})
	if got := c.Values(kept, "u", 0); !slices.Equal(got, append([]string{"a0"}, acked...)) {
		t.Fatalf("returning ISR member's log %v lost acknowledged records", got)
	}

	// Case "on": kill it again and allow unclean elections at run time.
	c.CrashBroker(kept)
	c.WaitFor(10*time.Second, "offline again", func() bool { return c.Partition("u", 0).GetLeader() == -1 })
	resp, err := c.Admin().AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "u"},
		Ops:      []*adminv1.ConfigOp{{Name: "unclean.leader.election.enable", Value: "true", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}},
	}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter config: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "the out-of-sync replica to be elected", func() bool {
		return c.Partition("u", 0).GetLeader() == lagging && c.Leads(lagging, "u", 0)
	})
	if isr := c.Partition("u", 0).GetIsr(); !slices.Equal(isr, []int32{lagging}) {
		t.Fatalf("ISR after unclean election %v, want [%d]", isr, lagging)
	}
	if got := c.Values(lagging, "u", 0); !slices.Equal(got, []string{"a0"}) {
		t.Fatalf("unclean leader's log %v, want just what it had: [a0]", got)
	}
	if _, err := c.Produce(ctx, "u", 0, -1, "after-unclean"); err != nil {
		t.Fatalf("produce to the unclean leader: %v", err)
	}
}
