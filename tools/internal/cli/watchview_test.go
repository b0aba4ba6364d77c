package cli

import (
	"regexp"
	"strings"
	"testing"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// snapshot has a healthy partition, an under-replicated one at min ISR
// whose third replica is down, one without a leader, and one whose brokers
// have not reported to this controller yet (just in office).
func snapshot() *adminv1.WatchClusterResponse {
	rv := func(id int32, alive, isr, leader bool, leo, hw int64) *adminv1.ReplicaView {
		return &adminv1.ReplicaView{BrokerId: id, Alive: alive, InIsr: isr, Leader: leader, LogEndOffset: leo, HighWatermark: hw, Reported: alive}
	}
	// unreported is a live replica this controller has no report of yet.
	unreported := func(id int32, leader bool) *adminv1.ReplicaView {
		return &adminv1.ReplicaView{BrokerId: id, Alive: true, InIsr: true, Leader: leader}
	}
	// known sets a follower's LEO as its leader knows it.
	known := func(v *adminv1.ReplicaView, leo int64) *adminv1.ReplicaView {
		v.LeaderKnownLogEndOffset = &leo
		return v
	}
	return &adminv1.WatchClusterResponse{
		Cluster: &adminv1.DescribeClusterResponse{ClusterId: "cid", Controller: &commonv1.Node{Id: 1}, ControllerEpoch: 3,
			Brokers: []*adminv1.BrokerInfo{{Node: &commonv1.Node{Id: 1}, Alive: true}, {Node: &commonv1.Node{Id: 2}, Alive: true}, {Node: &commonv1.Node{Id: 3}}}},
		Partitions: []*adminv1.PartitionView{
			{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, Isr: []int32{1, 2}, HighWatermark: 10, HighWatermarkKnown: true, MinInsyncReplicas: 1,
				ReplicaViews: []*adminv1.ReplicaView{rv(1, true, true, true, 10, 10), known(rv(2, true, true, false, 10, 9), 8)}},
			{Topic: "orders", Partition: 1, Leader: 2, LeaderEpoch: 5, Replicas: []int32{1, 2, 3}, Isr: []int32{2, 1}, HighWatermark: 7, HighWatermarkKnown: true, MinInsyncReplicas: 2,
				UnderReplicated: true, AtMinIsr: true,
				ReplicaViews: []*adminv1.ReplicaView{known(rv(1, true, true, false, 7, 7), 7), rv(2, true, true, true, 8, 7), rv(3, false, false, false, 3, 3)}},
			{Topic: "orders", Partition: 2, Leader: -1, LeaderEpoch: 9, Replicas: []int32{3}, Isr: []int32{3}, MinInsyncReplicas: 1, Offline: true,
				ReplicaViews: []*adminv1.ReplicaView{rv(3, false, true, false, 0, 0)}},
			{Topic: "orders", Partition: 3, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, Isr: []int32{1, 2}, MinInsyncReplicas: 1,
				ReplicaViews: []*adminv1.ReplicaView{unreported(1, true), unreported(2, false)}},
		},
		Events: []*controlv1.ClusterEvent{
			{Kind: controlv1.EventKind_EVENT_KIND_ISR_SHRINK, Topic: "orders", Partition: 1, Reason: "Shrinking ISR from 2,1,3 to 2,1"},
			{Kind: controlv1.EventKind_EVENT_KIND_HW_ADVANCE, Topic: "orders", Partition: 1, Reason: "hw 7"},
			{Kind: controlv1.EventKind_EVENT_KIND_ISR_SHRINK, Topic: "other", Partition: 0, Reason: "not watched"},
			{Kind: controlv1.EventKind_EVENT_KIND_BROKER_DOWN, NodeId: 3, Reason: "broker 3 down"},
		},
	}
}

func TestWatchViewPlain(t *testing.T) {
	v := &watchView{topics: map[string]bool{"orders": true}}
	msg := snapshot()
	v.addEvents(msg.GetEvents())
	var b strings.Builder
	v.render(&b, msg)
	out := b.String()
	if strings.Contains(out, "\033") {
		t.Fatalf("plain output has escape codes:\n%q", out)
	}
	for _, want := range []string{
		"cluster cid  controller 1  controller_epoch 3\nbrokers: 1 up 2 up 3 down\n",
		"4 partitions, 1 under-replicated, 1 without a leader",
		"ISR_SHRINK", "orders-1", "Shrinking ISR from 2,1,3 to 2,1", "BROKER_DOWN", "node 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not watched") || strings.Contains(out, "HW_ADVANCE") {
		t.Errorf("events of other topics or HW advances shown:\n%s", out)
	}
	rows := []string{
		// The leader knows follower 2 at 8 (shown), follower 1 at its own 7 (not).
		`(?m)^orders  0          1       2      1,2  10  1\*:10/10  2:10/9 \(leader: 8\) +ok$`,
		`(?m)^orders  1          2       5      2,1  7   1:7/7  2\*:8/7  3:down +at min ISR, ! under-replicated$`,
		`(?m)^orders  2          none    9      3    -   3:down +! NO LEADER$`,
		// Not reported to this controller yet: unknown, not 0.
		`(?m)^orders  3          1       1      1,2  \?   1\*:\?/\?  2:\?/\? +ok$`,
	}
	for _, re := range rows {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no row matching %s:\n%s", re, out)
		}
	}
}

