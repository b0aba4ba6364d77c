package scenario

import (
	"strings"
	"testing"
	"time"
)

// Each scenario's verdict on a recorded trace that goes as the note says,
// and on traces that contradict it: the check must be able to fail.
func TestVerdicts(t *testing.T) {
	hwGood := hwFacts{Leader: 1, Followers: []int32{2, 3}, Records: 2, States: []hwState{
		{LeaderLEO: 2, LeaderHW: 0, LEO: []int64{0, 0}, HW: []int64{0, 0}, ISR: []int32{1, 2, 3}},
		{LeaderLEO: 2, LeaderHW: 0, LEO: []int64{2, 0}, HW: []int64{0, 0}, ISR: []int32{1, 2, 3}},
		{LeaderLEO: 2, LeaderHW: 0, LEO: []int64{2, 2}, HW: []int64{0, 0}, ISR: []int32{1, 2, 3}},
		{LeaderLEO: 2, LeaderHW: 2, LEO: []int64{2, 2}, HW: []int64{0, 0}, ISR: []int32{1, 2, 3}},
		{LeaderLEO: 2, LeaderHW: 2, LEO: []int64{2, 2}, HW: []int64{2, 2}, ISR: []int32{1, 2, 3}},
	}}
	// The HW at the leader's LEO while follower 3 had nothing: a max-LEO HW.
	hwMax := hwGood
	hwMax.States = []hwState{
		{LeaderLEO: 2, LeaderHW: 0, LEO: []int64{0, 0}, HW: []int64{0, 0}, ISR: []int32{1, 2, 3}},
		{LeaderLEO: 2, LeaderHW: 2, LEO: []int64{2, 0}, HW: []int64{2, 0}, ISR: []int32{1, 2, 3}},
		{LeaderLEO: 2, LeaderHW: 2, LEO: []int64{2, 2}, HW: []int64{2, 2}, ISR: []int32{1, 2, 3}},
	}
	// The slowed follower left the ISR: the HW moved by the shrink.
	hwShrunk := hwGood
	hwShrunk.States = append([]hwState(nil), hwGood.States...)
	hwShrunk.States[3].ISR = []int32{1, 2}
	// Never committed.
	hwStuck := hwGood
	hwStuck.States = hwGood.States[:3]

	lagGood := lagFacts{Leader: 1, Follower: 3, LagTime: 2 * time.Second, ShrunkAfter: 2500 * time.Millisecond,
		ISRWhileOut: []int32{1, 2}, AckedWhileOut: 50, HWAtShrink: 10, HWBeforeRejoin: 60, Rejoined: true, Acked: 100}
	lagEarly, lagNever, lagLost := lagGood, lagGood, lagGood
	lagEarly.ShrunkAfter = 300 * time.Millisecond
	lagNever.ShrunkAfter, lagNever.Rejoined = 0, false
	lagLost.Lost = 3

	crashGood := crashFacts{OldLeader: 1, NewLeader: 2, OldISR: []int32{1, 2, 3}, OldEpoch: 0, NewEpoch: 1, AckedAfter: 40, Acked: 100, Rejoined: true}
	crashLost, crashOutside, crashEpoch := crashGood, crashGood, crashGood
	crashLost.Lost, crashLost.LostSample = 2, []string{"v-7", "v-8"}
	crashOutside.OldISR = []int32{1, 3}
	crashEpoch.NewEpoch = 0

	partGood := partitionFacts{Leader: 1, Follower: 2, Left: true, SessionKept: true, AckedWhileOut: 30, Leaders: []int32{1}, CaughtUp: true, Acked: 90}
	partBrain, partStuck, partDead := partGood, partGood, partGood
	partBrain.Leaders = []int32{1, 2}
	partStuck.AckedWhileOut = 0
	partDead.SessionKept = false

	minGood := minISRFacts{Leader: 1, Down: []int32{2, 3}, ISRDown: []int32{1}, Refused: 3, RefusedCodes: map[string]int{"NOT_ENOUGH_REPLICAS": 3},
		LEOBefore: 3, LEOAfterRefusal: 3, AckedAfter: 3, Recovered: true}
	minAcked, minAppended, minOtherCode := minGood, minGood, minGood
	minAcked.AckedWhileDown, minAcked.Refused, minAcked.RefusedCodes = 3, 0, map[string]int{}
	minAppended.LEOAfterRefusal, minAppended.ReadRefused = 6, 3
	minOtherCode.RefusedCodes = map[string]int{"REQUEST_TIMED_OUT": 3}

	uncleanGood := uncleanFacts{OldLeader: 1, OfflineHeld: 4 * time.Second, LeaderWhileOff: -1, NewLeader: 2, OutOfSync: []int32{2, 3},
		AckedReplicated: 5, AckedLeaderOnly: 5, Lost: 5}
	uncleanLedOff, uncleanNoLoss, uncleanLostAll := uncleanGood, uncleanGood, uncleanGood
	uncleanLedOff.LeaderWhileOff, uncleanLedOff.OfflineHeld = 2, 0
	uncleanNoLoss.Lost = 0
	uncleanLostAll.LostReplicated = 5

	fastGood := fastFacts{Leaders: []int32{1, 2, 1, 2}, Epochs: []int32{0, 1, 2, 3}, Acked: 100, FinalLEOs: []int64{100, 100, 100}, FinalHW: 100,
		ChangesWanted: 3, AckedMeanwhile: 80}
	fastDiverged, fastEpoch, fastLost := fastGood, fastGood, fastGood
	fastDiverged.FinalLEOs = []int64{100, 98, 100}
	fastEpoch.Epochs = []int32{0, 1, 1, 2}
	fastLost.Lost, fastLost.LostSample = 1, []string{"v-3"}

	prefGood := preferredFacts{Preferred: 1, MovedTo: 2, AfterRestart: 2, Final: 1, EpochBefore: 1, EpochAfter: 2, ElectionResult: "ok"}
	prefStayed, prefNeverMoved := prefGood, prefGood
	prefStayed.Final, prefStayed.EpochAfter = 2, 1
	prefNeverMoved.MovedTo = 1

	ctlGood := controllerFacts{Old: 1, New: 2, OldEpoch: 1, NewEpoch: 2, ActiveAfterResume: 2, EpochAfterResume: 2, WritesAfterFailover: 3}
	ctlZombie, ctlSameEpoch := ctlGood, ctlGood
	ctlZombie.ActiveAfterResume, ctlZombie.EpochAfterResume = 1, 1
	ctlSameEpoch.NewEpoch = 1
	ctlActed := ctlGood
	ctlActed.ZombieAnswer = "ok"

	cases := []struct {
		name string
		f    facts
		want string // "" for as the note says, else a piece of a finding
	}{
		{"hw as the note says", hwGood, ""},
		{"hw beyond an in-sync follower's LEO", hwMax, "not the min LEO of the ISR"},
		{"hw never reached the records", hwStuck, "never reached"},
		{"hw moved by an ISR shrink", hwShrunk, "the ISR shrank"},
		{"lag as the note says", lagGood, ""},
		{"lag: removed before the lag time", lagEarly, "before replica.lag.time.max.ms"},
		{"lag: never removed", lagNever, "never left the ISR"},
		{"lag: lost writes", lagLost, "not read back"},
		{"crash as the note says", crashGood, ""},
		{"crash: acked writes lost", crashLost, "lost"},
		{"crash: leader from outside the ISR", crashOutside, "not in the ISR"},
		{"crash: epoch unchanged", crashEpoch, "epoch did not increase"},
		{"partition as the note says", partGood, ""},
		{"partition: a second leader", partBrain, "leadership moved"},
		{"partition: writes stopped", partStuck, "no write was acknowledged"},
		{"partition: the follower's session lost", partDead, "lost its session with the controller"},
		{"min isr as the note says", minGood, ""},
		{"min isr: acked under min ISR", minAcked, "acknowledged with ISR"},
		{"min isr: refused writes appended", minAppended, "were appended"},
		{"min isr: refused with another error", minOtherCode, "NOT_ENOUGH_REPLICAS"},
		{"unclean as the note says", uncleanGood, ""},
		{"unclean: led while off", uncleanLedOff, "led while unclean election was off"},
		{"unclean: nothing lost", uncleanNoLoss, "no acknowledged write was lost"},
		{"unclean: replicated writes lost", uncleanLostAll, "while the ISR was full were lost"},
		{"fast changes as the note says", fastGood, ""},
		{"fast changes: replicas diverged", fastDiverged, "did not converge"},
		{"fast changes: epoch not bumped", fastEpoch, "epoch did not increase"},
		{"fast changes: lost", fastLost, "lost"},
		{"preferred as the note says", prefGood, ""},
		{"preferred: leadership not handed back", prefStayed, "not the preferred"},
		{"preferred: never moved", prefNeverMoved, "did not move off"},
		{"controller as the note says", ctlGood, ""},
		{"controller: the zombie back in office", ctlZombie, "after the old controller 1 resumed"},
		{"controller: epoch unchanged", ctlSameEpoch, "controller_epoch did not move"},
		{"controller: the zombie acted", ctlActed, "acted on a request after its term ended"},
	}
	for _, c := range cases {
		got := c.f.Verdict()
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: findings %q, want none", c.name, got)
		case c.want != "" && !strings.Contains(strings.Join(got, "\n"), c.want):
			t.Errorf("%s: findings %q, want one saying %q", c.name, got, c.want)
		}
		if c.f.Explain() == "" {
			t.Errorf("%s: empty explanation", c.name)
		}
	}
}

