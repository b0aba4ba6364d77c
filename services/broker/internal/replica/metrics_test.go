package replica

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// gauge reads one of the partition-state gauges as a scrape would.
func (e *env) gauge(name string) float64 {
	e.t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&stateCollector{m: e.m})
	mfs, err := reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	e.t.Fatalf("no gauge %s", name)
	return 0
}

// Kafka's UnderReplicatedPartitions compares the ISR with the replication
// factor, which during a reassignment leaves out the replicas being added
// (OngoingReassignmentState.replicationFactor): a partition whose new
// replica is still copying is not under-replicated, one whose original
// replicas left the ISR is.
func TestUnderReplicatedLeavesOutReplicasBeingAdded(t *testing.T) {
	e := newEnv(t)
	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[1]}
	for i, isr := range [][]int32{{1, 2}, {1}} {
		ps := partitionState(TP{Topic: "t", Partition: int32(i)}, 1, 1, 1, isr)
		ps.AddingReplicas = []int32{3} // replicas 1,2,3, of which 3 is being added
		req.Partitions = append(req.Partitions, ps)
	}
	resp, err := e.m.LeaderAndIsr(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetPartitions() {
		if c := kerr.Code(p.GetErrorCode()); c != kerr.None {
			t.Fatalf("LeaderAndIsr: %v %s", c, p.GetErrorMessage())
		}
	}
	if n := e.gauge("tidemark_broker_under_replicated_partitions"); n != 1 {
		t.Fatalf("under-replicated partitions = %v, want 1: ISR 1,2 of 1,2,3 adding 3 is full, ISR 1 is not", n)
	}

	// The move completes: 3 is a replica like the others.
	e.stateOf(TP{Topic: "t", Partition: 0}, 1, 2, 2, []int32{1, 2}, nil)
	if n := e.gauge("tidemark_broker_under_replicated_partitions"); n != 2 {
		t.Fatalf("under-replicated partitions = %v, want 2 once 3 is no longer being added", n)
	}
}
