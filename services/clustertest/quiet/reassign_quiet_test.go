package quiet

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
)

// A move's new replica goes away part way through its copy (killed, or
// frozen as by SIGSTOP past its lease), stays away a while with nothing
// produced, and comes back: the move completes with no write to push it
// on (the new replica catches up from what it had and joins the ISR, the
// removed one leaves and deletes its log), HW = LEO on every replica and
// every acknowledged write is there.
func TestIdleReassignmentWhoseNewReplicaWasDownAWhileCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a reassignment's target away for a while")
	}
	for _, how := range []string{"killed", "frozen"} {
		t.Run(how, func(t *testing.T) { idleReassignmentWithTargetAway(t, how) })
	}
}

func idleReassignmentWithTargetAway(t *testing.T, how string) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 4, BrokerSettings: map[string]string{"replica.fetch.max.bytes": "1024", "replica.lag.time.max.ms": "1000"}})
	clustertest.CreateAssigned(t, c, "stalled", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	acked := map[int64]string{}
	for i := range 200 {
		v := fmt.Sprintf("value-%04d", i)
		off, err := c.Produce(context.Background(), "stalled", 0, -1, v)
		if err != nil {
			t.Fatal(err)
		}
		acked[off] = v
	}
	clustertest.Throttle(t, c, "stalled", "4", "follower.replication.throttled.rate", "200", "follower.replication.throttled.replicas", "0:4")
	clustertest.Reassign(t, c, "stalled", map[int32][]int32{0: {2, 3, 4}})
	c.WaitFor(20*time.Second, "broker 4 part way through its copy", func() bool {
		_, leo, ok := c.Broker(4).ReplicaOffsets("stalled", 0)
		return ok && leo > 0
	})
	if how == "killed" {
		c.CrashBroker(4)
	} else {
		c.EtcdLink(4).Pause()
		c.Net.Pause(clustertest.BrokerName(4))
	}
	resp, err := c.Admin().AlterConfigs(context.Background(), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{
		{Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: "4"},
			Ops: []*adminv1.ConfigOp{{Name: "follower.replication.throttled.rate", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE}}}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("lifting the throttle: %v %v", resp, err)
	}
	time.Sleep(3 * time.Second) // quiet, longer than its lease and the lag time
	if pd := c.Partition("stalled", 0); !slices.Equal(pd.GetAddingReplicas(), []int32{4}) {
		t.Fatalf("the move is no longer in flight with broker 4 down: %v", pd)
	}

	if how == "killed" {
		c.StartBroker(4)
	} else {
		c.Net.Resume(clustertest.BrokerName(4))
		c.EtcdLink(4).Resume()
	}
	c.WaitFor(30*time.Second, "stalled-0 on 2,3,4 with nothing produced", func() bool { return clustertest.SettledOn(c, "stalled", 0, []int32{2, 3, 4}) })
	clustertest.CheckWholeAndLive(t, c, "stalled", 0, []int32{2, 3, 4}, acked)
	clustertest.Gone(t, c, 1, "stalled", 0)
	if _, err := c.Produce(context.Background(), "stalled", 0, -1, "after"); err != nil {
		t.Fatalf("acks=all produce after the move: %v", err)
	}
	c.SameLogs("stalled", 0, 2, 3, 4)
}

// A partition nothing was ever written to moves to brokers that held none
// of it, and straight back again, still with nothing written: each move
// completes on its own (the new replicas join the ISR at offset 0, a new
// leader is elected among them, the old replicas leave and delete their
// logs), and the partition then takes writes that every replica holds.
func TestReassignmentsOfANeverWrittenPartitionComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a partition twice")
	}
	c := clustertest.Start(t, clustertest.Options{Brokers: 6, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	clustertest.CreateAssigned(t, c, "blank", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	for _, move := range []struct{ from, to []int32 }{{[]int32{1, 2, 3}, []int32{4, 5, 6}}, {[]int32{4, 5, 6}, []int32{3, 1, 2}}} {
		clustertest.Reassign(t, c, "blank", map[int32][]int32{0: move.to})
		c.WaitFor(30*time.Second, fmt.Sprintf("blank-0 on %v with nothing written", move.to), func() bool { return clustertest.SettledOn(c, "blank", 0, move.to) })
		c.WaitSettled(15*time.Second, "blank", 0, move.to)
		for _, id := range move.from {
			if !slices.Contains(move.to, id) {
				clustertest.Gone(t, c, id, "blank", 0)
			}
		}
	}
	acked := clustertest.ProduceAcked(t, c, "blank", 3)
	clustertest.CheckWholeAndLive(t, c, "blank", 0, []int32{3, 1, 2}, acked)
}