// Every scenario is listed, findable, and explains its rule.
func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All() {
		if seen[s.Name] {
			t.Errorf("scenario %s listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.Title == "" || s.Note == "" || len(s.Rule) < 100 || s.play == nil {
			t.Errorf("scenario %s lacks a title, a note section, a rule or a play", s.Name)
		}
	}
	for _, n := range []string{"hw-walkthrough", "follower-lag", "leader-crash", "network-partition", "isolated-leader", "partitioned-leader", "min-isr", "unclean-election",
		"kip101", "fast-leader-changes", "preferred-election", "controller-failover"} {
		if !seen[n] {
			t.Errorf("scenario %s missing", n)
		}
	}
	if _, err := Find("nosuch"); err == nil || !strings.Contains(err.Error(), "hw-walkthrough") {
		t.Errorf("Find(nosuch) = %v, want an error listing the scenarios", err)
	}
}

// kip101 fails unless the high-watermark run lost the acknowledged write
// and the leader-epoch run kept it, with the restarted follower elected.
func TestKIP101Verdict(t *testing.T) {
	run := func(mode string, kept bool) kip101Run {
		return kip101Run{Mode: mode, Leader: 1, Next: 2, Last: 3, Value: "acked-" + mode, Acked: true, NewLeader: 3, Kept: kept}
	}
	good := kip101Facts{Runs: []kip101Run{run(partitionModeHW, false), run(partitionModeLE, true)}}
	if v := good.Verdict(); len(v) != 0 {
		t.Errorf("lost with high-watermark, kept with leader-epoch: %v", v)
	}
	if !strings.Contains(good.Explain(), "LOST") || !strings.Contains(good.Explain(), "KEPT") {
		t.Errorf("the side-by-side table shows no LOST/KEPT:\n%s", good.Explain())
	}
	for name, f := range map[string]kip101Facts{
		"high-watermark kept":      {Runs: []kip101Run{run(partitionModeHW, true), run(partitionModeLE, true)}},
		"leader-epoch lost":        {Runs: []kip101Run{run(partitionModeHW, false), run(partitionModeLE, false)}},
		"one run only":             {Runs: []kip101Run{run(partitionModeHW, false)}},
		"another broker elected":   {Runs: []kip101Run{func() kip101Run { r := run(partitionModeHW, false); r.NewLeader = 1; return r }(), run(partitionModeLE, true)}},
		"write never acknowledged": {Runs: []kip101Run{func() kip101Run { r := run(partitionModeHW, false); r.Acked = false; return r }(), run(partitionModeLE, true)}},
	} {
		if v := f.Verdict(); len(v) == 0 {
			t.Errorf("%s: no finding", name)
		}
	}
}

