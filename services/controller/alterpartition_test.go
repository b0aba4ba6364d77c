package controller

import (
	"slices"
	"testing"
	"time"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// TestAlterPartitionErrors drives a leader's AlterPartition through every
// answer of Kafka's validation order (F10) over gRPC.
func TestAlterPartitionErrors(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "a", [][]int32{{1, 2, 3}}, nil)
	ctl := c.control(c1)
	member := func(id int32, epoch int64) *controlv1.IsrMember {
		return &controlv1.IsrMember{BrokerId: id, BrokerEpoch: epoch}
	}
	send := func(leaderEpoch, partitionEpoch int32, isr ...*controlv1.IsrMember) *controlv1.AlterPartitionResult {
		t.Helper()
		resp, err := ctl.AlterPartition(ctx(t), &controlv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: c.brokers[1].brokerEpoch(),
			Partitions: []*controlv1.AlterPartitionItem{{Topic: "a", Partition: 0, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, NewIsr: isr}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetPartitions()[0]
	}
	e1, e2 := c.brokers[1].brokerEpoch(), c.brokers[2].brokerEpoch()

	// A shrink commits, with the next partition epoch, and every broker is told.
	r := send(0, 0, member(1, e1), member(2, e2))
	wantCode(t, r.GetErrorCode(), kerr.None, "shrink")
	if r.GetPartitionEpoch() != 1 || !slices.Equal(r.GetIsr(), []int32{1, 2}) || r.GetLeaderEpoch() != 0 || r.GetLeader() != 1 {
		t.Fatalf("shrink answer = %v", r)
	}
	eventually(t, 10*time.Second, "broker 3 learns the ISR", func() bool {
		um := c.brokers[3].lastUpdate()
		return um != nil && len(um.GetPartitions()) == 1 && um.GetPartitions()[0].GetPartitionEpoch() == 1
	})
	// The identical request again succeeds without a write (a retry).
	r = send(0, 0, member(1, e1), member(2, e2))
	wantCode(t, r.GetErrorCode(), kerr.None, "retry")
	if r.GetPartitionEpoch() != 1 {
		t.Fatalf("retry wrote: %v", r)
	}
	// Built on an older ISR.
	wantCode(t, send(0, 0, member(1, e1)).GetErrorCode(), kerr.InvalidUpdateVersion, "older partition epoch")
	// Epochs newer than the controller's: the sender saw another controller.
	wantCode(t, send(5, 1, member(1, e1)).GetErrorCode(), kerr.NotController, "newer leader epoch")
	// Malformed: the leader left out.
	wantCode(t, send(0, 1, member(2, e2)).GetErrorCode(), kerr.InvalidRequest, "ISR without the leader")
	// A member with an old broker epoch (KIP-903).
	wantCode(t, send(0, 1, member(1, e1), member(2, e2-1), member(3, 0)).GetErrorCode(), kerr.IneligibleReplica, "member's old epoch")

	// A dead replica may not join: broker 2 goes, and its removal from the
	// ISR bumps the leader epoch.
	c.brokers[2].deregister()
	c.waitState("a", 0, 3*time.Second, "broker 2 out", func(s metastore.PartitionState) bool { return s.LeaderEpoch == 1 })
	wantCode(t, send(0, 1, member(1, e1)).GetErrorCode(), kerr.FencedLeaderEpoch, "old leader epoch")
	wantCode(t, send(1, 2, member(1, e1), member(2, e2)).GetErrorCode(), kerr.IneligibleReplica, "dead replica")
	if s := c.state("a", 0); !slices.Equal(s.ISR, []int32{1}) || s.PartitionEpoch != 2 {
		t.Fatalf("refused requests changed the state: %+v", s)
	}

	// A stale sender is refused as a whole.
	_, err := ctl.AlterPartition(ctx(t), &controlv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: e1 - 1,
		Partitions: []*controlv1.AlterPartitionItem{{Topic: "a", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 2}}})
	if d := detail(t, err); d.Code != kerr.StaleBrokerEpoch {
		t.Fatalf("stale sender = %+v", d)
	}
	// Unknown and repeated partitions are answered per item.
	e3 := c.brokers[3].brokerEpoch()
	grow := &controlv1.AlterPartitionItem{Topic: "a", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 2,
		NewIsr: []*controlv1.IsrMember{member(1, e1), member(3, e3)}}
	resp, err := ctl.AlterPartition(ctx(t), &controlv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: e1,
		Partitions: []*controlv1.AlterPartitionItem{{Topic: "nope", Partition: 0}, grow, grow}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, resp.GetPartitions()[0].GetErrorCode(), kerr.UnknownTopicOrPartition, "unknown partition")
	wantCode(t, resp.GetPartitions()[1].GetErrorCode(), kerr.None, "expand")
	wantCode(t, resp.GetPartitions()[2].GetErrorCode(), kerr.InvalidRequest, "repeated partition")
	if s := c.state("a", 0); !slices.Equal(s.ISR, []int32{1, 3}) || s.PartitionEpoch != 3 || s.LeaderEpoch != 1 {
		t.Fatalf("state = %+v", s)
	}
}
