package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/client"
)

// All lists the scenarios in the note's order.
func All() []Scenario {
	return []Scenario{
		{Name: "hw-walkthrough", Title: "two records, three replicas: the HW moves only after the followers' next fetch", Note: "§3.3",
			Rule: "the leader's high watermark is the smallest LEO of the in-sync replicas, and the leader learns a follower's LEO only " +
				"from the fetch offset of that follower's next fetch; so after the followers copied m0 and m1 the HW stays 0 for one more " +
				"round trip, and consumers, who read up to the HW, see the records only then. Followers learn the new HW in the fetch response after that.",
			play: playHW},
		{Name: "follower-lag", Title: "a stalled follower leaves the ISR after replica.lag.time.max.ms, writes go on, it catches up and rejoins", Note: "§7.1",
			Rule: "a follower that has not caught up to the leader's LEO for replica.lag.time.max.ms is dropped from the ISR by the leader " +
				"(AlterPartition through the controller); the HW is then the min LEO of the remaining ISR, so acks=all writes go on while the ISR " +
				"keeps min.insync.replicas; once the follower's fetch offset reaches the leader's LEO it is added back.",
			play: playFollowerLag},
		{Name: "leader-crash", Title: "the leader killed under a running acks=all producer: a new leader from the ISR, nothing acknowledged lost, the old one rejoins", Note: "§7.2, kill_leader_demo",
			Rule: "when the leader dies the controller elects the first live ISR member in assignment order, with leader epoch +1; every " +
				"acks=all record was on every ISR member before it was acknowledged, so the new leader has it; the old leader comes back as a " +
				"follower, truncates to where its log agrees with the new epoch's (OffsetForLeaderEpoch) and fetches back into the ISR.",
			play: playLeaderCrash},
		{Name: "network-partition", Title: "the link between the leader and a follower cut (both still reach the controller): it leaves the ISR, writes go on, healed it catches up", Note: "§7.3",
			Rule: "a follower the leader cannot hear from is, to the leader, just a follower that stopped fetching: it leaves the ISR after " +
				"replica.lag.time.max.ms (or when its broker's session expires), the leader keeps the partition and its epoch, writes go on " +
				"with the remaining ISR, and the returning follower catches up from its fetch offset and rejoins; there is never a second leader.",
			play: playPartition},
		{Name: "isolated-leader", Title: "the leader cut off from etcd and the controllers (clients still reach it): it fences itself, a new leader with a higher epoch, its orphan acks=1 records truncated when it rejoins", Note: "§7.3 ②③",
			Rule: "a broker leads only while its registration lease holds, which only etcd can renew: cut off from etcd and the " +
				"controllers it refuses writes just before the lease can expire (it fences itself), the controller elects an ISR member " +
				"with leader epoch +1, and it acknowledges no acks=all write meanwhile; records it alone took with acks=1 are orphans: " +
				"healed, it registers again, follows the new leader, and truncates them away by leader epoch (OffsetForLeaderEpoch).",
			play: playIsolatedLeader},
		{Name: "partitioned-leader", Title: "the leader cut off from everything but its clients (etcd, the controllers and the other brokers at once): writes refused once its lease lapses, a new leader, its acks=1 orphans truncated when it rejoins", Note: "§7.3 ③",
			Rule: "a network partition that leaves a leader only its clients does not give the partition two leaders: until its " +
				"registration lease lapses it may take acks=1 writes no follower can fetch (acks=all ones wait, unacknowledged), then it " +
				"refuses every write (it fences itself) while the controller elects an ISR member with leader epoch +1; healed, it " +
				"registers again, follows the new leader and truncates its orphans away by leader epoch (OffsetForLeaderEpoch).",
			play: playPartitionedLeader},
		{Name: "min-isr", Title: "two brokers down: acks=all gets NOT_ENOUGH_REPLICAS and nothing is written; recovery", Note: "§6, min_isr_demo",
			Rule: "with acks=all the leader refuses a write (NOT_ENOUGH_REPLICAS) when the ISR is smaller than min.insync.replicas, before " +
				"appending it, so an acknowledged write is always on at least min.insync.replicas replicas; the partition stays readable, " +
				"and writes succeed again once enough replicas are back in sync.",
			play: playMinISR},
		{Name: "unclean-election", Title: "unclean.leader.election.enable off: the partition stays offline; on: an out-of-sync replica leads and acknowledged writes are lost", Note: "§5",
			Rule: "only an ISR member may lead while unclean election is off: when every ISR member is down the partition has no leader " +
				"(unavailable but consistent); turning unclean.leader.election.enable on lets a live out-of-sync replica lead, which " +
				"brings the partition back at the price of the records only the dead leader had, acknowledged ones included.",
			play: playUnclean},
		{Name: "kip101", Title: "KIP-101: an acknowledged write lost by high-watermark truncation, kept by leader-epoch truncation", Note: "§4.1-4.3",
			Rule: "before KIP-101 a restarted follower truncated its log to its own HW, which may lag the leader's; if it then became " +
				"leader, acknowledged records past its HW were gone. With leader epochs the follower asks the leader where its epoch " +
				"ended (OffsetForLeaderEpoch) and truncates only what truly diverges.",
			play: playKIP101},
		{Name: "fast-leader-changes", Title: "the leader killed three times in a row under a running producer: epochs climb, no acknowledged write lost, every replica converges", Note: "§4.2, Q4",
			Rule: "each election bumps the leader epoch; every follower of a new epoch truncates to where its log agrees with the new " +
				"leader's epoch history before fetching, so however fast leaders change, acknowledged (acks=all) records survive and " +
				"all replicas end with the same log.",
			play: playFastChanges},
		{Name: "preferred-election", Title: "leadership moved off the preferred replica by a restart, handed back by a preferred election", Note: "§7.2 T5",
			Rule: "the preferred replica is the first of the assignment; after it restarts it rejoins as a follower and stays one until " +
				"a preferred leader election (tidemark leader-election --election-type preferred, or auto.leader.rebalance.enable) hands " +
				"leadership back, which the controller does only when it is alive and in the ISR. The current leader yields first: " +
				"it stops taking writes and answers once the preferred replica has every record it took, so the move loses none, acks=1 included.",
			play: playPreferred},
		{Name: "controller-failover", Title: "the active controller frozen (SIGSTOP): the standby takes office with a higher controller_epoch, the old one resumed is fenced", Note: "§7.3 controller_epoch",
			Rule: "one controller is active at a time (elected through etcd); each term has a controller_epoch, brokers follow only " +
				"the highest they have seen and refuse requests stamped with an older one, so a controller frozen past its lease " +
				"that wakes up believing it still leads cannot change anything.",
			play: playControllerFailover},
	}
}

// ---- hw-walkthrough ----

// hwState is one observed step: the leader's and followers' LEO/HW.
type hwState struct {
	LeaderLEO, LeaderHW int64
	// Followers' LEO and HW, in the order of hwFacts.Followers.
	LEO, HW []int64
	// Known are the followers' LEOs as the leader knows them (their last
	// fetch offsets), in the same order; -1 before the leader's first
	// fetch from that follower.
	Known []int64
	ISR   []int32
}

type hwFacts struct {
	Leader    int32
	Followers []int32
	Records   int64
	States    []hwState
}

func (f hwFacts) Verdict() []string {
	var out []string
	sawUnreplicated, sawLag, done := false, false, false
	for i, s := range f.States {
		if s.LeaderLEO == f.Records && s.LeaderHW == 0 && allBelow(s.LEO, f.Records) {
			sawUnreplicated = true
		}
		if s.LeaderHW < f.Records && slices.Contains(s.LEO, f.Records) {
			sawLag = true
		}
		if len(s.ISR) < len(f.Followers)+1 {
			out = append(out, fmt.Sprintf("step %d: the ISR shrank to %v during the walk: replica.lag.time.max.ms is too short for its steps (give it 5s or more)", i+1, s.ISR))
		}
		for j, leo := range s.LEO {
			if s.LeaderHW > leo && slices.Contains(s.ISR, f.Followers[j]) {
				out = append(out, fmt.Sprintf("step %d: the leader's HW %d is above in-sync follower %d's LEO %d: HW is not the min LEO of the ISR", i+1, s.LeaderHW, f.Followers[j], leo))
			}
		}
		if s.LeaderHW == f.Records && allEqual(s.HW, f.Records) {
			done = true
		}
	}
	if !sawUnreplicated {
		out = append(out, fmt.Sprintf("never saw step ①: the leader with LEO %d and HW 0 while no follower had the records", f.Records))
	}
	if !sawLag {
		out = append(out, fmt.Sprintf("never saw a follower at LEO %d while the leader's HW was still below it: the HW did not lag the followers' copy by a fetch", f.Records))
	}
	if !done {
		out = append(out, fmt.Sprintf("the HW never reached %d on every replica", f.Records))
	}
	return out
}

func allBelow(v []int64, n int64) bool {
	for _, x := range v {
		if x >= n {
			return false
		}
	}
	return true
}

func allEqual(v []int64, n int64) bool {
	for _, x := range v {
		if x != n {
			return false
		}
	}
	return true
}

func (f hwFacts) Explain() string {
	var b strings.Builder
	b.WriteString("Q2: HW vs LEO, and how does the HW advance? / Why is HW the min LEO of the ISR?\n")
	fmt.Fprintf(&b, "  This run saw %d distinct states. The leader (broker %d) had LEO %d right after the two appends while its HW stayed 0;\n", len(f.States), f.Leader, f.Records)
	for i, s := range f.States {
		fmt.Fprintf(&b, "    %d. leader LEO %d HW %d; followers %v LEO %v HW %v; ISR %v\n", i+1, s.LeaderLEO, s.LeaderHW, f.Followers, s.LEO, s.HW, s.ISR)
	}
	b.WriteString("  the HW moved only once every in-sync follower's fetch offset showed the records: a record below the HW is on every ISR\n" +
		"  member, so whichever of them becomes leader has it; that is why consumers read only up to the HW and why the HW must be the\n" +
		"  smallest LEO of the ISR, not the largest or a majority's.\n")
	b.WriteString("Q8: why are followers not read from by default?\n" +
		"  In the states above a follower's HW lagged the leader's by a fetch: a consumer on a follower would see committed records late,\n" +
		"  and a follower's view of what is committed is only what the leader last told it. Follower fetching (KIP-392) is opt-in, by rack.\n")
	return b.String()
}

