package group

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/kerr"
)

// The state machine is driven by scripts: each step acts on the group at a
// time (ms since the start) and states what must come out: the immediate
// answer, the answers delivered to parked requests, and the group's state
// and generation afterwards.

var lim = Limits{MinSessionTimeout: 100 * time.Millisecond, MaxSessionTimeout: time.Minute, InitialRebalanceDelay: 0, MaxSize: 3}

var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// harness keeps the parked requests of a script.
type harness struct {
	t      *testing.T
	g      *Group
	joins  map[string]JoinResult // delivered join answers by member
	syncs  map[string]SyncResult
	lim    Limits
	nextID int
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, g: NewGroup("g", t0), joins: map[string]JoinResult{}, syncs: map[string]SyncResult{}, lim: lim}
}

func (h *harness) take(eff Effects) {
	for id, r := range eff.Joins {
		h.joins[id] = r
	}
	for id, r := range eff.Syncs {
		h.syncs[id] = r
	}
}

var protos = []Protocol{{Name: "range", Metadata: []byte("m")}}

// join sends a JoinGroup; the member id "" asks for a new one. It returns
// the immediate answer (nil when parked) and the member id it concerns.
func (h *harness) join(ms int, member, instance string, ps []Protocol) (*JoinResult, string) {
	h.nextID++
	res, parked, eff := h.g.Join(at(ms), h.lim, JoinRequest{MemberID: member, InstanceID: instance, ClientID: "c",
		SessionTimeout: time.Second, RebalanceTimeout: 2 * time.Second, ProtocolType: "consumer", Protocols: ps,
		NewMemberID: fmt.Sprintf("m%d", h.nextID)})
	h.take(eff)
	if res != nil {
		return res, res.MemberID
	}
	return nil, parked
}

// newMember joins with both KIP-394 round trips and returns the parked id.
func (h *harness) newMember(ms int) string {
	h.t.Helper()
	res, id := h.join(ms, "", "", protos)
	if res == nil || res.Err == nil || res.Err.Code != kerr.MemberIDRequired || res.Err.MemberID != id {
		h.t.Fatalf("first join: %+v, want MEMBER_ID_REQUIRED naming the id", res)
	}
	res, id2 := h.join(ms, id, "", protos)
	if res != nil || id2 != id {
		h.t.Fatalf("second join of %s answered at once: %+v", id, res)
	}
	return id
}

func (h *harness) wantState(s State, gen int32) {
	h.t.Helper()
	if h.g.State != s || h.g.Generation != gen {
		h.t.Fatalf("group %s generation %d, want %s generation %d", h.g.State, h.g.Generation, s, gen)
	}
}

func (h *harness) wantJoined(member string, gen int32) JoinResult {
	h.t.Helper()
	r, ok := h.joins[member]
	if !ok {
		h.t.Fatalf("no join answer for %s (have %v)", member, h.joins)
	}
	delete(h.joins, member)
	if r.Err != nil || r.Generation != gen {
		h.t.Fatalf("join answer for %s: %+v, want generation %d", member, r, gen)
	}
	return r
}

