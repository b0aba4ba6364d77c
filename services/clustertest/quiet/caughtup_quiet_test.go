package quiet

import (
	"context"
	"testing"
	"time"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
)

// A leader dates each follower's last catch-up (the ISR rule's clock) and
// reports its age on /metrics and to the controller (the console's
// "caught up … ago"). A follower that has not caught up since this leader
// took over, such as one that was down across the election, has no such
// time: Kafka's rule keeps it at zero, and the age reported from it was
// the time since 1970 (about 1.8e9 seconds). It is reported from when the
// leader began to track the follower, a lower bound that grows while the
// follower stays away.
func TestAFollowerNeverCaughtUpWithItsLeaderReportsAnAgeSinceTheElection(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Adjust: func(cfg *broker.Config) { cfg.Telemetry.MetricsListen = "127.0.0.1:0" }})
	clustertest.CreateAssigned(t, c, "away", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	if _, err := c.Produce(context.Background(), "away", 0, -1, "v"); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	c.CrashBroker(1)
	c.WaitFor(10*time.Second, "broker 2 to lead", func() bool {
		return c.Partition("away", 0).GetLeader() == 2 && c.Leads(2, "away", 0)
	})
	age := func(follower string) float64 {
		return c.Metric(2, `tidemark_broker_follower_last_caught_up_seconds{follower="`+follower+`",partition="0",topic="away"}`)
	}
	time.Sleep(300 * time.Millisecond) // quiet: nothing produced
	bound := time.Since(started).Seconds()
	if a := age("1"); a <= 0 || a > bound {
		t.Fatalf("the new leader reports broker 1, down since before the election, last caught up %v s ago; want more than 0 and at most the %.1f s since it was stopped", a, bound)
	}
	if a := age("3"); a < 0 || a > bound {
		t.Fatalf("the new leader reports broker 3, in the ISR, last caught up %v s ago; want at most %.1f s", a, bound)
	}
	for _, v := range c.Broker(2).Replicas().Replicas() {
		for _, f := range v.Snapshot(time.Now()).Followers {
			if f.CaughtUpAgeMs < 0 || float64(f.CaughtUpAgeMs)/1000 > time.Since(started).Seconds() {
				t.Fatalf("broker 2's snapshot: follower %d caught up %d ms ago (reported to the controller and the console)", f.ID, f.CaughtUpAgeMs)
			}
		}
	}
	// Back and caught up, it reports a fresh age again.
	c.StartBroker(1)
	c.WaitFor(20*time.Second, "broker 1 back in the ISR", func() bool { return len(c.Partition("away", 0).GetIsr()) == 3 })
	c.WaitFor(5*time.Second, "broker 1 reported caught up", func() bool { return age("1") < 1 })
}