func playHW(r *run) (facts, error) {
	f := hwFacts{Records: 2}
	p, err := r.createTopic(map[string]string{"min.insync.replicas": "1"})
	if err != nil {
		return f, err
	}
	f.Leader, f.Followers = p.GetLeader(), followers(p)
	a, b := f.Followers[0], f.Followers[1]
	// Both followers stalled, so step ① stays on screen until the leader
	// has reported it; then each is let go in turn, b with a slowed next
	// fetch so step ③ (both copied, the leader not yet told) lasts.
	for _, id := range f.Followers {
		if err := r.fetchFault(id, true, 0); err != nil {
			return f, err
		}
	}
	r.step("fault API: followers %d and %d hold their fetches of %s", a, b, r.topic)
	// A fetch already waiting at the leader (up to replica.fetch.wait.max.ms)
	// would still bring the records back: let those end first.
	if err := sleep(r.ctx, 700*time.Millisecond); err != nil {
		return f, err
	}
	n, err := r.produceBatch("m0", "m1")
	if err != nil {
		return f, fmt.Errorf("produce m0, m1: %w", err)
	}
	r.step("step ①: produced m0, m1 in one batch with acks=1 to leader %d (acknowledged: %d)", f.Leader, n)
	// A follower's lag clock runs from its last caught-up fetch, before
	// the hold, and the slowed follower takes two slowed round trips: the
	// whole walk must fit in replica.lag.time.max.ms.
	slow := 1500 * time.Millisecond
	if lag := r.lagTimeOr(); lag > 0 {
		slow = min(slow, lag/6)
	}
	var last string
	phase := 0
	var faultErr error
	err = r.watch(r.o.Wait, func(msg *adminv1.WatchClusterResponse) bool {
		ps := msg.GetPartitions()
		if len(ps) == 0 {
			return true
		}
		p := ps[0]
		lr := replica(p, f.Leader)
		if !lr.GetReported() {
			return true // this controller has not heard from the leader yet
		}
		s := hwState{LeaderLEO: lr.GetLogEndOffset(), LeaderHW: lr.GetHighWatermark(), ISR: p.GetIsr()}
		for _, id := range f.Followers {
			rv := replica(p, id)
			s.LEO, s.HW = append(s.LEO, rv.GetLogEndOffset()), append(s.HW, rv.GetHighWatermark())
			known := int64(-1)
			if rv.LeaderKnownLogEndOffset != nil {
				known = rv.GetLeaderKnownLogEndOffset()
			}
			s.Known = append(s.Known, known)
		}
		if key := fmt.Sprint(s); key != last {
			last = key
			f.States = append(f.States, s)
			r.step("%s", hwNarrate(f, s))
			r.table(msg)
		}
		switch {
		case phase == 0 && s.LeaderLEO == f.Records:
			phase++
			faultErr = r.clearFault(a)
			r.step("step ②: broker %d fetches again", a)
		case phase == 1 && s.LEO[0] == f.Records:
			phase++
			faultErr = r.fetchFault(b, false, slow)
			r.step("step ③: broker %d fetches again, each round trip slowed by %s", b, slow)
		}
		return faultErr == nil && !(s.LeaderHW == f.Records && allEqual(s.HW, f.Records))
	})
	if faultErr != nil {
		return f, faultErr
	}
	if err != nil && !errors.Is(err, errTimeout) {
		return f, err
	}
	read, _, err := r.readAll()
	if err != nil {
		return f, err
	}
	r.step("a consumer reads %d records now that the HW is %d", len(read), f.Records)
	return f, nil
}

func hwNarrate(f hwFacts, s hwState) string {
	have := 0
	for _, leo := range s.LEO {
		if leo >= f.Records {
			have++
		}
	}
	switch {
	case s.LeaderHW < f.Records && have == 0:
		known, note := knownLEOs(s.Known)
		return fmt.Sprintf("the leader has LEO %d, HW %d = min(%d, %s): consumers cannot see m0, m1 yet%s", s.LeaderLEO, s.LeaderHW, s.LeaderLEO, known, note)
	case s.LeaderHW < f.Records:
		known, note := knownLEOs(s.Known)
		return fmt.Sprintf("%d of %d followers copied m0, m1 (LEO %v; the leader knows %s) but the leader's HW is still %d: it learns their LEO from their next fetch%s",
			have, len(s.LEO), s.LEO, known, s.LeaderHW, note)
	case !allEqual(s.HW, f.Records):
		return fmt.Sprintf("the followers' next fetch (offset %d) moved the leader's HW to %d; the followers' HWs %v follow in the fetch response", f.Records, s.LeaderHW, s.HW)
	default:
		return fmt.Sprintf("every replica has HW %d: m0, m1 are committed and visible", f.Records)
	}
}

// knownLEOs lists the followers' LEOs as the leader knows them, "?" for a
// follower it has had no fetch from yet (that one holds the HW where it
// is), and the note explaining "?" when one is.
func knownLEOs(known []int64) (list, note string) {
	parts := make([]string, len(known))
	for i, k := range known {
		parts[i] = strconv.FormatInt(k, 10)
		if k < 0 {
			parts[i], note = "?", " (?: not fetched yet)"
		}
	}
	return strings.Join(parts, ", "), note
}

// ---- follower-lag ----

type lagFacts struct {
	Leader, Follower int32
	LagTime          time.Duration
	// ShrunkAfter is how long after the stall the follower left the ISR
	// (0: it never did).
	ShrunkAfter    time.Duration
	ISRWhileOut    []int32
	AckedWhileOut  int
	HWAtShrink     int64
	HWBeforeRejoin int64
	Rejoined       bool
	RejoinAfter    time.Duration
	Acked, Lost    int
}

func (f lagFacts) Verdict() []string {
	var out []string
	if f.ShrunkAfter == 0 {
		out = append(out, fmt.Sprintf("stalled follower %d never left the ISR", f.Follower))
	} else if f.LagTime > 0 && f.ShrunkAfter < f.LagTime*9/10 {
		out = append(out, fmt.Sprintf("follower %d left the ISR %s after the stall, before replica.lag.time.max.ms (%s)", f.Follower, f.ShrunkAfter, f.LagTime))
	}
	if f.AckedWhileOut == 0 {
		out = append(out, "no acks=all write was acknowledged while the follower was out of the ISR")
	}
	if f.HWBeforeRejoin <= f.HWAtShrink {
		out = append(out, fmt.Sprintf("the HW did not advance without the lagging follower (%d at the shrink, %d before the rejoin)", f.HWAtShrink, f.HWBeforeRejoin))
	}
	if !f.Rejoined {
		out = append(out, fmt.Sprintf("follower %d did not rejoin the ISR once its fetching resumed", f.Follower))
	}
	if f.Lost > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged writes were not read back", f.Lost))
	}
	return out
}

func (f lagFacts) Explain() string {
	return fmt.Sprintf("Q4: when does the ISR shrink?\n"+
		"  Follower %d's fetching was stalled; it left the ISR %s later (replica.lag.time.max.ms %s): the leader measures how long a\n"+
		"  follower has not caught up to its LEO, not how many messages it is behind. ISR while it was out: %v.\n"+
		"Why is HW the min LEO of the ISR?\n"+
		"  While follower %d was out the HW went from %d to %d without it and %d acks=all writes were acknowledged: the HW is the min LEO\n"+
		"  of the ISR, and the ISR no longer held the laggard. Once its fetch offset reached the leader's LEO it rejoined (%s after the fault cleared).\n",
		f.Follower, f.ShrunkAfter.Round(100*time.Millisecond), f.LagTime, f.ISRWhileOut, f.Follower, f.HWAtShrink, f.HWBeforeRejoin,
		f.AckedWhileOut, f.RejoinAfter.Round(100*time.Millisecond))
}

func playFollowerLag(r *run) (facts, error) {
	f := lagFacts{LagTime: r.lagTimeOr()}
	p, err := r.createTopic(map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return f, err
	}
	f.Leader, f.Follower = p.GetLeader(), followers(p)[1]
	bg, err := r.startProducer("v", 30*time.Millisecond)
	if err != nil {
		return f, err
	}
	acked := func() map[string]int64 { a, _ := bg.finish(); return a }
	defer func() {
		if bg != nil {
			acked()
		}
	}()
	r.step("T0: steady, a producer writes with acks=all; replica.lag.time.max.ms is %s", f.LagTime)
	r.show()
	if err := r.fetchFault(f.Follower, true, 0); err != nil {
		return f, err
	}
	stalled := time.Now()
	r.step("T1: fault API: broker %d's fetching of %s stalled", f.Follower, r.topic)
	p, err = r.waitFor("the stalled follower to leave the ISR", func(p *adminv1.PartitionView) bool { return !inISR(p, f.Follower) })
	if err != nil {
		return f, err
	}
	f.ShrunkAfter, f.ISRWhileOut, f.HWAtShrink = time.Since(stalled), p.GetIsr(), p.GetHighWatermark()
	before := bg.count()
	r.step("T2: broker %d left the ISR %s after the stall: ISR %v", f.Follower, f.ShrunkAfter.Round(10*time.Millisecond), p.GetIsr())
	r.show()
	if err := sleep(r.ctx, 2*time.Second); err != nil {
		return f, err
	}
	p = r.show()
	f.AckedWhileOut, f.HWBeforeRejoin = bg.count()-before, p.GetHighWatermark()
	r.step("T3: writes go on: %d acknowledged with ISR %v, HW %d -> %d", f.AckedWhileOut, p.GetIsr(), f.HWAtShrink, f.HWBeforeRejoin)
	if err := r.clearFaults(f.Follower); err != nil {
		return f, err
	}
	cleared := time.Now()
	r.step("T4: fault cleared: broker %d fetches again", f.Follower)
	if _, err := r.waitFor("the follower to rejoin the ISR", func(p *adminv1.PartitionView) bool {
		return inISR(p, f.Follower) && replica(p, f.Follower).GetLogEndOffset() >= f.HWBeforeRejoin
	}); err == nil {
		f.Rejoined, f.RejoinAfter = true, time.Since(cleared)
		r.step("T5: broker %d caught up and rejoined the ISR %s later", f.Follower, f.RejoinAfter.Round(10*time.Millisecond))
		r.show()
	} else {
		r.step("broker %d did not rejoin: %v", f.Follower, err)
	}
	all := acked()
	bg = nil
	read, _, err := r.readAll()
	if err != nil {
		return f, err
	}
	f.Acked, f.Lost = len(all), len(missing(all, read))
	r.step("read back: %d acknowledged, %d missing", f.Acked, f.Lost)
	return f, nil
}

// ---- leader-crash ----

type crashFacts struct {
	OldLeader, NewLeader int32
	OldISR               []int32
	OldEpoch, NewEpoch   int32
	FailoverTook         time.Duration
	AckedAfter           int
	Acked, Lost          int
	LostSample           []string
	Rejoined             bool
}

