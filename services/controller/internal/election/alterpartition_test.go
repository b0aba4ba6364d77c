package election

import (
	"slices"
	"testing"

	"tidemark.io/services/platform/kerr"
)

// The partition every AlterPartition case starts from: leader 1 at leader
// epoch 5, ISR [1 2], partition epoch 10; brokers 1-4 registered with epoch
// 100+id, broker 4 holding no replica of it.
func alterBase() (Partition, Brokers) {
	return Partition{
		Assignment: Assignment{1, 2, 3},
		State:      PartitionState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2}, PartitionEpoch: 10},
	}, cluster(1, 2, 3, 4)
}

func isr(members ...int32) []ReplicaState {
	out := make([]ReplicaState, len(members))
	for i, id := range members {
		out[i] = ReplicaState{ID: id, BrokerEpoch: 100 + int64(id)}
	}
	return out
}

func TestAlterPartition(t *testing.T) {
	valid := AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 101, LeaderEpoch: 5, PartitionEpoch: 10, NewISR: isr(1, 2, 3)}
	with := func(f func(*AlterPartitionRequest)) AlterPartitionRequest {
		r := valid
		r.NewISR = slices.Clone(valid.NewISR)
		f(&r)
		return r
	}
	tests := []struct {
		name    string
		req     AlterPartitionRequest
		brokers func(Brokers) Brokers
		code    kerr.Code
		changed bool
	}{
		{name: "expand", req: valid, changed: true},
		{name: "shrink", req: with(func(r *AlterPartitionRequest) { r.NewISR = isr(1) }), changed: true},
		{name: "replica epoch -1 skips the broker epoch check",
			req: with(func(r *AlterPartitionRequest) { r.NewISR[2].BrokerEpoch = UnknownBrokerEpoch }), changed: true},

		// Step 1.
		{name: "1: unregistered sender", req: with(func(r *AlterPartitionRequest) { r.BrokerID = 9 }), code: kerr.StaleBrokerEpoch},
		{name: "1: stale sender epoch", req: with(func(r *AlterPartitionRequest) { r.BrokerEpoch = 99 }), code: kerr.StaleBrokerEpoch},
		{name: "1 before 2: stale sender epoch and newer leader epoch",
			req: with(func(r *AlterPartitionRequest) { r.BrokerEpoch = 99; r.LeaderEpoch = 6 }), code: kerr.StaleBrokerEpoch},
		{name: "1 before 3: stale sender epoch and older leader epoch",
			req: with(func(r *AlterPartitionRequest) { r.BrokerEpoch = 99; r.LeaderEpoch = 4 }), code: kerr.StaleBrokerEpoch},

		// Step 2.
		{name: "2: newer leader epoch", req: with(func(r *AlterPartitionRequest) { r.LeaderEpoch = 6 }), code: kerr.NotController},
		{name: "2: newer partition epoch", req: with(func(r *AlterPartitionRequest) { r.PartitionEpoch = 11 }), code: kerr.NotController},
		{name: "2 before 3: newer partition epoch, older leader epoch",
			req: with(func(r *AlterPartitionRequest) { r.PartitionEpoch = 11; r.LeaderEpoch = 4 }), code: kerr.NotController},

		// Step 3.
		{name: "3: older leader epoch", req: with(func(r *AlterPartitionRequest) { r.LeaderEpoch = 4 }), code: kerr.FencedLeaderEpoch},
		{name: "3 before 4: older leader epoch with the current ISR",
			req: with(func(r *AlterPartitionRequest) { r.LeaderEpoch = 4; r.NewISR = isr(1, 2) }), code: kerr.FencedLeaderEpoch},

		// Step 4.
		{name: "4: equal to the current state", req: with(func(r *AlterPartitionRequest) { r.NewISR = isr(1, 2) })},
		{name: "4 before 5: retry with a stale partition epoch succeeds",
			req: with(func(r *AlterPartitionRequest) { r.NewISR = isr(1, 2); r.PartitionEpoch = 9 })},
		{name: "4 before 7: current ISR holds a replica that has since died",
			req:     with(func(r *AlterPartitionRequest) { r.NewISR = isr(1, 2) }),
			brokers: func(b Brokers) Brokers { delete(b.Epochs, 2); return b }},

		// Step 5.
		{name: "5: older partition epoch", req: with(func(r *AlterPartitionRequest) { r.PartitionEpoch = 9 }), code: kerr.InvalidUpdateVersion},
		{name: "5 before 6: older partition epoch and an unassigned replica",
			req: with(func(r *AlterPartitionRequest) { r.PartitionEpoch = 9; r.NewISR = isr(1, 4) }), code: kerr.InvalidUpdateVersion},
		{name: "5 before 7: older partition epoch and an ineligible replica",
			req:     with(func(r *AlterPartitionRequest) { r.PartitionEpoch = 9 }),
			brokers: func(b Brokers) Brokers { return b.stopping(3) }, code: kerr.InvalidUpdateVersion},

		// Step 6.
		{name: "6: sender is not the leader",
			req: with(func(r *AlterPartitionRequest) { r.BrokerID = 2; r.BrokerEpoch = 102 }), code: kerr.InvalidRequest},
		{name: "6: empty ISR", req: with(func(r *AlterPartitionRequest) { r.NewISR = nil }), code: kerr.InvalidRequest},
		{name: "6: ISR without the leader", req: with(func(r *AlterPartitionRequest) { r.NewISR = isr(2, 3) }), code: kerr.InvalidRequest},
		{name: "6: unassigned replica", req: with(func(r *AlterPartitionRequest) { r.NewISR = isr(1, 4) }), code: kerr.InvalidRequest},
		{name: "6: duplicate replica", req: with(func(r *AlterPartitionRequest) { r.NewISR = isr(1, 2, 2) }), code: kerr.InvalidRequest},
		{name: "6 before 7: unassigned and unregistered replica",
			req: with(func(r *AlterPartitionRequest) { r.NewISR = isr(1, 9) }), code: kerr.InvalidRequest},

		// Step 7.
		{name: "7: unregistered replica", req: valid,
			brokers: func(b Brokers) Brokers { delete(b.Epochs, 3); return b }, code: kerr.IneligibleReplica},
		{name: "7: shutting-down replica", req: valid,
			brokers: func(b Brokers) Brokers { return b.stopping(3) }, code: kerr.IneligibleReplica},
		{name: "7: replica from an earlier incarnation",
			req: with(func(r *AlterPartitionRequest) { r.NewISR[2].BrokerEpoch = 42 }), code: kerr.IneligibleReplica},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, b := alterBase()
			if tt.brokers != nil {
				b = tt.brokers(b)
			}
			d, err := AlterPartition(p, b, tt.req)
			wantCode(t, err, tt.code)
			if tt.code != kerr.None {
				return
			}
			if d.Changed != tt.changed {
				t.Fatalf("changed = %v, want %v (%s)", d.Changed, tt.changed, d.Reason)
			}
			want := p.State.ISR
			if tt.changed {
				want = tt.req.ISRIDs()
			}
			// A leader's ISR change keeps leader and leader epoch.
			wantState(t, d, p.State, 1, 5, want)
		})
	}
}

func TestAlterPartitionFencedCarriesLeaderHint(t *testing.T) {
	p, b := alterBase()
	_, err := AlterPartition(p, b, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 101, LeaderEpoch: 3, PartitionEpoch: 10, NewISR: isr(1)})
	e := kerr.As(err)
	if e == nil || e.Leader == nil || e.Leader.ID != 1 || e.Leader.LeaderEpoch != 5 {
		t.Fatalf("error %v has no leader hint {1, 5}", err)
	}
}
