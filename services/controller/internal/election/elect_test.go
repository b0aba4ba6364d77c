package election

import (
	"testing"

	"tidemark.io/services/platform/kerr"
)

func TestElectOffline(t *testing.T) {
	tests := []struct {
		name        string
		p           Partition
		b           Brokers
		unclean     bool
		code        kerr.Code
		leader      int32
		isr         []int32
		wantUnclean bool
	}{
		{name: "first live ISR member in assignment order, not ISR order",
			p: part(ids(1, 2, 3), 1, 4, 1, 3, 2), b: cluster(2, 3), leader: 2, isr: ids(3, 2)},
		{name: "live replica outside the ISR is skipped",
			p: part(ids(1, 2, 3), 1, 4, 1, 3), b: cluster(2, 3), leader: 3, isr: ids(3)},
		{name: "shutting-down ISR member is not live",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(2, 3).stopping(2), leader: 3, isr: ids(3)},
		{name: "unclean allowed but a live ISR member exists: clean",
			p: part(ids(1, 2, 3), 1, 4, 1, 3), b: cluster(2, 3), unclean: true, leader: 3, isr: ids(3)},
		{name: "no live ISR member, unclean off",
			p: part(ids(1, 2, 3), 1, 4, 1), b: cluster(2, 3), code: kerr.EligibleLeadersNotAvailable},
		{name: "no live ISR member, unclean on: first live assigned replica, ISR just it",
			p: part(ids(1, 2, 3), 1, 4, 1), b: cluster(3, 2), unclean: true, leader: 2, isr: ids(2), wantUnclean: true},
		{name: "every replica dead, unclean on",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(4), unclean: true, code: kerr.EligibleLeadersNotAvailable},
		{name: "every replica dead, unclean off",
			p: part(ids(1, 2, 3), NoLeader, 4, 1), b: cluster(), code: kerr.EligibleLeadersNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ElectOffline(tt.p, tt.b, tt.unclean)
			wantCode(t, err, tt.code)
			if tt.code != kerr.None {
				return
			}
			wantState(t, d, tt.p.State, tt.leader, tt.p.State.LeaderEpoch+1, tt.isr)
			if d.Unclean != tt.wantUnclean || !d.Changed {
				t.Fatalf("unclean=%v changed=%v, want unclean=%v changed=true", d.Unclean, d.Changed, tt.wantUnclean)
			}
		})
	}
}

func TestElectPreferred(t *testing.T) {
	tests := []struct {
		name string
		p    Partition
		b    Brokers
		code kerr.Code
	}{
		{name: "preferred live and in ISR", p: part(ids(1, 2, 3), 2, 4, 2, 1, 3), b: cluster(1, 2, 3)},
		{name: "already leader", p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(1, 2, 3), code: kerr.ElectionNotNeeded},
		{name: "preferred dead", p: part(ids(1, 2, 3), 2, 4, 2, 1, 3), b: cluster(2, 3), code: kerr.PreferredLeaderNotAvailable},
		{name: "preferred not in ISR", p: part(ids(1, 2, 3), 2, 4, 2, 3), b: cluster(1, 2, 3), code: kerr.PreferredLeaderNotAvailable},
		{name: "preferred shutting down", p: part(ids(1, 2, 3), 2, 4, 2, 1, 3), b: cluster(1, 2, 3).stopping(1), code: kerr.PreferredLeaderNotAvailable},
		{name: "no assignment", p: part(nil, 2, 4, 2), b: cluster(2), code: kerr.PreferredLeaderNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ElectPreferred(tt.p, tt.b)
			wantCode(t, err, tt.code)
			if tt.code == kerr.None {
				// The ISR is untouched; only the leader moves.
				wantState(t, d, tt.p.State, 1, 5, tt.p.State.ISR)
			}
		})
	}
}

func TestElectControlledShutdown(t *testing.T) {
	tests := []struct {
		name   string
		p      Partition
		b      Brokers
		code   kerr.Code
		leader int32
		isr    []int32
	}{
		{name: "next ISR member in assignment order",
			p: part(ids(1, 2, 3), 1, 4, 1, 3, 2), b: cluster(1, 2, 3).stopping(1), leader: 2, isr: ids(3, 2)},
		{name: "skips other shutting-down brokers and drops them from the ISR",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(1, 2, 3).stopping(1, 2), leader: 3, isr: ids(3)},
		{name: "skips dead ISR members but leaves them in the ISR",
			p: part(ids(1, 2, 3), 1, 4, 1, 2, 3), b: cluster(1, 3).stopping(1), leader: 3, isr: ids(2, 3)},
		{name: "no other ISR member",
			p: part(ids(1, 2, 3), 1, 4, 1), b: cluster(1, 2, 3).stopping(1), code: kerr.EligibleLeadersNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ElectControlledShutdown(tt.p, tt.b)
			wantCode(t, err, tt.code)
			if tt.code == kerr.None {
				wantState(t, d, tt.p.State, tt.leader, 5, tt.isr)
			}
		})
	}
}

