package console

import (
	"slices"
	"testing"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
)

func TestEventViewLinksTraces(t *testing.T) {
	ev := &controlv1.ClusterEvent{Time: 1, Kind: controlv1.EventKind_EVENT_KIND_HW_ADVANCE, Topic: "t", Partition: 2,
		NodeId: 3, Reason: "follower fetch", TraceId: "4bf92f3577b34da6a3ce929d0e0e4736"}
	v := toEventView(ev, "http://127.0.0.1:16686")
	if v.Kind != "hw-advance" || v.TraceURL != "http://127.0.0.1:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("event view %+v", v)
	}
	if v := toEventView(ev, ""); v.TraceURL != "" {
		t.Fatalf("a trace link without a Jaeger UI: %+v", v)
	}
	for k := range controlv1.EventKind_name {
		if kindName(controlv1.EventKind(k)) == "" {
			t.Errorf("no name for event kind %d", k)
		}
	}
}

func TestBuildSnapshotStatesAndFaults(t *testing.T) {
	m := &adminv1.WatchClusterResponse{
		Time: 5,
		Cluster: &adminv1.DescribeClusterResponse{
			ClusterId: "c", ControllerEpoch: 7, Controller: &commonv1.Node{Id: 2, Address: "c2"},
			Brokers: []*adminv1.BrokerInfo{
				{Node: &commonv1.Node{Id: 1, Address: "b1", Rack: "r1"}, Alive: true, BrokerEpoch: 10},
				{Node: &commonv1.Node{Id: 2, Address: "b2"}, Alive: false},
				{Node: &commonv1.Node{Id: 3, Address: "b3"}, Alive: false},
				{Node: &commonv1.Node{Id: 4, Address: "b4"}, Alive: true, ShuttingDown: true},
			},
		},
		Partitions: []*adminv1.PartitionView{{
			Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 3, Replicas: []int32{2, 1, 3}, Isr: []int32{1},
			MinInsyncReplicas: 2, UnderReplicated: true, UnderMinIsr: true, HighWatermark: 4, HighWatermarkKnown: true,
			ReplicaViews: []*adminv1.ReplicaView{
				{BrokerId: 2, InIsr: false},
				{BrokerId: 1, Alive: true, InIsr: true, Leader: true, LogEndOffset: 6, HighWatermark: 4, Reported: true},
				{BrokerId: 3, LogEndOffset: 2},
			},
		}},
	}
	s := buildSnapshot(m, extras{
		topics:  map[string]topicConfig{"t": {rf: 3, configs: map[string]string{"unclean.leader.election.enable": "true"}}},
		process: map[int32]string{1: "running", 2: "paused", 3: "exited"},
		faults: map[int32]brokerFaults{
			3: {fetch: []faultView{{Topic: "", Partition: -1, Stall: true}, {Topic: "t", Partition: 0, DelayMs: 300}}},
			1: {cutTo: []int32{3}, isolated: true, isolatedFromPeers: true},
		},
	})
	if b := s.Brokers[0]; !b.Isolated || !b.IsolatedFromPeers || !slices.Equal(b.CutLinks, []int32{3}) ||
		s.Brokers[1].Isolated || s.Brokers[1].IsolatedFromPeers || s.Brokers[1].CutLinks == nil {
		t.Errorf("link faults: broker 1 isolated %v (from peers %v) cut to %v; broker 2 isolated %v (from peers %v) cut to %v",
			b.Isolated, b.IsolatedFromPeers, b.CutLinks, s.Brokers[1].Isolated, s.Brokers[1].IsolatedFromPeers, s.Brokers[1].CutLinks)
	}
	states := map[int32]string{}
	for _, b := range s.Brokers {
		states[b.ID] = b.State
	}
	want := map[int32]string{1: stateUp, 2: stateFenced, 3: stateDown, 4: stateShuttingDown}
	for id, st := range want {
		if states[id] != st {
			t.Errorf("broker %d: state %q, want %q", id, states[id], st)
		}
	}
	if s.Controller.ID != 2 || s.Controller.Epoch != 7 || s.Brokers[0].Rack != "r1" || len(s.Brokers[0].Leads) != 1 {
		t.Errorf("cluster view %+v", s)
	}
	p := s.Partitions[0]
	if !p.Views[0].Preferred || p.Views[1].Preferred || p.Views[1].Fault != nil {
		t.Errorf("preferred replica or leader fault wrong: %+v", p.Views)
	}
	// Positions nobody reported are marked so, for the page to show them
	// unknown rather than at 0.
	if !p.HWKnown || !p.Views[1].Reported || p.Views[0].Reported || p.Views[2].Reported {
		t.Errorf("reported flags: HW known %v, replicas %+v", p.HWKnown, p.Views)
	}
	if f := p.Views[2].Fault; f == nil || !f.Stall || f.DelayMs != 300 {
		t.Errorf("merged fault of broker 3: %+v", f)
	}
	if len(s.Topics) != 1 || s.Topics[0].Unclean == nil || !*s.Topics[0].Unclean || s.Topics[0].ReplicationFactor != 3 || s.Topics[0].Partitions != 1 {
		t.Errorf("topic view %+v", s.Topics)
	}
}

// Every process state the dev launcher reports has a name on the page
// (STOPPING included: a graceful stop under way, its process alive), so
// the page never shows a broker's process as if it had none.
func TestProcessStateNamesEveryNodeState(t *testing.T) {
	for v, name := range devclusterv1.NodeState_name {
		s := devclusterv1.NodeState(v)
		if s == devclusterv1.NodeState_NODE_STATE_UNSPECIFIED {
			continue
		}
		if processState(s) == "" {
			t.Errorf("%s has no name on the page", name)
		}
	}
	if got := processState(devclusterv1.NodeState_NODE_STATE_STOPPING); got != "stopping" {
		t.Errorf("STOPPING is shown as %q, want stopping", got)
	}
}