// hw-walkthrough's narration shows the operands of the leader's HW min():
// a follower the leader has had no fetch from yet is "?", not -1, which
// would make the min shown false.
func TestHWNarrationUnknownFollowerLEO(t *testing.T) {
	f := hwFacts{Leader: 3, Followers: []int32{1, 2}, Records: 2}
	s := hwState{LeaderLEO: 2, LeaderHW: 0, LEO: []int64{0, 0}, HW: []int64{0, 0}, Known: []int64{-1, -1}, ISR: []int32{3, 1, 2}}
	got := hwNarrate(f, s)
	if strings.Contains(got, "-1") || !strings.Contains(got, "HW 0 = min(2, ?, ?)") || !strings.Contains(got, "not fetched yet") {
		t.Fatalf("narration: %q", got)
	}
	s.Known = []int64{0, 0}
	if got := hwNarrate(f, s); !strings.Contains(got, "HW 0 = min(2, 0, 0):") || strings.Contains(got, "?") {
		t.Fatalf("narration with known LEOs: %q", got)
	}
}

// preferred-election's verdict needs the election itself to succeed:
// leadership back on the preferred broker may be the controller's own
// rebalance (auto.leader.rebalance.enable).
func TestPreferredVerdictChecksTheElection(t *testing.T) {
	f := preferredFacts{Preferred: 1, MovedTo: 2, AfterRestart: 2, Final: 1, EpochBefore: 1, EpochAfter: 2,
		ElectionResult: "ERROR_CODE_ELECTION_NOT_NEEDED"}
	v := f.Verdict()
	if len(v) != 1 || !strings.Contains(v[0], "ELECTION_NOT_NEEDED") {
		t.Fatalf("a run whose preferred election did not succeed (%s): verdict %q", f.ElectionResult, v)
	}
}