func TestElectUnclean(t *testing.T) {
	tests := []struct {
		name        string
		p           Partition
		b           Brokers
		code        kerr.Code
		leader      int32
		isr         []int32
		wantUnclean bool
	}{
		{name: "live leader: not needed", p: part(ids(1, 2), 1, 4, 1), b: cluster(1, 2), code: kerr.ElectionNotNeeded},
		{name: "no leader but a live ISR member: elected cleanly",
			p: part(ids(1, 2, 3), NoLeader, 4, 3), b: cluster(1, 3), leader: 3, isr: ids(3)},
		{name: "dead leader, only out-of-sync replicas live",
			p: part(ids(1, 2, 3), 1, 4, 1), b: cluster(3), leader: 3, isr: ids(3), wantUnclean: true},
		{name: "shutting-down leader counts as not live",
			p: part(ids(1, 2), 1, 4, 1), b: cluster(1, 2).stopping(1), leader: 2, isr: ids(2), wantUnclean: true},
		{name: "nothing live", p: part(ids(1, 2), NoLeader, 4, 1), b: cluster(5), code: kerr.EligibleLeadersNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ElectUnclean(tt.p, tt.b)
			wantCode(t, err, tt.code)
			if tt.code != kerr.None {
				return
			}
			wantState(t, d, tt.p.State, tt.leader, 5, tt.isr)
			if d.Unclean != tt.wantUnclean {
				t.Fatalf("unclean = %v, want %v", d.Unclean, tt.wantUnclean)
			}
		})
	}
}

func TestDecisionsDoNotAliasInput(t *testing.T) {
	p := part(ids(1, 2, 3), 2, 4, 2, 1, 3)
	d, err := ElectPreferred(p, cluster(1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	d.State.ISR[0] = 99
	if p.State.ISR[0] != 2 {
		t.Fatal("decision shares its ISR with the input state")
	}
}

// A replica whose log was lost with a replaced log dir (Brokers.LostLog) is
// elected only by an unclean election, only when no live replica has a log
// at all, and then leads from an empty log: EmptyLog, with a new epoch.
func TestALostLogLeadsOnlyByAnUncleanElection(t *testing.T) {
	lost := func(b Brokers, ids ...int32) Brokers {
		b.LostLog = map[int32]bool{}
		for _, id := range ids {
			b.LostLog[id] = true
		}
		return b
	}
	rf1 := part(ids(1), NoLeader, 4, 1)
	// Broker 1 is registered but reports its replica's log lost, so the
	// view leaves it out of Epochs.
	view := lost(cluster(2), 1)
	if _, err := ElectOffline(rf1, view, false); kerr.CodeOf(err) != kerr.EligibleLeadersNotAvailable {
		t.Fatalf("offline election without unclean: %v", err)
	}
	if _, err := ElectPreferred(rf1, view); kerr.CodeOf(err) != kerr.PreferredLeaderNotAvailable {
		t.Fatalf("preferred election: %v", err)
	}
	for name, elect := range map[string]func() (Decision, error){
		"ElectLeaders UNCLEAN":           func() (Decision, error) { return ElectUnclean(rf1, view) },
		"unclean.leader.election.enable": func() (Decision, error) { return ElectOffline(rf1, view, true) },
	} {
		d, err := elect()
		wantCode(t, err, kerr.None)
		wantState(t, d, rf1.State, 1, 5, ids(1))
		if !d.Unclean || !d.EmptyLog {
			t.Fatalf("%s: unclean %v, empty log %v; want both", name, d.Unclean, d.EmptyLog)
		}
	}
	// A live out-of-sync replica still has records: it wins.
	rf2 := part(ids(1, 2), NoLeader, 4, 1)
	d, err := ElectUnclean(rf2, view)
	wantCode(t, err, kerr.None)
	wantState(t, d, rf2.State, 2, 5, ids(2))
	if d.EmptyLog {
		t.Fatal("an out-of-sync replica with a log elected as from an empty one")
	}
	// A broker shutting down is not elected from empty either.
	stopping := lost(cluster(2), 1)
	stopping.ShuttingDown[1] = true
	if _, err := ElectUnclean(rf1, stopping); kerr.CodeOf(err) != kerr.EligibleLeadersNotAvailable {
		t.Fatalf("unclean election of a shutting-down lost log: %v", err)
	}
}