func (f crashFacts) Verdict() []string {
	var out []string
	if f.NewLeader <= 0 || f.NewLeader == f.OldLeader {
		out = append(out, fmt.Sprintf("no new leader after broker %d was killed (leader %d)", f.OldLeader, f.NewLeader))
	} else if !slices.Contains(f.OldISR, f.NewLeader) {
		out = append(out, fmt.Sprintf("new leader %d was not in the ISR %v", f.NewLeader, f.OldISR))
	}
	if f.NewEpoch <= f.OldEpoch {
		out = append(out, fmt.Sprintf("the leader epoch did not increase (%d -> %d)", f.OldEpoch, f.NewEpoch))
	}
	if f.AckedAfter == 0 {
		out = append(out, "no write was acknowledged by the new leader")
	}
	if f.Lost > 0 {
		out = append(out, fmt.Sprintf("%d of %d acknowledged acks=all writes lost, e.g. %v", f.Lost, f.Acked, f.LostSample))
	}
	if !f.Rejoined {
		out = append(out, fmt.Sprintf("old leader %d did not rejoin the ISR after its restart", f.OldLeader))
	}
	return out
}

func (f crashFacts) Explain() string {
	return fmt.Sprintf("Q1: does acks=all never lose a message?\n"+
		"  Broker %d was killed while leading; broker %d, in the ISR %v, took over in %s with leader epoch %d -> %d. Of %d acknowledged\n"+
		"  acks=all writes, %d were missing when read back: each had reached every ISR member before its ack, and the new leader came\n"+
		"  from the ISR. With min.insync.replicas=2 this holds as long as one of the acknowledging replicas survives.\n"+
		"Q7: the leader dies after writing, before the followers fetch?\n"+
		"  Those records were never acknowledged with acks=all (the HW had not passed them): the producer retried them on the new leader.\n"+
		"  The old leader, restarted, truncated what only it had and rejoined the ISR.\n",
		f.OldLeader, f.NewLeader, f.OldISR, f.FailoverTook.Round(10*time.Millisecond), f.OldEpoch, f.NewEpoch, f.Acked, f.Lost)
}

func playLeaderCrash(r *run) (facts, error) {
	var f crashFacts
	p, err := r.createTopic(map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return f, err
	}
	bg, err := r.startProducer("v", 20*time.Millisecond)
	if err != nil {
		return f, err
	}
	defer func() {
		if bg != nil {
			bg.finish()
		}
	}()
	if err := sleep(r.ctx, time.Second); err != nil {
		return f, err
	}
	p = r.show()
	f.OldLeader, f.OldISR, f.OldEpoch = p.GetLeader(), p.GetIsr(), p.GetLeaderEpoch()
	r.step("T0: steady: leader %d, ISR %v, epoch %d; %d writes acknowledged so far", f.OldLeader, f.OldISR, f.OldEpoch, bg.count())
	if err := r.node(devclusterv1.Action_ACTION_KILL, brokerName(f.OldLeader)); err != nil {
		return f, err
	}
	killed := time.Now()
	r.step("T1: kill -9 broker %d (the leader)", f.OldLeader)
	p, err = r.waitFor("a new leader", func(p *adminv1.PartitionView) bool {
		return p.GetLeader() > 0 && p.GetLeader() != f.OldLeader
	})
	if err != nil {
		return f, err
	}
	f.NewLeader, f.NewEpoch, f.FailoverTook = p.GetLeader(), p.GetLeaderEpoch(), time.Since(killed)
	r.step("T2-T3: the controller elected broker %d from the ISR after %s: epoch %d -> %d, ISR %v", f.NewLeader,
		f.FailoverTook.Round(10*time.Millisecond), f.OldEpoch, f.NewEpoch, p.GetIsr())
	r.show()
	before := bg.count()
	if err := sleep(r.ctx, 1500*time.Millisecond); err != nil {
		return f, err
	}
	f.AckedAfter = bg.count() - before
	r.step("T4: the producer refreshed its metadata: %d writes acknowledged by broker %d", f.AckedAfter, f.NewLeader)
	if err := r.node(devclusterv1.Action_ACTION_START, brokerName(f.OldLeader)); err != nil {
		return f, err
	}
	r.step("T5: broker %d restarted", f.OldLeader)
	if _, err := r.waitFor("the old leader back in the ISR", func(p *adminv1.PartitionView) bool { return inISR(p, f.OldLeader) }); err == nil {
		f.Rejoined = true
		r.step("broker %d truncated to the new epoch's log, caught up and rejoined the ISR as a follower", f.OldLeader)
		r.show()
	}
	acked, failed := bg.finish()
	bg = nil
	read, end, err := r.readAll()
	if err != nil {
		return f, err
	}
	lost := missing(acked, read)
	f.Acked, f.Lost = len(acked), len(lost)
	f.LostSample = lost[:min(5, len(lost))]
	r.step("consumed everything back (%d records to offset %d): %d acknowledged, %d lost, %d not acknowledged (timed out)", len(read), end, f.Acked, f.Lost, failed)
	return f, nil
}

// ---- network-partition ----

type partitionFacts struct {
	Leader, Follower int32
	Left             bool
	LeftAfter        time.Duration
	// SessionKept: the follower's broker stayed registered with the same
	// broker epoch throughout (only its link to the leader was cut).
	SessionKept   bool
	AckedWhileOut int
	Leaders       []int32 // every leader seen while the follower was cut off
	CaughtUp      bool
	Acked, Lost   int
}

func (f partitionFacts) Verdict() []string {
	var out []string
	if !f.Left {
		out = append(out, fmt.Sprintf("cut-off follower %d never left the ISR", f.Follower))
	}
	if f.Left && !f.SessionKept {
		out = append(out, fmt.Sprintf("broker %d lost its session with the controller: more than its link to leader %d was cut", f.Follower, f.Leader))
	}
	if f.AckedWhileOut == 0 {
		out = append(out, "no write was acknowledged while the follower was cut off")
	}
	for _, l := range f.Leaders {
		if l != f.Leader {
			out = append(out, fmt.Sprintf("leadership moved to %d while only follower %d was cut off", l, f.Follower))
			break
		}
	}
	if !f.CaughtUp {
		out = append(out, fmt.Sprintf("follower %d did not catch up and rejoin after it came back", f.Follower))
	}
	if f.Lost > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged writes lost", f.Lost))
	}
	return out
}

func (f partitionFacts) Explain() string {
	return fmt.Sprintf("What happens when a follower is cut off?\n"+
		"  The link between broker %d and leader %d was cut both ways, both still reaching etcd and the controller (session kept: %v);\n"+
		"  %s later the ISR no longer held it, leader %d kept the partition (leaders seen: %v) and %d\n"+
		"  acks=all writes were acknowledged meanwhile. No second leader: only the controller names leaders, and a follower cannot\n"+
		"  promote itself. Healed, it fetched from its offset and rejoined; %d of %d acknowledged writes lost.\n",
		f.Follower, f.Leader, f.SessionKept, f.LeftAfter.Round(100*time.Millisecond), f.Leader, f.Leaders, f.AckedWhileOut, f.Lost, f.Acked)
}

func playPartition(r *run) (facts, error) {
	var f partitionFacts
	p, err := r.createTopic(map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return f, err
	}
	f.Leader, f.Follower = p.GetLeader(), followers(p)[0]
	bg, err := r.startProducer("v", 30*time.Millisecond)
	if err != nil {
		return f, err
	}
	defer func() {
		if bg != nil {
			bg.finish()
		}
	}()
	r.step("T0: steady: leader %d, ISR %v, a producer writes with acks=all", f.Leader, p.GetIsr())
	epoch := r.brokerEpoch(f.Follower)
	if err := r.cutLinks(f.Leader, f.Follower, true); err != nil {
		return f, err
	}
	cut := time.Now()
	r.step("T1: the link between broker %d and broker %d cut both ways (tidemark fault cut --from %d --to %d --both); "+
		"both still reach etcd and the controller", f.Leader, f.Follower, f.Leader, f.Follower)
	alive := false
	p, err = r.waitFor("the cut-off follower to leave the ISR", func(p *adminv1.PartitionView) bool {
		f.Leaders = appendNew(f.Leaders, p.GetLeader())
		alive = replica(p, f.Follower).GetAlive()
		return !inISR(p, f.Follower)
	})
	if err != nil {
		return f, err
	}
	f.Left, f.LeftAfter = true, time.Since(cut)
	f.SessionKept = alive && epoch > 0 && r.brokerEpoch(f.Follower) == epoch
	r.step("broker %d left the ISR after %s: ISR %v, leader still %d; broker %d is still in the cluster (session kept: %v)",
		f.Follower, f.LeftAfter.Round(10*time.Millisecond), p.GetIsr(), p.GetLeader(), f.Follower, f.SessionKept)
	r.show()
	before := bg.count()
	if err := sleep(r.ctx, 2*time.Second); err != nil {
		return f, err
	}
	f.AckedWhileOut = bg.count() - before
	p = r.show()
	f.Leaders = appendNew(f.Leaders, p.GetLeader())
	r.step("writes go on without it: %d acknowledged in 2s", f.AckedWhileOut)
	if err := r.cutLinks(f.Leader, f.Follower, false); err != nil {
		return f, err
	}
	r.step("T2: the link healed (tidemark fault heal --from %d --to %d --both)", f.Leader, f.Follower)
	if _, err := r.waitFor("the follower to catch up and rejoin", func(p *adminv1.PartitionView) bool { return inISR(p, f.Follower) }); err == nil {
		f.CaughtUp = true
		r.step("broker %d caught up from its fetch offset and rejoined the ISR", f.Follower)
		r.show()
	}
	acked, _ := bg.finish()
	bg = nil
	read, _, err := r.readAll()
	if err != nil {
		return f, err
	}
	f.Acked, f.Lost = len(acked), len(missing(acked, read))
	r.step("read back: %d acknowledged, %d missing", f.Acked, f.Lost)
	return f, nil
}

func appendNew(s []int32, v int32) []int32 {
	if v > 0 && !slices.Contains(s, v) {
		return append(s, v)
	}
	return s
}

// ---- isolated-leader ----

type isolationFacts struct {
	OldLeader, NewLeader int32
	OldEpoch, NewEpoch   int32
	// Orphans are the acks=1 writes the old leader took once cut off from
	// its followers; OrphansKept those read back after it rejoined.
	Orphans, OrphansKept int
	// Refused1 and RefusedAll are what the isolated old leader answered an
	// acks=1 and an acks=all write once another was elected ("" for an
	// acknowledgement).
	Refused1, RefusedAll string
	Rejoined, Follows    bool
	Acked, Lost          int
}

