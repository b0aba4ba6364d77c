package quiet

import (
	"context"
	"maps"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// commitFromOutside commits orders-0 for group as a tool does (no member,
// generation -1), kept for retention when it is set (OffsetCommit v2-v4's
// retention time), for offsets.retention.minutes otherwise.
func commitFromOutside(g clustertest.Groups, group string, offset int64, retention time.Duration) {
	g.C.T.Helper()
	req := &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: -1, Topics: []*groupv1.OffsetCommitTopic{{Name: "orders",
		Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: offset, CommittedLeaderEpoch: -1}}}}}
	if retention > 0 {
		ms := retention.Milliseconds()
		req.RetentionTimeMs = &ms
	}
	resp, err := clustertest.Call(g, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
		return api.OffsetCommit(ctx, req)
	})
	if err != nil {
		g.C.T.Fatalf("commit for %s: %v", group, err)
	}
	if code := kerr.Code(resp.GetTopics()[0].GetPartitions()[0].GetErrorCode()); code != kerr.None {
		g.C.T.Fatalf("commit for %s: %v", group, code)
	}
}

// Offsets committed with a short retention expire on schedule although
// their coordinator was killed and another took over while nothing else
// happened: the new coordinator's cleanup drops them and forgets the
// group. When the old coordinator comes back and is elected again, still
// with nothing else going on, the tombstones written in its absence hold:
// the expired offsets do not come back, and those of a group kept for the
// default retention are all there on every replica.
func TestIdleGroupsOffsetsExpireOnScheduleAcrossACoordinatorMove(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for offsets to expire across a coordinator move")
	}
	settings := maps.Clone(clustertest.GroupSettings)
	settings["offsets.retention.check.interval.ms"] = "200"
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, BrokerSettings: settings, AdjustController: clustertest.OffsetsPartitions(1)})
	c.CreateTopic("orders", 1, 3, nil)
	g := clustertest.Groups{C: c}
	const retention = 10 * time.Second
	committed := time.Now()
	commitFromOutside(g, "fleeting", 5, retention)
	commitFromOutside(g, "keeper", 7, 0)
	if got := g.Fetch("fleeting"); got[0] != 5 {
		t.Fatalf("fleeting's offsets right after the commit: %v, want 0:5", got)
	}

	first := g.Coordinator("fleeting")
	preferred := c.Partition(topicconfig.OffsetsTopic, 0).GetReplicas()[0]
	if first != preferred {
		t.Skipf("the preferred replica %d of %s-0 does not coordinate (broker %d does)", preferred, topicconfig.OffsetsTopic, first)
	}
	c.CrashBroker(first)
	c.WaitFor(30*time.Second, "another coordinator", func() bool { return g.Coordinator("fleeting") != first })
	if time.Since(committed) < retention {
		if got := g.Fetch("fleeting"); got[0] != 5 {
			t.Fatalf("fleeting's offsets gone before their retention ran out: %v", got)
		}
	}
	// Quiet: nothing but the new coordinator's cleanup happens.
	c.WaitFor(retention+30*time.Second, "fleeting's offsets to expire under the new coordinator", func() bool {
		return len(g.Fetch("fleeting")) == 0
	})
	c.WaitFor(10*time.Second, "the cleanup to forget fleeting", func() bool {
		return g.Describe("fleeting").GetGroupState() == "Dead"
	})

	c.StartBroker(first)
	c.WaitBrokerAlive(first)
	c.WaitFor(30*time.Second, "the old coordinator back in the ISR", func() bool {
		return len(c.Partition(topicconfig.OffsetsTopic, 0).GetIsr()) == 3
	})
	resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions: []*commonv1.TopicPartition{{Topic: topicconfig.OffsetsTopic, Partition: 0}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("preferred election: %v %v", resp, err)
	}
	c.WaitFor(30*time.Second, "the old coordinator to coordinate again", func() bool {
		return g.Coordinator("fleeting") == first && c.Leads(first, topicconfig.OffsetsTopic, 0)
	})
	time.Sleep(time.Second) // idle under the returned coordinator, a few cleanups
	if got := g.Fetch("fleeting"); len(got) != 0 {
		t.Fatalf("fleeting's expired offsets came back with the old coordinator: %v", got)
	}
	if s := g.Describe("fleeting").GetGroupState(); s != "Dead" {
		t.Fatalf("fleeting is %s under the old coordinator, want Dead", s)
	}
	if got := g.Fetch("keeper"); got[0] != 7 {
		t.Fatalf("keeper's offsets after the moves: %v, want 0:7", got)
	}
	c.WaitHWAtLEO(topicconfig.OffsetsTopic, 0, 1, 2, 3)
	c.SameLogs(topicconfig.OffsetsTopic, 0, 1, 2, 3)
}
