package groups

import (
	"context"
	"maps"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/clustertest"
)

// offsets.retention.check.interval.ms is a real broker setting: with 200
// ms the coordinator's cleanup forgets a group whose member left, without
// offsets, by itself (with the 10-minute default it stays listed, Empty).
func TestGroupCleanupIntervalSetting(t *testing.T) {
	settings := maps.Clone(clustertest.GroupSettings)
	settings["offsets.retention.check.interval.ms"] = "200"
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, BrokerSettings: settings, AdjustController: clustertest.OffsetsPartitions(3)})
	g := clustertest.Groups{C: c}
	j := g.Join("brief", "", 10*time.Second)
	g.SyncAlone("brief", j, "")
	if _, err := clustertest.Call(g, "brief", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.LeaveGroupResponse, error) {
		return api.LeaveGroup(ctx, &groupv1.LeaveGroupRequest{GroupId: "brief", Members: []*groupv1.MemberIdentity{{MemberId: j.GetMemberId()}}})
	}); err != nil {
		t.Fatalf("leave: %v", err)
	}
	c.WaitFor(20*time.Second, "the cleanup to forget the emptied group", func() bool {
		return g.Describe("brief").GetGroupState() == "Dead"
	})
}