func (f isolationFacts) Verdict() []string {
	var out []string
	if f.NewLeader <= 0 || f.NewLeader == f.OldLeader {
		out = append(out, fmt.Sprintf("no new leader while broker %d was isolated (leader %d)", f.OldLeader, f.NewLeader))
	}
	if f.NewEpoch <= f.OldEpoch {
		out = append(out, fmt.Sprintf("the leader epoch did not increase (%d -> %d)", f.OldEpoch, f.NewEpoch))
	}
	if f.Orphans == 0 {
		out = append(out, fmt.Sprintf("broker %d, cut off from its followers, took no acks=1 write", f.OldLeader))
	}
	if f.Refused1 == "" || f.RefusedAll == "" {
		out = append(out, fmt.Sprintf("the isolated old leader %d acknowledged a write after the election (acks=1: %q, acks=all: %q)", f.OldLeader, f.Refused1, f.RefusedAll))
	}
	if f.OrphansKept > 0 {
		out = append(out, fmt.Sprintf("%d of the %d orphan acks=1 records survived the old leader's rejoining", f.OrphansKept, f.Orphans))
	}
	if !f.Rejoined {
		out = append(out, fmt.Sprintf("broker %d did not rejoin the ISR once healed", f.OldLeader))
	} else if !f.Follows {
		out = append(out, fmt.Sprintf("broker %d rejoined as leader, not as a follower of broker %d", f.OldLeader, f.NewLeader))
	}
	if f.Lost > 0 {
		out = append(out, fmt.Sprintf("%d of %d acknowledged acks=all writes lost", f.Lost, f.Acked))
	}
	return out
}

func (f isolationFacts) Explain() string {
	return fmt.Sprintf("Can a leader cut off from the controller keep taking writes (split brain)?\n"+
		"  No. Broker %d, cut off from etcd and both controllers while its clients still reached it, fenced itself as leader\n"+
		"  before its lease could expire: once broker %d was elected with leader epoch %d -> %d it answered acks=1 with %s\n"+
		"  and acks=all with %s. Only etcd renews a broker's lease, so no broker can lead on past its lease (②).\n"+
		"What becomes of what the old leader wrote alone?\n"+
		"  Its %d acks=1 records, which no follower had fetched, belonged to the old epoch: healed, it registered again, followed\n"+
		"  broker %d and truncated to where its log agreed with epoch %d; %d of them were read back (③). Of %d acknowledged\n"+
		"  acks=all writes, %d were lost.\n",
		f.OldLeader, f.NewLeader, f.OldEpoch, f.NewEpoch, f.Refused1, f.RefusedAll, f.Orphans, f.NewLeader, f.NewEpoch,
		f.OrphansKept, f.Acked, f.Lost)
}

func playIsolatedLeader(r *run) (facts, error) { return playIsolation(r, false) }

// playPartitionedLeader is isolated-leader with one fault for the whole
// partition (tidemark fault isolate --peers): the orphans are taken while
// the isolated leader's lease still holds.
func playPartitionedLeader(r *run) (facts, error) { return playIsolation(r, true) }

// playIsolation cuts the leader off from its followers and isolates it from
// etcd and the controllers: with whole, by one isolation that cuts its
// peers too, else by link cuts first and then the isolation.
func playIsolation(r *run, whole bool) (facts, error) {
	var f isolationFacts
	p, err := r.createTopic(map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return f, err
	}
	f.OldLeader, f.OldEpoch = p.GetLeader(), p.GetLeaderEpoch()
	// The orphans go to the leader itself: it must have applied its role.
	if err := r.waitLeaderView(p); err != nil {
		return f, err
	}
	bg, err := r.startProducer("v", 30*time.Millisecond)
	if err != nil {
		return f, err
	}
	defer func() {
		if bg != nil {
			bg.finish()
		}
	}()
	// Its metadata may name it leader before it has applied the role (on
	// a cluster just started, the orphans were all refused): a committed
	// write says it has.
	if _, err := r.waitFor("the leader to commit writes", func(q *adminv1.PartitionView) bool {
		return q.GetLeader() == f.OldLeader && q.GetHighWatermark() > 0
	}); err != nil {
		return f, err
	}
	r.step("T0: steady: leader %d, ISR %v, epoch %d, a producer writes with acks=all", f.OldLeader, p.GetIsr(), f.OldEpoch)
	fs := followers(p)
	var isolated time.Time
	if whole {
		if err := r.isolate(f.OldLeader, true, true); err != nil {
			return f, err
		}
		isolated = time.Now()
		r.step("T1: broker %d cut off from etcd, the controllers and its followers %v at once (tidemark fault isolate --broker %d --peers); its clients still reach it",
			f.OldLeader, fs, f.OldLeader)
	} else {
		for _, fl := range fs {
			if err := r.cutLinks(f.OldLeader, fl, true); err != nil {
				return f, err
			}
		}
	}
	orphans, refused := r.orphans(f.OldLeader)
	f.Orphans = len(orphans)
	why := ""
	if len(refused) > 0 {
		why = fmt.Sprintf(" (refused: %v)", refused)
	}
	if whole {
		r.step("T2: until its lease lapses it still leads in its own view: it takes %d acks=1 writes no follower can fetch%s", f.Orphans, why)
	} else {
		r.step("T1: broker %d cut off from its followers %v (tidemark fault cut --both); it still holds its lease and takes %d acks=1 writes no follower can fetch%s",
			f.OldLeader, fs, f.Orphans, why)
		if err := r.isolate(f.OldLeader, true, false); err != nil {
			return f, err
		}
		isolated = time.Now()
		r.step("T2: broker %d isolated from etcd and the controllers (tidemark fault isolate --broker %d); its clients still reach it", f.OldLeader, f.OldLeader)
	}
	p, err = r.waitFor("a new leader", func(p *adminv1.PartitionView) bool {
		return p.GetLeader() > 0 && p.GetLeader() != f.OldLeader
	})
	if err != nil {
		return f, err
	}
	f.NewLeader, f.NewEpoch = p.GetLeader(), p.GetLeaderEpoch()
	r.step("T3: its lease expired: the controller elected broker %d after %s, leader epoch %d -> %d, ISR %v",
		f.NewLeader, time.Since(isolated).Round(10*time.Millisecond), f.OldEpoch, f.NewEpoch, p.GetIsr())
	r.show()
	f.Refused1 = r.produceTo(f.OldLeader, 1, "late-1")
	f.RefusedAll = r.produceTo(f.OldLeader, -1, "late-all")
	r.step("the old leader, which the controller can no longer tell of the election, is fenced: acks=1 -> %s, acks=all -> %s",
		orAcked(f.Refused1), orAcked(f.RefusedAll))
	if err := r.isolate(f.OldLeader, false, false); err != nil {
		return f, err
	}
	if whole {
		r.step("T4: healed (tidemark fault heal-isolation --broker %d, its links to the other brokers with it): broker %d registers again as a new broker epoch",
			f.OldLeader, f.OldLeader)
	} else {
		for _, fl := range fs {
			if err := r.cutLinks(f.OldLeader, fl, false); err != nil {
				return f, err
			}
		}
		r.step("T4: healed (tidemark fault heal-isolation --broker %d, tidemark fault heal --both): broker %d registers again as a new broker epoch", f.OldLeader, f.OldLeader)
	}
	if p, err = r.waitFor("the old leader back in the ISR", func(p *adminv1.PartitionView) bool { return inISR(p, f.OldLeader) }); err == nil {
		f.Rejoined, f.Follows = true, p.GetLeader() != f.OldLeader
		r.step("broker %d follows broker %d: it truncated to the epoch %d log, caught up and rejoined the ISR", f.OldLeader, p.GetLeader(), f.NewEpoch)
		r.show()
	}
	acked, _ := bg.finish()
	bg = nil
	read, end, err := r.readAll()
	if err != nil {
		return f, err
	}
	for _, v := range orphans {
		if _, ok := read[v]; ok {
			f.OrphansKept++
		}
	}
	f.Acked, f.Lost = len(acked), len(missing(acked, read))
	r.step("read back (%d records to offset %d): %d of %d orphans, %d of %d acknowledged acks=all writes missing",
		len(read), end, f.OrphansKept, f.Orphans, f.Lost, f.Acked)
	return f, nil
}

// orphans sends three acks=1 writes to broker id itself, cut off from its
// followers, and returns those it acknowledged and the error names of the
// others.
func (r *run) orphans(id int32) (acked, refused []string) {
	for i := range 3 {
		v := fmt.Sprintf("orphan-%d", i)
		if code := r.produceTo(id, 1, v); code != "" {
			refused = append(refused, code)
			continue
		}
		acked = append(acked, v)
	}
	return acked, refused
}

// orAcked names an answer: an error name, or "acknowledged".
func orAcked(code string) string {
	if code == "" {
		return "acknowledged"
	}
	return code
}

// ---- min-isr ----

type minISRFacts struct {
	Leader          int32
	Down            []int32
	ISRDown         []int32
	Refused         int
	RefusedCodes    map[string]int
	AckedWhileDown  int
	LEOBefore       int64
	LEOAfterRefusal int64
	ReadRefused     int
	AckedAfter      int
	Recovered       bool
}

func (f minISRFacts) Verdict() []string {
	var out []string
	if f.AckedWhileDown > 0 {
		out = append(out, fmt.Sprintf("%d acks=all writes acknowledged with ISR %v below min.insync.replicas 2", f.AckedWhileDown, f.ISRDown))
	}
	if f.Refused == 0 || f.RefusedCodes["NOT_ENOUGH_REPLICAS"] != f.Refused {
		out = append(out, fmt.Sprintf("writes under min ISR were not refused with NOT_ENOUGH_REPLICAS (refusals %v)", f.RefusedCodes))
	}
	if f.LEOAfterRefusal != f.LEOBefore {
		out = append(out, fmt.Sprintf("the leader's LEO moved %d -> %d: refused writes were appended", f.LEOBefore, f.LEOAfterRefusal))
	}
	if f.ReadRefused > 0 {
		out = append(out, fmt.Sprintf("%d refused writes were read back", f.ReadRefused))
	}
	if !f.Recovered || f.AckedAfter == 0 {
		out = append(out, "acks=all writes did not succeed again once the brokers were back")
	}
	return out
}

func (f minISRFacts) Explain() string {
	return fmt.Sprintf("What happens when the ISR shrinks below min.insync.replicas?\n"+
		"  With brokers %v down the ISR was %v, below min.insync.replicas=2: %d acks=all writes were refused (%v) and the leader's LEO stayed\n"+
		"  %d -> %d, so nothing was written that could later vanish; reads went on. Once the brokers were back and in sync, %d writes\n"+
		"  succeeded. acks=all alone only waits for the current ISR; min.insync.replicas is what makes 'all' mean at least two copies (§6).\n",
		f.Down, f.ISRDown, f.Refused, f.RefusedCodes, f.LEOBefore, f.LEOAfterRefusal, f.AckedAfter)
}

