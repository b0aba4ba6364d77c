package chaos

import (
	"strings"
	"testing"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest/history"
)

// The controller's views must show what the brokers hold: a replica it
// has no report of, one at other positions, or a partition whose HW it does
// not know is a disagreement; a replica the runner could not read is not
// judged.
func TestViewDisagreements(t *testing.T) {
	tp := history.TP{Topic: "t", Partition: 0}
	obs := observation{partitions: []history.PartitionState{{TP: tp, Leader: 1, Replicas: []history.ReplicaState{
		{Broker: 1, Readable: true, LEO: 10, HW: 10},
		{Broker: 2, Readable: true, LEO: 10, HW: 10},
		{Broker: 3, Readable: false},
	}}}}
	view := func(hwKnown bool, replicas ...*adminv1.ReplicaView) *adminv1.WatchClusterResponse {
		return &adminv1.WatchClusterResponse{Partitions: []*adminv1.PartitionView{{Topic: "t", Partition: 0, Leader: 1,
			HighWatermark: 10, HighWatermarkKnown: hwKnown, ReplicaViews: replicas}}}
	}
	at := func(id int32, leo, hw int64) *adminv1.ReplicaView {
		return &adminv1.ReplicaView{BrokerId: id, Reported: true, LogEndOffset: leo, HighWatermark: hw}
	}
	for _, c := range []struct {
		name string
		msg  *adminv1.WatchClusterResponse
		want string // a word of the one disagreement; "" for none
	}{
		{"agreeing", view(true, at(1, 10, 10), at(2, 10, 10), &adminv1.ReplicaView{BrokerId: 3}), ""},
		{"unreported replica", view(true, at(1, 10, 10), &adminv1.ReplicaView{BrokerId: 2}), "replica 2 unreported"},
		{"stale positions", view(true, at(1, 10, 10), at(2, 9, 9)), "replica 2 at LEO 9 HW 9"},
		{"HW unknown", view(false, at(1, 10, 10), at(2, 10, 10)), "HW 10 (known false)"},
		{"replica missing", view(true, at(1, 10, 10)), "replica 2 not in"},
		{"partition missing", &adminv1.WatchClusterResponse{}, "t-0: not in"},
	} {
		got := viewDisagreements(obs, c.msg)
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("%s: disagreements %q, want none", c.name, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s: disagreements %q, want one saying %q", c.name, got, c.want)
		}
	}
}
