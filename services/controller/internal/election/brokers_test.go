package election

import (
	"slices"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func TestOnBrokerFailure(t *testing.T) {
	tests := []struct {
		name        string
		p           Partition
		b           Brokers // after the failure
		unclean     bool
		changed     bool
		leader      int32
		isr         []int32
		wantUnclean bool
	}{
		{name: "leader fails: next ISR member leads",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(2, 3), changed: true, leader: 2, isr: ids(2, 3)},
		{name: "follower fails: ISR shrinks, leader epoch bumped",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(1, 3), changed: true, leader: 1, isr: ids(1, 3)},
		{name: "out-of-sync follower fails: nothing to write",
			p: part(ids(1, 2, 3), 1, 4, 1, 2), b: cluster(1, 2), changed: false, leader: 1, isr: ids(1, 2)},
		{name: "whole ISR fails, unclean off: ISR keeps the old leader, no leader",
			p: part(ids(1, 2, 3), 2, 4, 1, 2), b: cluster(3), changed: true, leader: NoLeader, isr: ids(2)},
		{name: "whole ISR fails, unclean on: out-of-sync replica leads",
			p: part(ids(1, 2, 3), 2, 4, 1, 2), b: cluster(3), unclean: true, changed: true, leader: 3, isr: ids(3), wantUnclean: true},
		{name: "every replica fails, unclean on: ISR kept, no leader",
			p: part(ids(1, 2, 3), 2, 4, 2, 3), b: cluster(), unclean: true, changed: true, leader: NoLeader, isr: ids(2)},
		{name: "leaderless partition, its last ISR member already dead: nothing to write",
			p: part(ids(1, 2), NoLeader, 4, 2), b: cluster(1), changed: false, leader: NoLeader, isr: ids(2)},
		{name: "shutting-down leader is left to controlled shutdown; dead follower removed",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(1, 2).stopping(1), unclean: true, changed: true, leader: 1, isr: ids(1, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := OnBrokerFailure(tt.p, tt.b, tt.unclean)
			if d.Changed != tt.changed || d.Unclean != tt.wantUnclean {
				t.Fatalf("changed=%v unclean=%v, want %v %v (%s)", d.Changed, d.Unclean, tt.changed, tt.wantUnclean, d.Reason)
			}
			epoch := tt.p.State.LeaderEpoch
			if tt.changed {
				epoch++
			}
			wantState(t, d, tt.p.State, tt.leader, epoch, tt.isr)
			if len(d.State.ISR) == 0 {
				t.Fatal("ISR emptied")
			}
		})
	}
}

func TestOnBrokerReturn(t *testing.T) {
	tests := []struct {
		name        string
		p           Partition
		b           Brokers // after the return
		unclean     bool
		changed     bool
		leader      int32
		isr         []int32
		wantUnclean bool
	}{
		{name: "partition with a leader is unchanged",
			p: part(ids(1, 2, 3), 2, 4, 2, 3), b: cluster(1, 2, 3), changed: false, leader: 2, isr: ids(2, 3)},
		{name: "last ISR member returns: it leads",
			p: part(ids(1, 2, 3), NoLeader, 4, 2), b: cluster(2), changed: true, leader: 2, isr: ids(2)},
		{name: "out-of-sync replica returns, unclean off: still offline",
			p: part(ids(1, 2, 3), NoLeader, 4, 2), b: cluster(1), changed: false, leader: NoLeader, isr: ids(2)},
		{name: "out-of-sync replica returns, unclean on: it leads",
			p: part(ids(1, 2, 3), NoLeader, 4, 2), b: cluster(1), unclean: true, changed: true, leader: 1, isr: ids(1), wantUnclean: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := OnBrokerReturn(tt.p, tt.b, tt.unclean)
			if d.Changed != tt.changed || d.Unclean != tt.wantUnclean {
				t.Fatalf("changed=%v unclean=%v, want %v %v (%s)", d.Changed, d.Unclean, tt.changed, tt.wantUnclean, d.Reason)
			}
			epoch := tt.p.State.LeaderEpoch
			if tt.changed {
				epoch++
			}
			wantState(t, d, tt.p.State, tt.leader, epoch, tt.isr)
		})
	}
}

// TestFailureAndReturnSequence walks one partition through the "all replicas
// die" story of Kafka's design docs, with unclean election off.
func TestFailureAndReturnSequence(t *testing.T) {
	p := part(ids(1, 2, 3), 1, 0, 1, 2, 3)
	step := func(d Decision, leader int32, isr ...int32) {
		t.Helper()
		if d.State.Leader != leader || !slices.Equal(d.State.ISR, isr) {
			t.Fatalf("state %v, want leader %d isr %v", d.State, leader, isr)
		}
		p.State = d.State
	}
	step(OnBrokerFailure(p, cluster(2, 3), false), 2, 2, 3)
	step(OnBrokerFailure(p, cluster(3), false), 3, 3)
	step(OnBrokerFailure(p, cluster(), false), NoLeader, 3)
	step(OnBrokerReturn(p, cluster(1), false), NoLeader, 3)
	step(OnBrokerReturn(p, cluster(1, 2), false), NoLeader, 3)
	step(OnBrokerReturn(p, cluster(1, 2, 3), false), 3, 3)
	if p.State.LeaderEpoch != 4 {
		t.Fatalf("leader epoch %d after four controller writes, want 4", p.State.LeaderEpoch)
	}
}

func TestOnControlledShutdown(t *testing.T) {
	tests := []struct {
		name    string
		p       Partition
		b       Brokers
		id      int32
		code    kerr.Code
		changed bool
		leader  int32
		isr     []int32
	}{
		{name: "leader: leadership moves, broker leaves the ISR",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(1, 2, 3), id: 1, changed: true, leader: 2, isr: ids(2, 3)},
		{name: "leader with no other ISR member: stays leader",
			p: part(ids(1, 2, 3), 1, 4, 1), b: cluster(1, 2, 3), id: 1, code: kerr.EligibleLeadersNotAvailable},
		{name: "follower in ISR: removed",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(1, 2, 3), id: 2, changed: true, leader: 1, isr: ids(1, 3)},
		{name: "follower out of the ISR: nothing to do",
			p: part(ids(1, 2, 3), 1, 4, 1, 3), b: cluster(1, 2, 3), id: 2, leader: 1, isr: ids(1, 3)},
		{name: "last ISR member of a leaderless partition: kept",
			p: part(ids(1, 2, 3), NoLeader, 4, 2), b: cluster(1, 2, 3), id: 2, leader: NoLeader, isr: ids(2)},
		{name: "single-replica partition: left alone",
			p: part(ids(1), 1, 4, 1), b: cluster(1), id: 1, leader: 1, isr: ids(1)},
		{name: "broker not assigned", p: part(ids(1, 2), 1, 4, 1, 2), b: cluster(1, 2, 3), id: 3, leader: 1, isr: ids(1, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(tt.b.ShuttingDown)
			d, err := OnControlledShutdown(tt.p, tt.b, tt.id)
			if len(tt.b.ShuttingDown) != before {
				t.Fatal("OnControlledShutdown modified the caller's broker view")
			}
			wantCode(t, err, tt.code)
			if tt.code != kerr.None {
				return
			}
			if d.Changed != tt.changed {
				t.Fatalf("changed = %v, want %v (%s)", d.Changed, tt.changed, d.Reason)
			}
			epoch := tt.p.State.LeaderEpoch
			if tt.changed {
				epoch++
			}
			wantState(t, d, tt.p.State, tt.leader, epoch, tt.isr)
		})
	}
}