func playMinISR(r *run) (facts, error) {
	f := minISRFacts{RefusedCodes: map[string]int{}}
	p, err := r.createTopic(map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return f, err
	}
	f.Leader, f.Down = p.GetLeader(), followers(p)
	ok, err := r.produce(3, client.AcksAll, "before")
	if err != nil {
		return f, err
	}
	r.step("3 writes with acks=all: %d acknowledged", len(ok.acked))
	for _, id := range f.Down {
		if err := r.node(devclusterv1.Action_ACTION_KILL, brokerName(id)); err != nil {
			return f, err
		}
		r.step("kill -9 broker %d", id)
	}
	// The leader's own report of its LEO, once it shows the acknowledged
	// writes (reports come every half second).
	p, err = r.waitFor("the ISR to shrink to the leader", func(p *adminv1.PartitionView) bool {
		return len(p.GetIsr()) == 1 && replica(p, f.Leader).GetLogEndOffset() >= int64(len(ok.acked))
	})
	if err != nil {
		return f, err
	}
	f.ISRDown = p.GetIsr()
	if err := r.waitLeaderView(p); err != nil {
		return f, err
	}
	r.step("ISR %v, below min.insync.replicas=2 (the leader knows: its metadata says so)", f.ISRDown)
	r.show()
	f.LEOBefore = replica(p, f.Leader).GetLogEndOffset()
	refused, err := r.produce(3, client.AcksAll, "refused")
	if err != nil {
		return f, err
	}
	f.Refused, f.RefusedCodes, f.AckedWhileDown = refused.failed, refused.codes, len(refused.acked)
	r.step("3 writes with acks=all: %d refused %v, %d acknowledged", f.Refused, f.RefusedCodes, f.AckedWhileDown)
	// Two report intervals, so an append would show in the leader's LEO.
	if err := sleep(r.ctx, time.Second); err != nil {
		return f, err
	}
	if p = r.show(); p != nil {
		f.LEOAfterRefusal = replica(p, f.Leader).GetLogEndOffset()
	}
	r.step("the leader's LEO %d -> %d: nothing was appended", f.LEOBefore, f.LEOAfterRefusal)
	for _, id := range f.Down {
		if err := r.node(devclusterv1.Action_ACTION_START, brokerName(id)); err != nil {
			return f, err
		}
		r.step("start broker %d", id)
	}
	if _, err := r.waitFor("the ISR full again", func(p *adminv1.PartitionView) bool { return len(p.GetIsr()) == 3 }); err != nil {
		return f, err
	}
	f.Recovered = true
	after, err := r.produce(3, client.AcksAll, "after")
	if err != nil {
		return f, err
	}
	f.AckedAfter = len(after.acked)
	r.step("recovered: 3 writes with acks=all, %d acknowledged", f.AckedAfter)
	r.show()
	read, _, err := r.readAll()
	if err != nil {
		return f, err
	}
	for v := range read {
		if strings.HasPrefix(v, "refused-") {
			f.ReadRefused++
		}
	}
	r.step("read back %d records, %d of them refused writes", len(read), f.ReadRefused)
	return f, nil
}

// ---- unclean-election ----

type uncleanFacts struct {
	OldLeader       int32
	OfflineHeld     time.Duration // how long the partition was seen leaderless while unclean was off
	LeaderWhileOff  int32         // a leader seen while off (-1: none)
	NewLeader       int32
	OutOfSync       []int32
	AckedReplicated int
	AckedLeaderOnly int
	Lost            int
	LostReplicated  int
}

func (f uncleanFacts) Verdict() []string {
	var out []string
	if f.LeaderWhileOff > 0 {
		out = append(out, fmt.Sprintf("broker %d led while unclean election was off and every ISR member was down", f.LeaderWhileOff))
	} else if f.OfflineHeld == 0 {
		out = append(out, "the partition was never seen offline while unclean election was off")
	}
	if f.NewLeader <= 0 || !slices.Contains(f.OutOfSync, f.NewLeader) {
		out = append(out, fmt.Sprintf("turning unclean election on did not make an out-of-sync replica %v leader (leader %d)", f.OutOfSync, f.NewLeader))
	}
	if f.Lost == 0 {
		out = append(out, fmt.Sprintf("no acknowledged write was lost, yet %d were acknowledged by the old leader alone", f.AckedLeaderOnly))
	}
	if f.LostReplicated > 0 {
		out = append(out, fmt.Sprintf("%d writes acknowledged while the ISR was full were lost too", f.LostReplicated))
	}
	return out
}

func (f uncleanFacts) Explain() string {
	return fmt.Sprintf("Q5: what does unclean election trade?\n"+
		"  Followers %v fell out of the ISR; leader %d acknowledged %d more writes alone (min.insync.replicas=1) and was killed.\n"+
		"  With unclean.leader.election.enable=false the partition had no leader for %s: unavailable, but nothing lost.\n"+
		"  Turned on, out-of-sync broker %d led at once, and %d acknowledged writes were gone for good (the old leader truncated them\n"+
		"  when it came back as a follower); the %d written while the ISR was full survived (%d lost). Availability bought with data:\n"+
		"  leave it off where a lost write matters, and pair acks=all with min.insync.replicas=2 so a lone leader cannot acknowledge.\n",
		f.OutOfSync, f.OldLeader, f.AckedLeaderOnly, f.OfflineHeld.Round(100*time.Millisecond), f.NewLeader, f.Lost, f.AckedReplicated, f.LostReplicated)
}

func playUnclean(r *run) (facts, error) {
	f := uncleanFacts{LeaderWhileOff: -1}
	p, err := r.createTopic(map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "false"})
	if err != nil {
		return f, err
	}
	f.OldLeader, f.OutOfSync = p.GetLeader(), followers(p)
	first, err := r.produce(5, client.AcksAll, "replicated")
	if err != nil {
		return f, err
	}
	f.AckedReplicated = len(first.acked)
	r.step("5 writes with acks=all while the ISR is full: %d acknowledged", f.AckedReplicated)
	for _, id := range f.OutOfSync {
		if err := r.fetchFault(id, true, 0); err != nil {
			return f, err
		}
	}
	r.step("fault API: followers %v stop fetching", f.OutOfSync)
	// A caught-up follower stays in sync however long it does not fetch:
	// a write leaves the stalled followers behind the leader's LEO.
	nudge, err := r.produce(1, client.AcksLeader, "leader-only-acks1")
	if err != nil {
		return f, err
	}
	r.step("1 write with acks=1 (%d acknowledged): the followers will fall behind the leader's LEO", len(nudge.acked))
	if _, err = r.waitFor("the ISR to shrink to the leader", func(p *adminv1.PartitionView) bool { return len(p.GetIsr()) == 1 }); err != nil {
		return f, err
	}
	r.show()
	alone, err := r.produce(5, client.AcksAll, "leader-only")
	if err != nil {
		return f, err
	}
	f.AckedLeaderOnly = len(alone.acked)
	r.step("5 writes with acks=all acknowledged by leader %d alone (ISR [%d], min.insync.replicas=1): %d acknowledged", f.OldLeader, f.OldLeader, f.AckedLeaderOnly)
	if err := r.node(devclusterv1.Action_ACTION_KILL, brokerName(f.OldLeader)); err != nil {
		return f, err
	}
	r.step("kill -9 broker %d, the only ISR member", f.OldLeader)
	for _, id := range f.OutOfSync {
		if err := r.clearFaults(id); err != nil {
			return f, err
		}
	}
	// Watch for a while: the partition must stay without a leader.
	hold := 4 * time.Second
	var offlineSince time.Time
	_ = r.watch(hold+r.o.Wait, func(msg *adminv1.WatchClusterResponse) bool {
		ps := msg.GetPartitions()
		if len(ps) == 0 {
			return true
		}
		p := ps[0]
		if replica(p, f.OldLeader).GetAlive() {
			return true // the controller has not noticed the death yet
		}
		if p.GetLeader() > 0 {
			f.LeaderWhileOff = p.GetLeader()
			return false
		}
		if offlineSince.IsZero() {
			offlineSince = time.Now()
			r.step("unclean.leader.election.enable=false: no ISR member alive, the partition has no leader")
			r.table(msg)
		}
		f.OfflineHeld = time.Since(offlineSince)
		return f.OfflineHeld < hold
	})
	r.step("offline for %s: unavailable but nothing lost", f.OfflineHeld.Round(100*time.Millisecond))
	if err := r.alterTopic("unclean.leader.election.enable", "true"); err != nil {
		return f, err
	}
	r.step("unclean.leader.election.enable=true on %s", r.topic)
	p, err = r.waitFor("an out-of-sync replica to lead", func(p *adminv1.PartitionView) bool { return p.GetLeader() > 0 })
	if err != nil {
		return f, err
	}
	f.NewLeader = p.GetLeader()
	r.step("broker %d, out of sync, leads (epoch %d)", f.NewLeader, p.GetLeaderEpoch())
	r.show()
	if err := r.node(devclusterv1.Action_ACTION_START, brokerName(f.OldLeader)); err != nil {
		return f, err
	}
	r.step("broker %d restarted: it follows %d and truncates what only it had", f.OldLeader, f.NewLeader)
	if _, err := r.waitFor("the ISR full again", func(p *adminv1.PartitionView) bool { return len(p.GetIsr()) == 3 }); err != nil {
		return f, err
	}
	r.show()
	read, _, err := r.readAll()
	if err != nil {
		return f, err
	}
	f.Lost, f.LostReplicated = len(missing(alone.acked, read)), len(missing(first.acked, read))
	r.step("read back: %d of %d writes acknowledged by the lone leader lost; %d of %d replicated ones lost", f.Lost, f.AckedLeaderOnly, f.LostReplicated, f.AckedReplicated)
	if err := r.alterTopic("unclean.leader.election.enable", "false"); err != nil {
		return f, err
	}
	return f, nil
}

// ---- kip101 ----

// kip101Run is one half of the kip101 scenario: broker Last restarted in
// Mode, the window opened, the leader and then the next leader killed.
type kip101Run struct {
	Mode               string
	Topic              string
	Leader, Next, Last int32
	FetchWait          time.Duration
	Value              string
	Acked              bool
	AckedAt            int64
	LastLEO, LastHW    int64 // Last's reported position after the ack, before its new epoch
	LeaderHW           int64
	EpochBefore        int32
	EpochNext          int32
	LEOAfterChange     int64 // Last's reported LEO as follower of Next
	Truncation         string
	NewLeader          int32
	NewLeaderEpoch     int32
	NewLeaderLEO       int64
	Read               []string
	Kept               bool
}