func wantErr(t *testing.T, what string, err *kerr.Error, code kerr.Code) {
	t.Helper()
	if err == nil || err.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

func (h *harness) syncLeader(ms int, leader string, gen int32) {
	h.t.Helper()
	assign := map[string][]byte{}
	for _, m := range h.g.Members() {
		assign[m.ID] = []byte("to-" + m.ID)
	}
	res, eff := h.g.Sync(at(ms), leader, "", gen, "consumer", "range", assign)
	h.take(eff)
	if res != nil {
		h.t.Fatalf("leader sync answered at once: %+v", res)
	}
	if r := h.syncs[leader]; r.Err != nil || string(r.Assignment) != "to-"+leader {
		h.t.Fatalf("leader's sync answer %+v", r)
	}
}

func TestFirstMemberJoinsSyncsAndIsStable(t *testing.T) {
	h := newHarness(t)
	a := h.newMember(0)
	h.wantState(CompletingRebalance, 1)
	r := h.wantJoined(a, 1)
	if r.Leader != a || len(r.Members) != 1 || r.Protocol != "range" {
		t.Fatalf("leader's answer %+v", r)
	}
	h.syncLeader(10, a, 1)
	h.wantState(Stable, 1)
	if err := h.g.Heartbeat(at(20), a, "", 1); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
}

func TestSecondMemberRebalancesAndHeartbeatSaysSo(t *testing.T) {
	h := newHarness(t)
	a := h.newMember(0)
	h.wantJoined(a, 1)
	h.syncLeader(0, a, 1)
	b := h.newMember(100)
	h.wantState(PreparingRebalance, 1)
	wantErr(t, "heartbeat during the join phase", h.g.Heartbeat(at(110), a, "", 1), kerr.RebalanceInProgress)
	// Commits of the old generation are still allowed while preparing (a
	// member commits before it rejoins), not once the join phase ended.
	if err := h.g.CheckCommit(at(120), a, "", 1); err != nil {
		t.Fatalf("commit while preparing: %v", err)
	}
	if res, _ := h.join(130, a, "", protos); res != nil {
		t.Fatalf("rejoin answered at once: %+v", res)
	}
	h.wantState(CompletingRebalance, 2)
	ra, rb := h.wantJoined(a, 2), h.wantJoined(b, 2)
	if ra.Leader != a || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("answers %+v / %+v", ra, rb)
	}
	wantErr(t, "commit while completing", h.g.CheckCommit(at(140), a, "", 2), kerr.RebalanceInProgress)
	// The follower syncs first and waits for the leader.
	res, eff := h.g.Sync(at(150), b, "", 2, "", "", nil)
	h.take(eff)
	if res != nil {
		t.Fatalf("follower sync answered before the leader's: %+v", res)
	}
	h.syncLeader(160, a, 2)
	if r := h.syncs[b]; r.Err != nil || string(r.Assignment) != "to-"+b {
		t.Fatalf("follower's assignment %+v", r)
	}
	h.wantState(Stable, 2)
	wantErr(t, "stale generation", h.g.CheckCommit(at(170), a, "", 1), kerr.IllegalGeneration)
	wantErr(t, "unknown member", h.g.CheckCommit(at(170), "zz", "", 2), kerr.UnknownMemberID)
}

// twoMembers starts a group of two through the delayed first rebalance.
func twoMembers(h *harness) (string, string) {
	h.lim.InitialRebalanceDelay = 100 * time.Millisecond
	a := h.newMember(0)
	b := h.newMember(0)
	h.take(h.g.Tick(at(0)))
	h.wantState(PreparingRebalance, 0)
	h.take(h.g.Tick(at(100)))
	h.wantState(CompletingRebalance, 1)
	return a, b
}

func TestSessionTimeoutRemovesSilentMember(t *testing.T) {
	h := newHarness(t)
	a, b := twoMembers(h)
	h.wantJoined(a, 1)
	h.wantJoined(b, 1)
	h.syncLeader(100, a, 1)
	if r, ok := h.syncs[b]; ok {
		t.Fatalf("b got an assignment without syncing: %+v", r)
	}
	// a heartbeats every 300ms; b is silent. Sessions are 1s, b's from
	// the leader's sync at 100.
	for ms := 400; ms < 1100; ms += 300 {
		if err := h.g.Heartbeat(at(ms), a, "", 1); err != nil {
			t.Fatalf("heartbeat at %d: %v", ms, err)
		}
		h.take(h.g.Tick(at(ms)))
		h.wantState(Stable, 1)
	}
	h.take(h.g.Tick(at(1100)))
	if _, ok := h.g.Member(b); ok {
		t.Fatal("b outlived its session")
	}
	h.wantState(PreparingRebalance, 1)
	wantErr(t, "heartbeat", h.g.Heartbeat(at(1110), a, "", 1), kerr.RebalanceInProgress)
	h.join(1120, a, "", protos)
	h.wantState(CompletingRebalance, 2)
	if r := h.wantJoined(a, 2); len(r.Members) != 1 {
		t.Fatalf("generation 2 members %v", r.Members)
	}
}

func TestRebalanceDeadlineDropsMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t)
	a, b := twoMembers(h)
	h.wantJoined(a, 1)
	h.wantJoined(b, 1)
	h.syncLeader(100, a, 1)
	// a rejoins with new metadata; b keeps heartbeating but never rejoins.
	h.join(200, a, "", []Protocol{{Name: "range", Metadata: []byte("new")}})
	h.wantState(PreparingRebalance, 1)
	for ms := 400; ms < 2200; ms += 300 {
		h.g.Heartbeat(at(ms), b, "", 1)
		h.take(h.g.Tick(at(ms)))
		h.wantState(PreparingRebalance, 1)
	}
	h.take(h.g.Tick(at(2200))) // the rebalance timeout (2s) has passed
	h.wantState(CompletingRebalance, 2)
	h.wantJoined(a, 2)
	if _, ok := h.g.Member(b); ok {
		t.Fatal("b stayed without rejoining")
	}
}

func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	// A static member joins at once (no MEMBER_ID_REQUIRED).
	res, a := h.join(0, "", "i1", protos)
	if res != nil {
		t.Fatalf("static join: %+v", res)
	}
	h.wantJoined(a, 1)
	h.syncLeader(0, a, 1)
	res, a2 := h.join(50, "", "i1", protos)
	if res == nil || res.Err != nil || a2 == a || res.Generation != 1 || !res.SkipAssignment || res.Leader != a2 {
		t.Fatalf("static rejoin: %+v", res)
	}
	h.wantState(Stable, 1)
	wantErr(t, "old id heartbeat", h.g.Heartbeat(at(60), a, "i1", 1), kerr.FencedInstanceID)
	wantErr(t, "old id commit", h.g.CheckCommit(at(60), a, "i1", 1), kerr.FencedInstanceID)
	if err := h.g.CheckCommit(at(60), a2, "i1", 1); err != nil {
		t.Fatalf("new id commit: %v", err)
	}
	if r, eff := h.g.Sync(at(70), a2, "i1", 1, "", "", nil); r == nil || r.Err != nil || string(r.Assignment) != "to-"+a {
		t.Fatalf("the new id gets the old assignment: %+v %+v", r, eff)
	}
	// New metadata for the same protocol (a restarted consumer's
	// subscription bytes always differ) does not rebalance, as in Kafka.
	res, a3 := h.join(80, "", "i1", []Protocol{{Name: "range", Metadata: []byte("other")}})
	if res == nil || res.Err != nil || res.Generation != 1 || !res.SkipAssignment {
		t.Fatalf("static rejoin with new metadata for the same protocol: %+v, want its old place at once", res)
	}
	h.wantState(Stable, 1)
	// A rejoin that changes the selected protocol rebalances.
	res, a4 := h.join(90, "", "i1", []Protocol{{Name: "sticky", Metadata: []byte("s")}, {Name: "range", Metadata: []byte("r")}})
	if res != nil {
		t.Fatalf("static rejoin changing the selected protocol answered at once: %+v", res)
	}
	h.wantState(CompletingRebalance, 2)
	h.wantJoined(a4, 2)
	_ = a3
}