func TestWatchViewColour(t *testing.T) {
	v := &watchView{color: true, clear: true}
	var b strings.Builder
	v.render(&b, snapshot())
	out := b.String()
	for _, want := range []string{
		ansiClear,
		ansiYellow + "1*:10/10" + ansiReset,          // leader
		ansiGreen + "2:10/9 (leader: 8)" + ansiReset, // in sync, the leader a fetch behind
		ansiRed + "3:down" + ansiReset,               // out of sync
		ansiRed + "! NO LEADER" + ansiReset,          // leaderless
		ansiYellow + "! under-replicated" + ansiReset,
		"Ctrl-C to quit",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%q", want, out)
		}
	}
	// Colour must not break the alignment: stripped of escapes, the table
	// is the plain one.
	plainView := &watchView{}
	var p strings.Builder
	plainView.render(&p, snapshot())
	stripped := regexp.MustCompile("\033\\[[0-9;]*[A-Za-z]").ReplaceAllString(out, "")
	table := func(s string) string { return s[strings.Index(s, "TOPIC"):strings.Index(s, "4 partitions")] }
	if table(stripped) != table(p.String()) {
		t.Errorf("coloured table misaligned:\n%s\nvs\n%s", table(stripped), table(p.String()))
	}
}

func TestWatchViewKeepsRecentEvents(t *testing.T) {
	v := &watchView{}
	for i := range 20 {
		v.addEvents([]*controlv1.ClusterEvent{{Kind: controlv1.EventKind_EVENT_KIND_BROKER_UP, NodeId: int32(i + 1)}})
	}
	if len(v.events) != maxWatchEvents || v.events[len(v.events)-1].GetNodeId() != 20 {
		t.Fatalf("kept %d events, last %v", len(v.events), v.events[len(v.events)-1])
	}
}

// A follower the leader has had no fetch from yet has no leader-known LEO;
// a negative one (as older controllers send) is not printed as a LEO either:
// "(leader: -1)" would read as the leader's view of the follower's log.
func TestWatchUnknownLeaderKnownLEO(t *testing.T) {
	unknown := int64(-1)
	msg := &adminv1.WatchClusterResponse{
		Cluster: &adminv1.DescribeClusterResponse{Controller: &commonv1.Node{Id: 1},
			Brokers: []*adminv1.BrokerInfo{{Node: &commonv1.Node{Id: 1}, Alive: true}, {Node: &commonv1.Node{Id: 2}, Alive: true}}},
		Partitions: []*adminv1.PartitionView{{Topic: "orders", Partition: 0, Leader: 1, Replicas: []int32{1, 2}, Isr: []int32{1, 2},
			HighWatermark: 0, HighWatermarkKnown: true, MinInsyncReplicas: 1,
			ReplicaViews: []*adminv1.ReplicaView{
				{BrokerId: 1, Alive: true, InIsr: true, Leader: true, LogEndOffset: 2, Reported: true},
				{BrokerId: 2, Alive: true, InIsr: true, LogEndOffset: 0, Reported: true, LeaderKnownLogEndOffset: &unknown},
			}}},
	}
	var b strings.Builder
	(&watchView{topics: map[string]bool{}}).render(&b, msg)
	if strings.Contains(b.String(), "(leader: -1)") {
		t.Fatalf("the watch shows an unknown leader-known LEO as -1:\n%s", b.String())
	}
}