type kip101Facts struct {
	Runs []kip101Run
}

func (f kip101Facts) Verdict() []string {
	var out []string
	if len(f.Runs) != 2 {
		return append(out, fmt.Sprintf("%d of the 2 runs were played", len(f.Runs)))
	}
	for _, r := range f.Runs {
		switch {
		case !r.Acked:
			out = append(out, fmt.Sprintf("%s: the write %s was not acknowledged", r.Mode, r.Value))
		case r.NewLeader != r.Last:
			out = append(out, fmt.Sprintf("%s: broker %d, not the restarted follower %d, ended as leader", r.Mode, r.NewLeader, r.Last))
		case r.Mode == "high-watermark" && r.Kept:
			out = append(out, fmt.Sprintf("high-watermark: the acknowledged %s at offset %d survived (follower %d's HW %d, LEO %d after the ack): "+
				"the restarted follower did not truncate below it", r.Value, r.AckedAt, r.Last, r.LastHW, r.LastLEO))
		case r.Mode == "leader-epoch" && !r.Kept:
			out = append(out, fmt.Sprintf("leader-epoch: the acknowledged %s at offset %d was lost (read back %v)", r.Value, r.AckedAt, r.Read))
		}
	}
	return out
}

func (f kip101Facts) Explain() string {
	var b strings.Builder
	b.WriteString("Q1/Q2: why did Kafka 0.11 replace HW truncation with leader epochs? (KIP-101 scenario 1)\n")
	row := func(label string, get func(kip101Run) string) {
		fmt.Fprintf(&b, "  %-44s", label)
		for _, r := range f.Runs {
			fmt.Fprintf(&b, " %-26s", get(r))
		}
		b.WriteString("\n")
	}
	row("replica.truncation.mode of the follower", func(r kip101Run) string { return r.Mode })
	row("replicas (leader, next, restarted follower)", func(r kip101Run) string { return fmt.Sprintf("%d, %d, %d", r.Leader, r.Next, r.Last) })
	row("acks=all write", func(r kip101Run) string { return fmt.Sprintf("%s at offset %d, acked=%v", r.Value, r.AckedAt, r.Acked) })
	row("leader's HW after the ack", func(r kip101Run) string { return fmt.Sprint(r.LeaderHW) })
	row("follower's LEO / HW then (its HW lags)", func(r kip101Run) string { return fmt.Sprintf("%d / %d", r.LastLEO, r.LastHW) })
	row("leader killed: next leads with epoch", func(r kip101Run) string { return fmt.Sprintf("%d (was %d)", r.EpochNext, r.EpochBefore) })
	row("follower's LEO in the new epoch", func(r kip101Run) string { return fmt.Sprint(r.LEOAfterChange) })
	row("next leader killed: leader, epoch, LEO", func(r kip101Run) string {
		return fmt.Sprintf("%d, %d, %d", r.NewLeader, r.NewLeaderEpoch, r.NewLeaderLEO)
	})
	row("read back after everyone rejoined", func(r kip101Run) string { return fmt.Sprint(r.Read) })
	row("acknowledged write", func(r kip101Run) string {
		if r.Kept {
			return "KEPT"
		}
		return "LOST"
	})
	for _, r := range f.Runs {
		if r.Truncation != "" {
			fmt.Fprintf(&b, "  broker %d's log (%s): %s\n", r.Last, r.Mode, r.Truncation)
		}
	}
	b.WriteString("  The follower's HW lags the leader's by one fetch round trip (§3.3): it had the record but not yet the HW that\n" +
		"  covers it. Truncating to its own HW on a new epoch (pre-0.11) cut an acknowledged record, and once it was elected\n" +
		"  nobody had it any more: the other replicas truncated to the new leader's log. With leader epochs the follower\n" +
		"  keeps its log and asks the leader where its epoch ended (OffsetForLeaderEpoch); the leader had the same record in\n" +
		"  that epoch, so nothing was cut and the record survived the same two leader changes (§4.2-4.3).\n")
	return b.String()
}

// kip101FetchWait is how long the restarted follower's fetches park at the
// leader once caught up, which is how long its HW lags the leader's after
// an ack: long enough to kill the leader inside the window, well inside
// replica.lag.time.max.ms so no ISR shrinks meanwhile.
func kip101FetchWait(lag time.Duration) time.Duration {
	if lag <= 0 {
		lag = 30 * time.Second
	}
	return min(5*time.Second, lag*6/10)
}

