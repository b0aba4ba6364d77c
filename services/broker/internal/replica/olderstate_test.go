package replica

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// sendState sends one partition state for tp0 and returns its answer.
func (e *env) sendState(ps *commonv1.PartitionState) (kerr.Code, string) {
	e.t.Helper()
	resp, err := e.m.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		BrokerEpoch: brokerEpochs[1], Partitions: []*commonv1.PartitionState{ps}})
	if err != nil {
		e.t.Fatal(err)
	}
	p := resp.GetPartitions()[0]
	return kerr.Code(p.GetErrorCode()), p.GetErrorMessage()
}

// A controller that loaded etcd sends a state older than the one the
// broker holds only when etcd's metadata went backwards (restored from an
// older snapshot): every state was written there before it was sent. The
// broker keeps its own state, as for any stale one, and says so: the
// partition is answered STALE_CONTROLLER_EPOCH (Kafka's answer to a
// LeaderAndIsr whose leader epoch is not newer) and counted. The same state
// sent again (a new controller's full push) is no such thing.
func TestAnOlderPartitionStateIsRefusedLoudly(t *testing.T) {
	e := newEnv(t)
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	older := func() float64 { return testutil.ToFloat64(e.m.metrics.olderStates) }

	e.ctrlEpoch = 2 // a new term: its full push
	if code, msg := e.sendState(partitionState(tp0, 1, 3, 5, []int32{1, 2, 3})); code != kerr.None {
		t.Fatalf("the held state sent again answered %v %s, want NONE", code, msg)
	}
	if n := older(); n != 0 {
		t.Fatalf("older states counted %v after the held state was sent again", n)
	}

	// The same leader in the same leader epoch with an older partition
	// epoch: a state an ISR change of this leader overtook (its
	// AlterPartition answer came before a controller's queued push), not
	// etcd going back; ignored as before, as Kafka does.
	if code, msg := e.sendState(partitionState(tp0, 1, 3, 4, []int32{1, 2})); code != kerr.None {
		t.Fatalf("a state an ISR change overtook answered %v %s, want NONE", code, msg)
	}
	if n := older(); n != 0 {
		t.Fatalf("older states counted %v after a state an ISR change overtook", n)
	}

	for _, c := range []struct {
		what string
		ps   *commonv1.PartitionState
	}{
		{"an older leader epoch electing another leader", partitionState(tp0, 2, 2, 6, []int32{2, 3})},
		{"another leader under the held epochs", partitionState(tp0, 2, 3, 5, []int32{2, 3})},
	} {
		before := older()
		code, msg := e.sendState(c.ps)
		if code != kerr.StaleControllerEpoch {
			t.Errorf("%s answered %v %s, want STALE_CONTROLLER_EPOCH", c.what, code, msg)
		}
		if n := older(); n != before+1 {
			t.Errorf("%s: older states counted %v, want %v", c.what, n, before+1)
		}
		r, _ := e.m.Replica(tp0)
		s := r.state.Snapshot(e.clock.Now())
		if !r.IsLeader() || s.LeaderEpoch != 3 || s.PartitionEpoch != 5 || len(s.ISR) != 3 {
			t.Fatalf("%s changed the held state: leader %v epoch %d partition epoch %d ISR %v", c.what, r.IsLeader(), s.LeaderEpoch, s.PartitionEpoch, s.ISR)
		}
	}
}

// A request from a controller deposed by a newer one is refused
// STALE_CONTROLLER_EPOCH and counted, so a zombie controller still
// sending shows on the broker it tries to steer.
func TestARequestFromAStaleControllerIsCounted(t *testing.T) {
	e := newEnv(t)
	e.ctrlEpoch = 2
	e.updateMetadata() // the newer controller is heard from
	stale := func() float64 { return testutil.ToFloat64(e.m.metrics.staleController) }
	if n := stale(); n != 0 {
		t.Fatalf("stale controller requests counted %v before any", n)
	}
	_, err := e.m.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1,
		BrokerEpoch: brokerEpochs[1], Partitions: []*commonv1.PartitionState{partitionState(tp0, 1, 1, 1, []int32{1, 2, 3})}})
	if kerr.CodeOf(err) != kerr.StaleControllerEpoch {
		t.Fatalf("a request of controller epoch 1 after epoch 2: %v, want STALE_CONTROLLER_EPOCH", err)
	}
	if n := stale(); n != 1 {
		t.Fatalf("stale controller requests counted %v, want 1", n)
	}
}