// isolated-leader fails unless a new leader with a higher epoch was
// elected, the isolated old leader refused both writes, its orphans were
// truncated and it rejoined as a follower with nothing acknowledged lost.
func TestIsolatedLeaderVerdict(t *testing.T) {
	good := isolationFacts{OldLeader: 1, NewLeader: 2, OldEpoch: 0, NewEpoch: 1, Orphans: 3,
		Refused1: "NOT_LEADER_OR_FOLLOWER", RefusedAll: "NOT_LEADER_OR_FOLLOWER", Rejoined: true, Follows: true, Acked: 10}
	if v := good.Verdict(); len(v) != 0 {
		t.Fatalf("the note's outcome judged failed: %v", v)
	}
	for name, bad := range map[string]func(f *isolationFacts){
		"no election":           func(f *isolationFacts) { f.NewLeader = 1 },
		"same epoch":            func(f *isolationFacts) { f.NewEpoch = 0 },
		"no orphan":             func(f *isolationFacts) { f.Orphans = 0 },
		"acks=1 acknowledged":   func(f *isolationFacts) { f.Refused1 = "" },
		"acks=all acknowledged": func(f *isolationFacts) { f.RefusedAll = "" },
		"orphan kept":           func(f *isolationFacts) { f.OrphansKept = 1 },
		"not rejoined":          func(f *isolationFacts) { f.Rejoined = false },
		"leads again":           func(f *isolationFacts) { f.Follows = false },
		"acknowledged lost":     func(f *isolationFacts) { f.Lost = 1 },
	} {
		f := good
		bad(&f)
		if len(f.Verdict()) == 0 {
			t.Errorf("%s: judged as the note says", name)
		}
	}
}
