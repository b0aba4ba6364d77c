package console

import (
	"encoding/json"
	"fmt"
	"testing"
)

func snapOf(n int, hw int64) *snapshot {
	s := &snapshot{Time: hw, ClusterID: "c", Controller: controllerView{ID: 1, Active: true},
		Controllers: []controllerView{{ID: 1, Active: true}},
		Brokers:     []brokerView{{ID: 1, State: stateUp, Leads: []string{}, Faults: []faultView{}}},
		Topics:      []topicView{{Name: "t", Partitions: n}}}
	for i := range n {
		s.Partitions = append(s.Partitions, partitionView{Topic: "t", Partition: int32(i), Leader: 1, Replicas: []int32{1, 2, 3},
			ISR: []int32{1, 2, 3}, HW: 10, Views: []replicaView{{Broker: 1, LEO: 10, HW: 10}, {Broker: 2, LEO: 10, HW: 10}, {Broker: 3, LEO: 10, HW: 10}}})
	}
	return s
}

// The first patch carries everything; later ones only what changed: a
// moved HW is one partition, a broker's state the brokers, a deleted
// partition its key.
func TestPatchesCarryOnlyWhatChanged(t *testing.T) {
	var d differ
	first := d.next(snapOf(3, 1))
	if len(first.Partitions) != 3 || first.Brokers == nil || first.Topics == nil || first.Controller == nil || first.ClusterID == nil {
		t.Fatalf("the first patch %+v does not carry everything", first)
	}
	same := d.next(snapOf(3, 2))
	if same.Partitions != nil || same.Removed != nil || same.Brokers != nil || same.Topics != nil || same.Controller != nil || same.Time != 2 {
		t.Fatalf("an unchanged snapshot gave %+v", same)
	}
	s := snapOf(3, 3)
	s.Partitions[1].HW = 11
	s.Brokers[0].State = stateDown
	p := d.next(s)
	if len(p.Partitions) != 1 || p.Partitions[0].Partition != 1 || p.Brokers == nil || p.Topics != nil {
		t.Fatalf("one partition and the brokers changed; patch %+v", p)
	}
	s = snapOf(2, 4)
	s.Partitions[1].HW = 11
	s.Brokers[0].State = stateDown
	s.Topics[0].Partitions = 3 // the topic view as before
	p = d.next(s)
	if len(p.Removed) != 1 || p.Removed[0] != "t/2" || len(p.Partitions) != 0 {
		t.Fatalf("partition 2 gone; patch %+v", p)
	}
}

// BenchmarkConsoleUpdateBytes is what one update costs on the wire per
// page: the whole snapshot (as every update was sent before) against the
// patch when one partition's HW moved.
func BenchmarkConsoleUpdateBytes(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			var d differ
			d.next(snapOf(n, 0))
			var whole, patch int
			for i := range b.N {
				s := snapOf(n, int64(i+1))
				s.Partitions[i%n].HW = int64(100 + i)
				whole = len(mustJSON(s))
				p, _ := json.Marshal(d.next(s))
				patch = len(p)
			}
			b.ReportMetric(float64(whole), "whole-B")
			b.ReportMetric(float64(patch), "patch-B")
		})
	}
}