func playKIP101(r *run) (facts, error) {
	var f kip101Facts
	base := r.topic
	lag := r.lagTimeOr()
	// Broker 3 is the follower that is restarted in each mode, then elected
	// after brokers 1 and 2 (the assignment's order) died.
	for _, mode := range []string{partitionModeHW, partitionModeLE} {
		r.topic = base + "-" + mode
		run, err := r.kip101Half(mode, lag)
		f.Runs = append(f.Runs, run)
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

const (
	partitionModeHW = "high-watermark"
	partitionModeLE = "leader-epoch"
)

func (r *run) kip101Half(mode string, lag time.Duration) (kip101Run, error) {
	const leader, next, last = 1, 2, 3
	fr := kip101Run{Mode: mode, Topic: r.topic, Leader: leader, Next: next, Last: last, FetchWait: kip101FetchWait(lag), Value: "acked-" + mode}
	r.printf("\n== replica.truncation.mode=%s ==\n", mode)
	args := []string{"--config=replica.truncation.mode=" + mode,
		fmt.Sprintf("--config=replica.fetch.wait.max.ms=%d", fr.FetchWait.Milliseconds())}
	// The topic exists before broker 3 restarts, so the restarted broker
	// fetches it from its first round trip on, in the same request as the
	// rest of what it follows from broker 1. Created after the restart, it
	// would join broker 3's fetch session only once a parked round trip
	// returned, seconds later: long enough, with other topics on broker 3,
	// for the leader to drop broker 3 from the ISR before the write.
	p, err := r.createTopicOn([]int32{leader, next, last}, map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return fr, err
	}
	fr.EpochBefore = p.GetLeaderEpoch()
	epoch := r.brokerEpoch(last)
	if err := r.nodeWith(devclusterv1.Action_ACTION_RESTART, brokerName(last), args...); err != nil {
		return fr, err
	}
	if err := r.waitBrokerAlive(last, epoch); err != nil {
		return fr, err
	}
	if v, err := r.brokerConfig(last, "replica.truncation.mode"); err != nil || v != mode {
		return fr, fmt.Errorf("broker %d was restarted with replica.truncation.mode=%s, but describes it as %q (%v)", last, mode, v, err)
	}
	r.step("restarted broker %d with %s: its fetches park %s at the leader once caught up, so its HW learns of an ack that late",
		last, strings.Join(args, " "), fr.FetchWait)
	if _, err := r.waitFor(fmt.Sprintf("broker %d back in the ISR", last), func(p *adminv1.PartitionView) bool {
		return p.GetLeader() == leader && len(p.GetIsr()) == 3
	}); err != nil {
		return fr, err
	}
	// Let broker 3's fetch reach the log end and park there.
	if err := sleep(r.ctx, fr.FetchWait/2); err != nil {
		return fr, err
	}
	res, err := r.produceValue(fr.Value, 2*fr.FetchWait+5*time.Second)
	if err != nil {
		return fr, err
	}
	fr.Acked, fr.AckedAt = true, res
	// The window is open now: broker 3 has the record, its HW does not.
	// Stall its fetching (no refetch from the next leader after it
	// truncated) and kill the leader before its parked fetch returns.
	if err := r.fetchFault(last, true, 0); err != nil {
		return fr, err
	}
	// Evidence of the window, as broker 3 reports its position (every
	// half second; bounded well inside the window).
	fr.LastLEO, fr.LastHW = -1, -1
	_ = r.watch(fr.FetchWait/3, func(msg *adminv1.WatchClusterResponse) bool {
		if ps := msg.GetPartitions(); len(ps) > 0 {
			fr.LeaderHW = ps[0].GetHighWatermark()
			if rv := replicaView(ps[0], last); rv.GetReported() {
				fr.LastLEO, fr.LastHW = rv.GetLogEndOffset(), rv.GetHighWatermark()
			}
		}
		return fr.LastLEO <= fr.AckedAt
	})
	// The ack itself says the leader's HW passed the record; its report
	// may not show it yet.
	fr.LeaderHW = max(fr.LeaderHW, fr.AckedAt+1)
	if err := r.node(devclusterv1.Action_ACTION_KILL, brokerName(leader)); err != nil {
		return fr, err
	}
	r.step("acks=all write %s acknowledged at offset %d (leader's HW %d); broker %d reports LEO %d, HW %d: it has the record, "+
		"not the HW that covers it. Its fetching stalled, leader %d killed (kill -9) inside the window",
		fr.Value, fr.AckedAt, fr.LeaderHW, last, fr.LastLEO, fr.LastHW, leader)
	p, err = r.waitFor(fmt.Sprintf("broker %d to lead", next), func(p *adminv1.PartitionView) bool { return p.GetLeader() == next })
	if err != nil {
		return fr, err
	}
	fr.EpochNext = p.GetLeaderEpoch()
	r.step("broker %d leads in epoch %d (was %d)", next, fr.EpochNext, fr.EpochBefore)
	// In high-watermark mode broker 3 truncates to its HW as it follows
	// the new epoch: wait (bounded) for its truncation event and its
	// report. In leader-epoch mode it keeps its log and asks the leader
	// where its epoch ended; watch a moment for a truncation that should
	// not come.
	// Broker 3's fetching stays stalled, so broker 2 drops it from the ISR
	// once replica.lag.time.max.ms passes: it must be killed well before,
	// or broker 3 cannot be elected. Its own log says at once when it
	// truncated; the reports through the controller come later.
	wait := min(1500*time.Millisecond, lag/4)
	if mode == partitionModeHW {
		wait = min(5*time.Second, lag/2)
	}
	fr.LEOAfterChange = -1
	_ = r.watch(wait, func(msg *adminv1.WatchClusterResponse) bool {
		for _, e := range msg.GetEvents() {
			if e.GetKind() == controlv1.EventKind_EVENT_KIND_TRUNCATION && e.GetTopic() == r.topic && e.GetNodeId() == last {
				fr.Truncation = fmt.Sprintf("broker %d: %s", last, e.GetReason())
			}
		}
		if ps := msg.GetPartitions(); len(ps) > 0 {
			if rv := replicaView(ps[0], last); rv.GetReported() {
				fr.LEOAfterChange = rv.GetLogEndOffset()
			}
		}
		if mode != partitionModeHW {
			return true
		}
		if fr.Truncation == "" {
			fr.Truncation = r.lastLogLine(brokerName(last), "Truncating to offset")
		}
		return fr.Truncation == ""
	})
	if line := r.lastLogLine(brokerName(last), "Truncating to offset"); line != "" {
		fr.Truncation = line
	}
	r.step("broker %d follows %d in epoch %d with LEO %d", last, next, fr.EpochNext, fr.LEOAfterChange)
	if err := r.node(devclusterv1.Action_ACTION_KILL, brokerName(next)); err != nil {
		return fr, err
	}
	r.step("killed broker %d (kill -9): broker %d, the one ISR member left, is elected", next, last)
	var newLeader *adminv1.PartitionView
	_ = r.watch(r.o.Wait, func(msg *adminv1.WatchClusterResponse) bool {
		if ps := msg.GetPartitions(); len(ps) > 0 && ps[0].GetLeader() > 0 && ps[0].GetLeaderEpoch() > fr.EpochNext {
			newLeader = ps[0]
			return false
		}
		return true
	})
	if newLeader == nil {
		return fr, fmt.Errorf("no leader elected after brokers %d and %d died", leader, next)
	}
	fr.NewLeader, fr.NewLeaderEpoch = newLeader.GetLeader(), newLeader.GetLeaderEpoch()
	if rv := replicaView(newLeader, fr.NewLeader); rv != nil {
		fr.NewLeaderLEO = rv.GetLogEndOffset()
	}
	r.show()
	// Everyone back: the old leaders follow broker 3 and truncate to its log.
	for _, id := range []int32{leader, next} {
		if err := r.node(devclusterv1.Action_ACTION_START, brokerName(id)); err != nil {
			return fr, err
		}
	}
	if err := r.clearFault(last); err != nil {
		return fr, err
	}
	if _, err := r.waitFor("every replica back in the ISR, at the HW", func(p *adminv1.PartitionView) bool {
		return len(p.GetIsr()) == 3 && settledAll(p)
	}); err != nil {
		return fr, err
	}
	r.step("brokers %d and %d restarted and back in the ISR as followers of %d", leader, next, fr.NewLeader)
	r.show()
	read, _, err := r.readAll()
	if err != nil {
		return fr, err
	}
	fr.Read = slices.Sorted(maps.Keys(read))
	_, fr.Kept = read[fr.Value]
	verdict := "LOST"
	if fr.Kept {
		verdict = "kept"
	}
	r.step("read back %v: the acknowledged %s is %s", fr.Read, fr.Value, verdict)
	return fr, nil
}

// settledAll says every replica is alive with its reported LEO at the HW.
// Positions the controller has no report of are unknown, not settled at 0.
func settledAll(p *adminv1.PartitionView) bool {
	for _, rv := range p.GetReplicaViews() {
		if !rv.GetAlive() || !rv.GetReported() || rv.GetLogEndOffset() != p.GetHighWatermark() {
			return false
		}
	}
	return p.GetLeader() > 0 && p.GetHighWatermarkKnown()
}

func replicaView(p *adminv1.PartitionView, id int32) *adminv1.ReplicaView {
	for _, rv := range p.GetReplicaViews() {
		if rv.GetBrokerId() == id {
			return rv
		}
	}
	return nil
}

// ---- fast-leader-changes ----

type fastFacts struct {
	Leaders        []int32
	Epochs         []int32
	Acked, Lost    int
	LostSample     []string
	FinalLEOs      []int64
	FinalHW        int64
	ChangesWanted  int
	AckedMeanwhile int
}

func (f fastFacts) Verdict() []string {
	var out []string
	changes := 0
	for i := 1; i < len(f.Leaders); i++ {
		if f.Leaders[i] != f.Leaders[i-1] {
			changes++
		}
		if f.Epochs[i] <= f.Epochs[i-1] {
			out = append(out, fmt.Sprintf("leader epoch did not increase at change %d: %v", i, f.Epochs))
		}
	}
	if changes < f.ChangesWanted {
		out = append(out, fmt.Sprintf("%d leader changes, want %d (leaders %v)", changes, f.ChangesWanted, f.Leaders))
	}
	if f.Lost > 0 {
		out = append(out, fmt.Sprintf("%d of %d acknowledged writes lost, e.g. %v", f.Lost, f.Acked, f.LostSample))
	}
	if f.AckedMeanwhile == 0 {
		out = append(out, "no write was acknowledged during the changes")
	}
	for _, leo := range f.FinalLEOs {
		if leo != f.FinalHW {
			out = append(out, fmt.Sprintf("replicas did not converge: LEOs %v, HW %d", f.FinalLEOs, f.FinalHW))
			break
		}
	}
	return out
}

func (f fastFacts) Explain() string {
	return fmt.Sprintf("Q3: what do leader epochs solve? / Q4: leaders changing often\n"+
		"  Leaders went %v with epochs %v. After each change the followers asked the new leader where their epoch ended and\n"+
		"  truncated only past it, so after %d changes %d of %d acknowledged writes were lost and every replica ended at LEO %v = HW %d.\n"+
		"  Truncating to a follower's own HW instead (pre-KIP-101) could throw away acknowledged records a fast second change then\n"+
		"  made permanent. Frequent changes in production point at broker.session.timeout.ms / GC pauses / replica.lag.time.max.ms.\n",
		f.Leaders, f.Epochs, len(f.Leaders)-1, f.Lost, f.Acked, f.FinalLEOs, f.FinalHW)
}

func playFastChanges(r *run) (facts, error) {
	f := fastFacts{ChangesWanted: 3}
	p, err := r.createTopic(map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		return f, err
	}
	f.Leaders, f.Epochs = []int32{p.GetLeader()}, []int32{p.GetLeaderEpoch()}
	bg, err := r.startProducer("v", 20*time.Millisecond)
	if err != nil {
		return f, err
	}
	defer func() {
		if bg != nil {
			bg.finish()
		}
	}()
	if err := sleep(r.ctx, 500*time.Millisecond); err != nil {
		return f, err
	}
	start := bg.count()
	for i := range f.ChangesWanted {
		old := f.Leaders[len(f.Leaders)-1]
		if err := r.node(devclusterv1.Action_ACTION_KILL, brokerName(old)); err != nil {
			return f, err
		}
		r.step("change %d: kill -9 leader %d", i+1, old)
		p, err := r.waitFor("a new leader", func(p *adminv1.PartitionView) bool { return p.GetLeader() > 0 && p.GetLeader() != old })
		if err != nil {
			return f, err
		}
		f.Leaders, f.Epochs = append(f.Leaders, p.GetLeader()), append(f.Epochs, p.GetLeaderEpoch())
		r.step("broker %d leads, epoch %d; restart broker %d at once", p.GetLeader(), p.GetLeaderEpoch(), old)
		if err := r.node(devclusterv1.Action_ACTION_START, brokerName(old)); err != nil {
			return f, err
		}
		// The restarted broker back in the ISR before the next kill keeps
		// min.insync.replicas met; no wait beyond that.
		if _, err := r.waitFor("the restarted broker in the ISR", func(p *adminv1.PartitionView) bool { return inISR(p, old) }); err != nil {
			return f, err
		}
		r.show()
	}
	f.AckedMeanwhile = bg.count() - start
	acked, _ := bg.finish()
	bg = nil
	p, err = r.waitFor("every replica at the HW", func(p *adminv1.PartitionView) bool {
		for _, rv := range p.GetReplicaViews() {
			if !rv.GetAlive() || !rv.GetReported() || rv.GetLogEndOffset() != p.GetHighWatermark() {
				return false
			}
		}
		return len(p.GetIsr()) == 3
	})
	if err != nil {
		return f, err
	}
	f.FinalHW = p.GetHighWatermark()
	for _, rv := range p.GetReplicaViews() {
		f.FinalLEOs = append(f.FinalLEOs, rv.GetLogEndOffset())
	}
	read, _, err := r.readAll()
	if err != nil {
		return f, err
	}
	lost := missing(acked, read)
	f.Acked, f.Lost, f.LostSample = len(acked), len(lost), lost[:min(5, len(lost))]
	r.step("leaders %v, epochs %v; %d acknowledged, %d lost; LEOs %v, HW %d", f.Leaders, f.Epochs, f.Acked, f.Lost, f.FinalLEOs, f.FinalHW)
	return f, nil
}

// ---- preferred-election ----

type preferredFacts struct {
	Preferred      int32
	MovedTo        int32
	AfterRestart   int32
	Final          int32
	EpochBefore    int32
	EpochAfter     int32
	ElectionResult string
}

func (f preferredFacts) Verdict() []string {
	var out []string
	if f.MovedTo <= 0 || f.MovedTo == f.Preferred {
		out = append(out, fmt.Sprintf("leadership did not move off preferred broker %d when it stopped (leader %d)", f.Preferred, f.MovedTo))
	}
	if f.Final != f.Preferred {
		out = append(out, fmt.Sprintf("after the preferred election the leader is %d, not the preferred %d (%s)", f.Final, f.Preferred, f.ElectionResult))
	}
	if f.EpochAfter <= f.EpochBefore {
		out = append(out, fmt.Sprintf("the preferred election did not bump the leader epoch (%d -> %d)", f.EpochBefore, f.EpochAfter))
	}
	// Leadership back on the preferred broker proves nothing by itself: the
	// controller's auto.leader.rebalance may have moved it.
	if f.ElectionResult != "ok" {
		res := f.ElectionResult
		if res == "" {
			res = "no result for the partition"
		}
		out = append(out, fmt.Sprintf("the preferred election did not succeed: %s", res))
	}
	return out
}

func (f preferredFacts) Explain() string {
	return fmt.Sprintf("Why a preferred election?\n"+
		"  Broker %d is first in the assignment. Stopped, it handed leadership to %d; restarted, it came back as a follower (leader\n"+
		"  still %d): leadership does not move by itself, so leaders pile up on the brokers that never restarted. The preferred election\n"+
		"  (%s) made %d leader again, epoch %d -> %d.\n",
		f.Preferred, f.MovedTo, f.AfterRestart, f.ElectionResult, f.Final, f.EpochBefore, f.EpochAfter)
}

func playPreferred(r *run) (facts, error) {
	var f preferredFacts
	p, err := r.createTopic(nil)
	if err != nil {
		return f, err
	}
	f.Preferred = p.GetReplicas()[0]
	if _, err := r.waitFor("the preferred replica to lead", func(p *adminv1.PartitionView) bool { return p.GetLeader() == f.Preferred }); err != nil {
		return f, err
	}
	r.step("broker %d, first in the assignment %v, leads", f.Preferred, p.GetReplicas())
	if err := r.node(devclusterv1.Action_ACTION_STOP, brokerName(f.Preferred)); err != nil {
		return f, err
	}
	r.step("stop broker %d (SIGTERM: a controlled shutdown hands its leaderships off)", f.Preferred)
	p, err = r.waitFor("another leader", func(p *adminv1.PartitionView) bool { return p.GetLeader() > 0 && p.GetLeader() != f.Preferred })
	if err != nil {
		return f, err
	}
	f.MovedTo = p.GetLeader()
	r.step("broker %d leads", f.MovedTo)
	if err := r.node(devclusterv1.Action_ACTION_START, brokerName(f.Preferred)); err != nil {
		return f, err
	}
	p, err = r.waitFor("the preferred replica back in the ISR", func(p *adminv1.PartitionView) bool { return inISR(p, f.Preferred) })
	if err != nil {
		return f, err
	}
	f.AfterRestart, f.EpochBefore = p.GetLeader(), p.GetLeaderEpoch()
	r.step("broker %d restarted and rejoined the ISR as a follower; leader still %d", f.Preferred, f.AfterRestart)
	r.show()
	ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
	resp, err := r.admin.ElectLeaders(ctx, &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions: []*commonv1.TopicPartition{{Topic: r.topic, Partition: 0}}, TimeoutMs: 10000})
	cancel()
	if err != nil {
		return f, fmt.Errorf("preferred election: %w", err)
	}
	for _, res := range resp.GetResults() {
		f.ElectionResult = "ok"
		if res.GetErrorCode() != 0 {
			f.ElectionResult = strings.TrimSpace(fmt.Sprintf("%s %s", res.GetErrorCode(), res.GetErrorMessage()))
		}
	}
	r.step("tidemark leader-election --election-type preferred --topic %s --partition 0: %s", r.topic, f.ElectionResult)
	p, _ = r.waitFor("the preferred replica to lead", func(p *adminv1.PartitionView) bool { return p.GetLeader() == f.Preferred })
	if p == nil {
		p = r.show()
	} else {
		r.show()
	}
	f.Final, f.EpochAfter = p.GetLeader(), p.GetLeaderEpoch()
	r.step("leader %d, epoch %d", f.Final, f.EpochAfter)
	return f, nil
}

// ---- controller-failover ----

type controllerFacts struct {
	Old, New            int32
	OldEpoch, NewEpoch  int32
	ActiveAfterResume   int32
	EpochAfterResume    int32
	Refused             int
	RefusedLogs         string
	WritesAfterFailover int
	// ZombieAnswer is how the resumed old controller answered a request
	// sent to it directly ("ok" if it acted).
	ZombieAnswer string
}

func (f controllerFacts) Verdict() []string {
	var out []string
	if f.New <= 0 || f.New == f.Old {
		out = append(out, fmt.Sprintf("no standby took office after controller %d froze (active %d)", f.Old, f.New))
	}
	if f.NewEpoch <= f.OldEpoch {
		out = append(out, fmt.Sprintf("controller_epoch did not move (%d -> %d)", f.OldEpoch, f.NewEpoch))
	}
	if f.ActiveAfterResume != f.New || f.EpochAfterResume < f.NewEpoch {
		out = append(out, fmt.Sprintf("after the old controller %d resumed the active one is %d with controller_epoch %d (want %d with >= %d)",
			f.Old, f.ActiveAfterResume, f.EpochAfterResume, f.New, f.NewEpoch))
	}
	if f.WritesAfterFailover == 0 {
		out = append(out, "no write succeeded after the failover")
	}
	if f.ZombieAnswer == "ok" {
		out = append(out, fmt.Sprintf("the resumed old controller %d acted on a request after its term ended", f.Old))
	}
	return out
}

func (f controllerFacts) Explain() string {
	return fmt.Sprintf("Why controller_epoch?\n"+
		"  Controller %d (controller_epoch %d) was frozen; controller %d took office with controller_epoch %d. Resumed, the old one\n"+
		"  found its term over (active still %d, epoch %d); asked to act at once it answered %s; brokers refused %d request(s)\n"+
		"  stamped with a stale epoch %s.\n"+
		"  Brokers act only on the highest controller_epoch they have seen, so a zombie controller cannot move a leader.\n",
		f.Old, f.OldEpoch, f.New, f.NewEpoch, f.ActiveAfterResume, f.EpochAfterResume, f.ZombieAnswer, f.Refused, f.RefusedLogs)
}

func controllerName(id int32) string { return fmt.Sprintf("controller-%d", id) }

func playControllerFailover(r *run) (facts, error) {
	var f controllerFacts
	if len(r.env.Controllers) < 2 {
		return f, fmt.Errorf("controller-failover needs 2 controllers; the cluster runs %d", len(r.env.Controllers))
	}
	if _, err := r.createTopic(map[string]string{"min.insync.replicas": "2"}); err != nil {
		return f, err
	}
	a, err := r.activeController(nil)
	if err != nil {
		return f, err
	}
	f.Old, f.OldEpoch = a.id, a.epoch
	r.step("controller %d is active, controller_epoch %d", f.Old, f.OldEpoch)
	logSizes := r.logSizes()
	if err := r.node(devclusterv1.Action_ACTION_PAUSE, controllerName(f.Old)); err != nil {
		return f, err
	}
	frozen := time.Now()
	r.step("SIGSTOP controller %d: it cannot renew its lease in etcd", f.Old)
	deadline := time.Now().Add(r.o.Wait)
	for {
		a, err := r.activeController(map[int32]bool{f.Old: true})
		if err == nil && a.id != f.Old {
			f.New, f.NewEpoch = a.id, a.epoch
			break
		}
		if time.Now().After(deadline) {
			return f, fmt.Errorf("no standby took office %s after controller %d froze (last: %v)", r.o.Wait, f.Old, err)
		}
		if err := sleep(r.ctx, 200*time.Millisecond); err != nil {
			return f, err
		}
	}
	r.step("controller %d took office %s later (the old lease expired), controller_epoch %d -> %d", f.New,
		time.Since(frozen).Round(10*time.Millisecond), f.OldEpoch, f.NewEpoch)
	r.show()
	if err := r.node(devclusterv1.Action_ACTION_RESUME, controllerName(f.Old)); err != nil {
		return f, err
	}
	r.step("SIGCONT controller %d: it wakes up believing it leads with controller_epoch %d", f.Old, f.OldEpoch)
	// At once, before it can notice its lost lease, ask the zombie itself
	// to act: it must refuse, or its write must be fenced.
	f.ZombieAnswer = r.askZombie(f.Old)
	r.step("asked controller %d directly to create topic %s-zombie: %s", f.Old, r.topic, f.ZombieAnswer)
	if err := sleep(r.ctx, 3*time.Second); err != nil {
		return f, err
	}
	if a, err := r.activeController(nil); err == nil {
		f.ActiveAfterResume, f.EpochAfterResume = a.id, a.epoch
	} else {
		r.step("after the resume: %v", err)
	}
	f.Refused, f.RefusedLogs = r.countSince(logSizes, "stale controller")
	r.step("active: controller %d, controller_epoch %d; brokers' refusals of a stale controller_epoch in their logs since the freeze: %d %s",
		f.ActiveAfterResume, f.EpochAfterResume, f.Refused, f.RefusedLogs)
	w, err := r.produce(3, client.AcksAll, "after")
	if err != nil {
		return f, err
	}
	f.WritesAfterFailover = len(w.acked)
	r.step("3 writes with acks=all under the new controller: %d acknowledged", f.WritesAfterFailover)
	r.show()
	return f, nil
}

// askZombie sends controller id a CreateTopics directly (no redirect) and
// says how it answered: "ok", or the error it refused with.
func (r *run) askZombie(id int32) string {
	conn, err := r.env.dial(r.env.Controllers[id-1])
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	resp, err := adminv1.NewAdminServiceClient(conn).CreateTopics(ctx, &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{{
		Name: r.topic + "-zombie", NumPartitions: 1, ReplicationFactor: 3}}})
	if err != nil {
		return "refused: " + status.Convert(err).Message()
	}
	for _, t := range resp.GetResults() {
		if t.GetErrorCode() != 0 {
			return "refused: " + t.GetErrorCode().String() + " (" + t.GetErrorMessage() + ")"
		}
	}
	return "ok"
}

