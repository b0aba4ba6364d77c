package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// A replica that comes back after an unclean election truncates records
// it had as committed (below its high watermark): acknowledged data is
// gone. That is the one truncation an operator must see; Kafka's fetcher
// warns "Truncating <tp> to offset X below high watermark Y"
// (AbstractFetcherThread.truncate). Here it must be logged as a warning
// naming the high watermark, not as an ordinary truncation.
func TestTruncationBelowTheHWIsAWarning(t *testing.T) {
	c := Start(t, Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("cut", 1, 3, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	reps := c.Partition("cut", 0).GetReplicas()
	leader, other, lagging := reps[0], reps[1], reps[2]
	ctx := context.Background()
	if _, err := c.Produce(ctx, "cut", 0, -1, "a0"); err != nil {
		t.Fatal(err)
	}
	c.SameLogs("cut", 0, reps...)
	c.Net.Partition(BrokerName(leader), BrokerName(lagging))
	c.Net.Partition(BrokerName(other), BrokerName(lagging))
	for i := 1; i <= 5; i++ {
		if _, err := c.Produce(ctx, "cut", 0, -1, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor(10*time.Second, "the cut-off follower out of the ISR", func() bool {
		return !slices.Contains(c.Partition("cut", 0).GetIsr(), lagging)
	})
	c.WaitHWAtLEO("cut", 0, leader, other)
	// Graceful stops: the HW checkpoint of other holds 6.
	if err := c.StopBroker(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.StopBroker(other); err != nil {
		t.Fatal(err)
	}
	c.Net.HealAll()
	c.WaitFor(15*time.Second, "the out-of-sync replica elected", func() bool {
		return c.Partition("cut", 0).GetLeader() == lagging && c.Leads(lagging, "cut", 0)
	})
	if _, err := c.Produce(ctx, "cut", 0, -1, "b1"); err != nil {
		t.Fatal(err)
	}
	logs := &LogBuf{}
	c.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c.StartBroker(other)
	deadline := time.Now().Add(15 * time.Second)
	for !slices.Equal(c.Values(other, "cut", 0), []string{"a0", "b1"}) {
		if time.Now().After(deadline) {
			pd := c.Partition("cut", 0)
			t.Fatalf("returning replica's log %v (leader's %v); partition %v; logs:\n%s", c.Values(other, "cut", 0), c.Values(lagging, "cut", 0), pd, strings.Join(logs.Lines(), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, l := range logs.Lines("Truncat") {
		t.Logf("log: %s", l)
	}
	if len(logs.Lines("level=WARN", "Truncat", "high watermark")) == 0 && len(logs.Lines("level=ERROR", "Truncat", "high watermark")) == 0 {
		t.Fatalf("broker %d truncated committed records (offsets 1-5, below its HW 6) with no warning naming the high watermark", other)
	}
}
