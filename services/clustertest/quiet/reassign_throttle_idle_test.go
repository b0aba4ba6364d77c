package quiet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tidemark.io/services/clustertest"
)

// A move under a leader replication throttle that stays on: its new
// replica is frozen part way through the copy for longer than the
// throttle's samples span, nothing is produced meanwhile, and it comes
// back. The throttle measured before the gap holds nothing back after it:
// the copy resumes and the move completes with no write to push it on,
// HW = LEO on every replica and every acknowledged write there.
func TestThrottledIdleMoveWhoseTargetWasFrozenCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a reassignment's target away for a while")
	}
	c := clustertest.Start(t, clustertest.Options{Brokers: 4, BrokerSettings: map[string]string{"replica.fetch.max.bytes": "1024",
		"replica.lag.time.max.ms": "1000", "replication.quota.window.num": "3", "replication.quota.window.size.seconds": "1"}})
	clustertest.CreateAssigned(t, c, "frozenmove", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	acked := map[int64]string{}
	for i := range 100 {
		v := fmt.Sprintf("value-%04d", i)
		off, err := c.Produce(context.Background(), "frozenmove", 0, -1, v)
		if err != nil {
			t.Fatal(err)
		}
		acked[off] = v
	}
	leader := c.Partition("frozenmove", 0).GetLeader()
	clustertest.Throttle(t, c, "frozenmove", fmt.Sprint(leader), "leader.replication.throttled.rate", "1000",
		"leader.replication.throttled.replicas", fmt.Sprintf("0:%d", leader))
	clustertest.Reassign(t, c, "frozenmove", map[int32][]int32{0: {2, 3, 4}})
	c.WaitFor(20*time.Second, "broker 4 part way through its copy", func() bool {
		_, leo, ok := c.Broker(4).ReplicaOffsets("frozenmove", 0)
		return ok && leo > 0
	})
	c.EtcdLink(4).Pause()
	c.Net.Pause(clustertest.BrokerName(4))
	time.Sleep(4 * time.Second) // quiet, longer than the 3 s of samples, its lease and the lag time
	c.Net.Resume(clustertest.BrokerName(4))
	c.EtcdLink(4).Resume()
	c.WaitFor(45*time.Second, "frozenmove-0 on 2,3,4 with the throttle on and nothing produced",
		func() bool { return clustertest.SettledOn(c, "frozenmove", 0, []int32{2, 3, 4}) })
	clustertest.CheckWholeAndLive(t, c, "frozenmove", 0, []int32{2, 3, 4}, acked)
	if _, err := c.Produce(context.Background(), "frozenmove", 0, -1, "after"); err != nil {
		t.Fatalf("acks=all produce after the move: %v", err)
	}
	c.SameLogs("frozenmove", 0, 2, 3, 4)
}