// joinStatic sends a static member's JoinGroup with a session (30 s) longer
// than its rebalance timeout (2 s), as restarting static members have.
func (h *harness) joinStatic(ms int, member, instance, metadata string) (*JoinResult, string) {
	h.nextID++
	res, parked, eff := h.g.Join(at(ms), h.lim, JoinRequest{MemberID: member, InstanceID: instance, ClientID: "c",
		SessionTimeout: 30 * time.Second, RebalanceTimeout: 2 * time.Second, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range", Metadata: []byte(metadata)}}, NewMemberID: fmt.Sprintf("m%d", h.nextID)})
	h.take(eff)
	if res != nil {
		return res, res.MemberID
	}
	return nil, parked
}

// KIP-345: a static member that has not rejoined when someone else's join
// phase ends keeps its place, as in Kafka: the leader assigns it partitions
// and it gets them back, without another rebalance, when it returns within
// its session. Before, it was removed at the deadline, so a restart during
// a rebalance moved its partitions away and its return rebalanced again.
// Its session still ends it.
func TestStaticMemberKeepsItsPlaceThroughSomeoneElsesRebalance(t *testing.T) {
	h := newHarness(t)
	_, a := h.joinStatic(0, "", "ia", "x")
	h.wantJoined(a, 1)
	_, b := h.joinStatic(0, "", "ib", "x")
	h.joinStatic(0, a, "ia", "x")
	h.wantJoined(a, 2)
	h.wantJoined(b, 2)
	h.syncLeader(10, a, 2)
	h.wantState(Stable, 2)

	// b is restarting when a's subscription changes.
	h.joinStatic(100, a, "ia", "y")
	h.take(h.g.Tick(at(2200))) // past the rebalance timeout
	h.wantState(CompletingRebalance, 3)
	r := h.wantJoined(a, 3)
	if _, ok := h.g.Member(b); !ok || len(r.Members) != 2 || r.Leader != a {
		t.Fatalf("static member %s removed at the rebalance deadline (in the group: %v); the leader's join answer %+v", b, ok, r)
	}
	h.syncLeader(2300, a, 3)
	h.wantState(Stable, 3)

	// b returns: its place and assignment, no rebalance.
	res, b2 := h.joinStatic(5000, "", "ib", "x")
	if res == nil || res.Err != nil || res.Generation != 3 {
		t.Fatalf("b's return: %+v, want generation 3 at once", res)
	}
	if sr, _ := h.g.Sync(at(5010), b2, "ib", 3, "", "", nil); sr == nil || sr.Err != nil || string(sr.Assignment) != "to-"+b {
		t.Fatalf("b's sync after its return: %+v, want the assignment the leader gave it while it was away", sr)
	}
	h.wantState(Stable, 3)

	// Its session ends it if it goes quiet.
	if err := h.g.Heartbeat(at(30000), a, "ia", 3); err != nil {
		t.Fatal(err)
	}
	h.take(h.g.Tick(at(35011)))
	if _, ok := h.g.Member(b2); ok || h.g.State != PreparingRebalance {
		t.Fatalf("after b's session: still a member %v, group %s", ok, h.g.State)
	}
}

// A join phase that ends with only static members that did not rejoin has
// no one to compute an assignment: it waits for them (Kafka postpones the
// same way) rather than starting a generation without a leader.
func TestJoinPhaseWithOnlyAbsentStaticMembersWaits(t *testing.T) {
	h := newHarness(t)
	_, a := h.joinStatic(0, "", "ia", "x")
	h.wantJoined(a, 1)
	_, b := h.joinStatic(0, "", "ib", "x")
	h.joinStatic(0, a, "ia", "x")
	h.wantJoined(a, 2)
	h.wantJoined(b, 2)
	h.syncLeader(10, a, 2)
	// a leaves; b is away and does not rejoin within the timeout.
	_, eff := h.g.Leave(at(100), []MemberIdentity{{InstanceID: "ia"}})
	h.take(eff)
	h.take(h.g.Tick(at(2200)))
	h.wantState(PreparingRebalance, 2)
	if _, ok := h.g.Member(b); !ok {
		t.Fatal("the absent static member was removed")
	}
	// b rejoins and leads the next generation.
	if res, _ := h.joinStatic(3000, b, "ib", "x"); res != nil {
		t.Fatalf("b's rejoin answered at once: %+v", res)
	}
	r := h.wantJoined(b, 3)
	if r.Leader != b {
		t.Fatalf("leader %q, want %q", r.Leader, b)
	}
}

func TestLeaveAndEmpty(t *testing.T) {
	h := newHarness(t)
	a := h.newMember(0)
	h.wantJoined(a, 1)
	h.syncLeader(0, a, 1)
	errs, eff := h.g.Leave(at(10), []MemberIdentity{{MemberID: a}, {MemberID: "ghost"}})
	h.take(eff)
	if errs[0] != nil || errs[1] == nil || errs[1].Code != kerr.UnknownMemberID {
		t.Fatalf("leave: %v", errs)
	}
	h.wantState(Empty, 2)
	if !eff.Persist {
		t.Fatal("an emptied group must be persisted")
	}
	if err := h.g.CheckCommit(at(20), "", "", -1); err != nil {
		t.Fatalf("commit from outside an empty group: %v", err)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t)
	res, _, _ := h.g.Join(at(0), lim, JoinRequest{SessionTimeout: 10 * time.Millisecond, ProtocolType: "consumer", Protocols: protos, NewMemberID: "x"})
	wantErr(t, "short session", res.Err, kerr.InvalidSessionTimeout)
	res, _, _ = h.g.Join(at(0), lim, JoinRequest{SessionTimeout: time.Second, ProtocolType: "consumer", NewMemberID: "x"})
	wantErr(t, "no protocols", res.Err, kerr.InconsistentGroupProtocol)
	a := h.newMember(0)
	h.wantJoined(a, 1)
	res, _, _ = h.g.Join(at(0), lim, JoinRequest{SessionTimeout: time.Second, ProtocolType: "connect", Protocols: protos, NewMemberID: "y"})
	wantErr(t, "another protocol type", res.Err, kerr.InconsistentGroupProtocol)
	res, _ = h.join(0, "never-handed-out", "", protos)
	wantErr(t, "unknown member id", res.Err, kerr.UnknownMemberID)
	h.newMember(0)
	h.newMember(0)
	res, id := h.join(0, "", "", protos)
	res, _ = h.join(0, id, "", protos)
	wantErr(t, "fourth member", res.Err, kerr.GroupMaxSizeReached)
}

func TestInitialRebalanceDelayWaitsForMoreMembers(t *testing.T) {
	h := newHarness(t)
	h.lim.InitialRebalanceDelay = 300 * time.Millisecond
	a := h.newMember(0)
	h.take(h.g.Tick(at(200)))
	b := h.newMember(200) // extends the delay to 500
	h.take(h.g.Tick(at(400)))
	h.wantState(PreparingRebalance, 0)
	h.take(h.g.Tick(at(500)))
	h.wantState(CompletingRebalance, 1)
	h.wantJoined(a, 1)
	h.wantJoined(b, 1)
}

func TestPersistedGroupRestoresStable(t *testing.T) {
	h := newHarness(t)
	a := h.newMember(0)
	h.wantJoined(a, 1)
	h.syncLeader(0, a, 1)
	v, err := DecodeGroup(EncodeGroup(h.g.Value()))
	if err != nil {
		t.Fatal(err)
	}
	g := Restore("g", v, at(100))
	if g.State != Stable || g.Generation != 1 || g.Leader != a {
		t.Fatalf("restored %s generation %d leader %s", g.State, g.Generation, g.Leader)
	}
	if err := g.Heartbeat(at(200), a, "", 1); err != nil {
		t.Fatalf("heartbeat after restore: %v", err)
	}
	if r, _ := g.Sync(at(210), a, "", 1, "", "", nil); r == nil || string(r.Assignment) != "to-"+a {
		t.Fatalf("assignment after restore: %+v", r)
	}
	// No heartbeat for a session: the restored member expires too.
	g.Tick(at(1300))
	if g.State != Empty {
		t.Fatalf("restored group after a silent session: %s", g.State)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	k, err := DecodeKey(OffsetKey("g", "orders", 7))
	if err != nil || !k.IsOffset || k.Group != "g" || k.Topic != "orders" || k.Partition != 7 {
		t.Fatalf("offset key: %+v %v", k, err)
	}
	k, err = DecodeKey(GroupKey("g"))
	if err != nil || k.IsOffset || k.Group != "g" {
		t.Fatalf("group key: %+v %v", k, err)
	}
	ov := OffsetValue{Offset: 42, LeaderEpoch: 3, Metadata: "meta", CommitTimestamp: 99}
	if got, err := DecodeOffset(EncodeOffset(ov)); err != nil || got != ov {
		t.Fatalf("offset value: %+v %v", got, err)
	}
	// Kafka's exact bytes for the offset key v1 of ("g", "t", 1).
	want := []byte{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 1}
	if got := OffsetKey("g", "t", 1); string(got) != string(want) {
		t.Fatalf("offset key bytes %v, want %v", got, want)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 9, 0, 0}, append(OffsetKey("g", "t", 1), 0)} {
		if _, err := DecodeKey(bad); err == nil {
			t.Errorf("DecodeKey(%v) accepted", bad)
		}
	}
	if _, err := DecodeOffset([]byte{0, 3, 1}); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated offset value: %v", err)
	}
	tps := []TP{{"a", 0}, {"a", 2}, {"b", 1}}
	got, ok := DecodeConsumerAssignment(EncodeConsumerAssignment(tps))
	if !ok || fmt.Sprint(got) != fmt.Sprint(tps) {
		t.Fatalf("consumer assignment %v %v", got, ok)
	}
}

// Kafka places a group on partition abs(javaHashCode) % n, with
// Utils.abs(MinInt32) = 0; these values are Java's.
func TestPartitionForMatchesKafka(t *testing.T) {
	for _, c := range []struct {
		group string
		want  int32
	}{
		{"hello", 22},                 // hashCode 99162322
		{"billing", 9},                // hashCode -109829509
		{"polygenelubricants", 0},     // hashCode MinInt32
		{"console-consumer-12345", 6}, // hashCode 158455506
		{"日本", 47},                    // UTF-16 code units
	} {
		if got := PartitionFor(c.group, 50); got != c.want {
			t.Errorf("PartitionFor(%q, 50) = %d, want %d", c.group, got, c.want)
		}
	}
}

// Members of a new generation that never send SyncGroup are removed once
// the rebalance timeout after the join phase has passed, and the group
// rebalances: a leader that heartbeats but never syncs held the others'
// parked SyncGroups and the group in CompletingRebalance for ever.
func TestMembersThatNeverSyncAreRemovedAtTheRebalanceTimeout(t *testing.T) {
	h := newHarness(t)
	a, b := twoMembers(h) // the join phase ended at 100; rebalance timeouts are 2 s
	h.wantJoined(a, 1)
	h.wantJoined(b, 1)
	res, eff := h.g.Sync(at(150), b, "", 1, "", "", nil)
	h.take(eff)
	if res != nil {
		t.Fatalf("the follower's sync answered before the leader's: %+v", res)
	}
	for ms := 400; ms < 2100; ms += 300 {
		if err := h.g.Heartbeat(at(ms), a, "", 1); err != nil {
			t.Fatalf("leader heartbeat at %d: %v", ms, err)
		}
		h.take(h.g.Tick(at(ms)))
		h.wantState(CompletingRebalance, 1)
	}
	h.take(h.g.Tick(at(2100)))
	if _, ok := h.g.Member(a); ok {
		t.Fatal("the leader that never synced is still a member")
	}
	if r, ok := h.syncs[b]; !ok || r.Err == nil || r.Err.Code != kerr.RebalanceInProgress {
		t.Fatalf("the follower's parked sync: %+v, want REBALANCE_IN_PROGRESS", r)
	}
	h.wantState(PreparingRebalance, 1)
}

// Members that all synced are not touched by the pending-sync deadline.
func TestSyncedMembersOutliveThePendingSyncDeadline(t *testing.T) {
	h := newHarness(t)
	a, b := twoMembers(h)
	h.wantJoined(a, 1)
	h.wantJoined(b, 1)
	h.take(func() Effects { _, eff := h.g.Sync(at(150), b, "", 1, "", "", nil); return eff }())
	h.syncLeader(200, a, 1)
	for ms := 500; ms <= 3000; ms += 300 {
		for _, m := range []string{a, b} {
			if err := h.g.Heartbeat(at(ms), m, "", 1); err != nil {
				t.Fatalf("heartbeat of %s at %d: %v", m, ms, err)
			}
		}
		h.take(h.g.Tick(at(ms)))
		h.wantState(Stable, 1)
	}
}