type active struct{ id, epoch int32 }

// activeController asks every controller not in skip, each directly with
// a short timeout (a frozen one must not hold the question up): the ones
// that answer DescribeCluster must agree on the active controller.
func (r *run) activeController(skip map[int32]bool) (active, error) {
	var seen []active
	var errs []error
	for i, addr := range r.env.Controllers {
		if skip[int32(i+1)] {
			continue
		}
		conn, err := r.env.dial(addr)
		if err != nil {
			return active{}, err
		}
		ctx, cancel := context.WithTimeout(r.ctx, time.Second)
		d, err := adminv1.NewAdminServiceClient(conn).DescribeCluster(ctx, &adminv1.DescribeClusterRequest{})
		cancel()
		conn.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("controller %d: %w", i+1, err))
			continue
		}
		if d.GetController().GetId() > 0 {
			seen = append(seen, active{d.GetController().GetId(), d.GetControllerEpoch()})
		}
	}
	if len(seen) == 0 {
		return active{}, fmt.Errorf("no controller names an active one: %w", errors.Join(errs...))
	}
	for _, a := range seen[1:] {
		if a != seen[0] {
			return active{}, fmt.Errorf("the controllers disagree on the active one: %v", seen)
		}
	}
	return seen[0], nil
}

// logSizes records the node logs' sizes, to read what is written after.
func (r *run) logSizes() map[string]int64 {
	out := map[string]int64{}
	for name, path := range r.env.Logs {
		if fi, err := os.Stat(path); err == nil {
			out[name] = fi.Size()
		}
	}
	return out
}

// countSince counts the lines containing needle written to the node logs
// after from, and names the logs they are in.
func (r *run) countSince(from map[string]int64, needle string) (int, string) {
	n := 0
	var where []string
	for name, off := range from {
		data, err := os.ReadFile(r.env.Logs[name])
		if err != nil || int64(len(data)) < off {
			continue
		}
		c := strings.Count(string(data[off:]), needle)
		if c > 0 {
			n += c
			where = append(where, fmt.Sprintf("%s: %d", name, c))
		}
	}
	slices.Sort(where)
	if len(from) == 0 {
		return 0, "(node logs not readable from here)"
	}
	if n == 0 {
		return 0, "(none: it sent nothing before it saw its term was over)"
	}
	return n, "(" + strings.Join(where, ", ") + ")"
}
