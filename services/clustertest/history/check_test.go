package history

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var tpA = TP{Topic: "a", Partition: 0}

// build makes histories by hand: times in milliseconds after t0.
type build struct {
	h History
}

func (b *build) produce(tp TP, acks int32, value string, start, end int, o Outcome, offset int64) {
	b.h.Produces = append(b.h.Produces, Produce{ID: int64(len(b.h.Produces)), Producer: "p1", Idempotent: true, TP: tp,
		Value: value, Acks: acks, Start: at(start), End: at(end), Outcome: o, Offset: offset})
}

func (b *build) read(session int64, tp TP, offset int64, value string, t int) {
	b.h.Consumes = append(b.h.Consumes, Consume{Consumer: "c1", Session: session, TP: tp, Offset: offset, Value: value, Time: at(t)})
}

func (b *build) event(kind EventKind, what string, t int) {
	b.h.Events = append(b.h.Events, Event{Time: at(t), Kind: kind, What: what})
}

// whole is a partition whose three replicas all hold values from offset 0,
// live 100ms after the faults stopped at 10s.
func whole(tp TP, values ...string) PartitionState {
	ps := PartitionState{TP: tp, Leader: 1, ISR: []int32{1, 2, 3}, LiveAt: at(10100)}
	for id := int32(1); id <= 3; id++ {
		ps.Replicas = append(ps.Replicas, replica(id, 0, values...))
	}
	return ps
}

func replica(id int32, start int64, values ...string) ReplicaState {
	r := ReplicaState{Broker: id, Readable: true, LogStart: start, LEO: start + int64(len(values)), HW: start + int64(len(values))}
	for i, v := range values {
		r.Records = append(r.Records, Record{Offset: start + int64(i), Value: v})
	}
	return r
}

func final(ps ...PartitionState) Final { return Final{FaultsStopped: at(10000), Partitions: ps} }

var durableA = Options{Durable: map[string]bool{"a": true}, LivenessBound: time.Second}

// clean is a history that keeps every promise: three acknowledged writes,
// one failed attempt that was not written, reads in order.
func clean() *build {
	b := &build{}
	b.produce(tpA, AcksAll, "v0", 0, 10, Acked, 0)
	b.produce(tpA, AcksAll, "v1", 20, 30, Acked, 1)
	b.produce(tpA, AcksAll, "lost-but-failed", 35, 40, Failed, -1)
	b.produce(tpA, AcksAll, "v2", 50, 60, Acked, 2)
	b.read(1, tpA, 0, "v0", 15)
	b.read(1, tpA, 1, "v1", 35)
	b.read(1, tpA, 2, "v2", 70)
	b.event(Fault, "broker 2 crashed", 32)
	return b
}

func mustKinds(t *testing.T, r Report, want ...Kind) {
	t.Helper()
	got := map[Kind]int{}
	for _, v := range r.Violations {
		got[v.Kind]++
	}
	for _, k := range want {
		if got[k] == 0 {
			t.Errorf("want a %s violation, got:\n%s", k, r)
		}
		delete(got, k)
	}
	for k := range got {
		t.Errorf("unexpected %s violation:\n%s", k, r)
	}
}

func TestCleanHistoryPasses(t *testing.T) {
	r := Check(clean().h, final(whole(tpA, "v0", "v1", "v2")), durableA)
	if !r.OK() {
		t.Fatalf("clean history reported:\n%s", r)
	}
	if r.Stats.AckedAll != 3 || r.Stats.Failed != 1 || r.Stats.Consumed != 3 {
		t.Fatalf("stats %+v", r.Stats)
	}
	if got := r.Stats.Linearizable["a-0"]; got != "Ok" {
		t.Fatalf("linearizability %q, want Ok", got)
	}
}

// A workload that writes one value twice is refused: every verdict finds
// records by value.
func TestAReusedValueIsReported(t *testing.T) {
	b := clean()
	b.produce(tpA, -1, "v1", 3000, 3010, Failed, -1)
	r := Check(b.h, final(whole(tpA, "v0", "v1", "v2")), durableA)
	if r.Count(ReusedValue) != 1 || !strings.Contains(r.String(), `"v1" written by two attempts`) {
		t.Fatalf("reused value: %s", r)
	}
}

func TestLostAckedWrite(t *testing.T) {
	b := clean()
	// v2 acknowledged at 2 is gone: the final log ends at 2.
	r := Check(b.h, final(whole(tpA, "v0", "v1")), durableA)
	mustKinds(t, r, LostWrite, VanishedRead, NotLinearizable)
	v := r.Violations[0]
	if v.Kind != LostWrite || v.Offset != 2 || !strings.Contains(v.String(), `"v2"`) {
		t.Fatalf("first violation %s", v)
	}
	if len(v.Events) != 1 || v.Events[0].What != "broker 2 crashed" {
		t.Fatalf("events around the loss %v, want the crash", v.Events)
	}
}

func TestOverwrittenAndMovedAckedWrites(t *testing.T) {
	b := clean()
	b.produce(tpA, AcksAll, "x", 80, 90, Failed, -1)
	b.h.Consumes = nil
	// Offset 1 now holds x (a failed write), v1 moved to offset 3.
	r := Check(b.h, final(whole(tpA, "v0", "x", "v2", "v1")), Options{Durable: durableA.Durable, LinearizableOps: -1})
	mustKinds(t, r, MovedWrite)
	b.h.Produces[1].Value = "v1-gone"
	r = Check(b.h, final(whole(tpA, "v0", "x", "v2")), Options{Durable: durableA.Durable, LinearizableOps: -1})
	mustKinds(t, r, LostWrite)
	if !strings.Contains(r.String(), `final log at offset 1: "x"`) {
		t.Fatalf("report does not name what replaced it:\n%s", r)
	}
}

func TestAcksOneLossIsOnlyCountedUnlessPromised(t *testing.T) {
	b := &build{}
	b.produce(tpA, AcksLeader, "w0", 0, 10, Acked, 0)
	b.produce(tpA, AcksLeader, "w1", 20, 30, Acked, 1)
	f := final(whole(tpA, "w0"))
	r := Check(b.h, f, durableA)
	if !r.OK() || r.Stats.LostUnpromised != 1 {
		t.Fatalf("acks=1 loss: want only counted, got lost=%d\n%s", r.Stats.LostUnpromised, r)
	}
	promised := durableA
	promised.AcksOneDurable = true
	mustKinds(t, Check(b.h, f, promised), LostWrite, NotLinearizable)
	// acks=all in a topic that is not Durable: counted only.
	b.h.Produces[1].Acks = AcksAll
	if r := Check(b.h, f, Options{}); !r.OK() || r.Stats.LostUnpromised != 1 {
		t.Fatalf("undurable topic: %s", r)
	}
}

func TestRetentionIsNotLoss(t *testing.T) {
	b := clean()
	ps := whole(tpA)
	for i := range ps.Replicas {
		ps.Replicas[i] = replica(ps.Replicas[i].Broker, 2, "v2")
	}
	withRetention := durableA
	withRetention.Retention = map[string]bool{"a": true}
	r := Check(b.h, final(ps), withRetention)
	if !r.OK() || r.Stats.Expired != 2 {
		t.Fatalf("records below log start: want 2 expired, no violation; got %d\n%s", r.Stats.Expired, r)
	}
}

func TestReplicasDivergeOrKeepHWBelowLEO(t *testing.T) {
	ps := whole(tpA, "v0", "v1", "v2")
	ps.Replicas[2] = replica(3, 0, "v0", "other", "v2")
	mustKinds(t, Check(clean().h, final(ps), durableA), Divergence)

	ps = whole(tpA, "v0", "v1", "v2")
	ps.Replicas[1] = replica(2, 0, "v0", "v1") // a follower stuck behind
	r := Check(clean().h, final(ps), Options{Durable: durableA.Durable})
	mustKinds(t, r, Divergence)

	ps = whole(tpA, "v0", "v1", "v2")
	ps.Replicas[0].HW = 0 // the idle partition's new leader never advanced
	ps.LiveAt = time.Time{}
	r = Check(clean().h, final(ps), durableA)
	mustKinds(t, r, HWBelowLEO, NotLive)
	// Under min.insync.replicas the HW may not move (KAFKA-15583).
	ps.ISR, ps.MinInsyncReplicas = []int32{1}, 2
	mustKinds(t, Check(clean().h, final(ps), durableA), NotLive)
	mustKinds(t, Check(clean().h, final(ps), Options{Durable: durableA.Durable}))
	// An unreadable replica is not compared, but the partition is not whole.
	ps = whole(tpA, "v0", "v1", "v2")
	ps.Replicas[2] = ReplicaState{Broker: 3}
	ps.LiveAt = time.Time{}
	mustKinds(t, Check(clean().h, final(ps), durableA), NotLive)
}

func TestReadsBackwardsOrVanished(t *testing.T) {
	b := clean()
	b.read(1, tpA, 1, "v1", 80) // session 1 again at 1 after 2
	b.read(2, tpA, 0, "v0", 90) // a new session may start over
	mustKinds(t, Check(b.h, final(whole(tpA, "v0", "v1", "v2")), durableA), ReadBackwards)

	b = &build{}
	b.produce(tpA, AcksAll, "v0", 0, 10, Acked, 0)
	b.produce(tpA, AcksAll, "u1", 20, 0, Unknown, -1)
	b.read(1, tpA, 1, "u1", 40) // read, then gone: truncated below the HW
	b.produce(tpA, AcksAll, "v2", 50, 60, Acked, 1)
	r := Check(b.h, final(whole(tpA, "v0", "v2")), durableA)
	mustKinds(t, r, VanishedRead, NotLinearizable)
	// In a topic with no promise it is only counted.
	r = Check(b.h, final(whole(tpA, "v0", "v2")), Options{})
	if !r.OK() || r.Stats.ReadsVanishedUnpromised != 1 {
		t.Fatalf("undurable vanished read: %s", r)
	}
}

func TestLiveness(t *testing.T) {
	ps := whole(tpA, "v0", "v1", "v2")
	ps.LiveAt = at(10000 + 1500)
	mustKinds(t, Check(clean().h, final(ps), durableA), NotLive)
	ps.LiveAt = time.Time{}
	ps.ISR = []int32{1, 2}
	r := Check(clean().h, final(ps), durableA)
	mustKinds(t, r, NotLive)
	if !strings.Contains(r.String(), "replica 3 not in ISR") {
		t.Fatalf("liveness violation does not say why:\n%s", r)
	}
	// Zero bound: not checked.
	if r := Check(clean().h, final(ps), Options{Durable: durableA.Durable}); !r.OK() {
		t.Fatalf("liveness checked with no bound:\n%s", r)
	}
	// Whole replicas with a reassignment still in flight: not whole.
	ps = whole(tpA, "v0", "v1", "v2")
	ps.Adding, ps.Removing = []int32{3}, []int32{1}
	r = Check(clean().h, final(ps), durableA)
	mustKinds(t, r, NotLive)
	if !strings.Contains(r.String(), "reassignment in flight") {
		t.Fatalf("liveness violation does not name the reassignment:\n%s", r)
	}
}

func TestDuplicatesAndPhantoms(t *testing.T) {
	r := Check(clean().h, final(whole(tpA, "v0", "v1", "v2", "v2")), Options{Durable: durableA.Durable, LinearizableOps: -1})
	mustKinds(t, r, Duplicate)
	b := clean()
	b.h.Produces[3].Idempotent = false
	if r := Check(b.h, final(whole(tpA, "v0", "v1", "v2", "v2")), Options{Durable: durableA.Durable, LinearizableOps: -1}); !r.OK() {
		t.Fatalf("a non-idempotent producer's retry duplicate reported:\n%s", r)
	}
	b = clean()
	b.read(1, tpA, 3, "nobody", 95)
	mustKinds(t, Check(b.h, final(whole(tpA, "v0", "v1", "v2", "nobody")), Options{Durable: durableA.Durable, LinearizableOps: -1}), PhantomRecord)
}

// What only the linearizability check sees: each violation below passes
// every direct check.
func TestLinearizabilityCatchesRealTimeOrder(t *testing.T) {
	// v0 got the lower offset although v1 was acknowledged before v0 was
	// even sent.
	b := &build{}
	b.produce(tpA, AcksAll, "v1", 0, 10, Acked, 1)
	b.produce(tpA, AcksAll, "v0", 20, 30, Acked, 0)
	r := Check(b.h, final(whole(tpA, "v0", "v1")), durableA)
	mustKinds(t, r, NotLinearizable)
	if !strings.Contains(r.String(), "unplaceable") {
		t.Fatalf("no operation named:\n%s", r)
	}

	// A read returned v0 before v0 was sent.
	b = &build{}
	b.read(1, tpA, 0, "v0", 5)
	b.produce(tpA, AcksAll, "v0", 20, 30, Acked, 0)
	mustKinds(t, Check(b.h, final(whole(tpA, "v0")), durableA), NotLinearizable)

	// Two reads disagree about an offset retention has since deleted.
	b = &build{}
	b.produce(tpA, AcksAll, "v0", 0, 10, Acked, 0)
	b.produce(tpA, AcksAll, "w0", 0, 0, Unknown, -1)
	b.read(1, tpA, 0, "v0", 20)
	b.read(2, tpA, 0, "w0", 30)
	ps := whole(tpA)
	for i := range ps.Replicas {
		ps.Replicas[i] = replica(ps.Replicas[i].Broker, 1)
	}
	withRetention := durableA
	withRetention.Retention = map[string]bool{"a": true}
	mustKinds(t, Check(b.h, final(ps), withRetention), NotLinearizable)
}

func TestLinearizabilityIsBounded(t *testing.T) {
	b := &build{}
	var vals []string
	for i := 0; i < 50; i++ {
		v := fmt.Sprint("v", i)
		b.produce(tpA, AcksAll, v, i*10, i*10+5, Acked, int64(i))
		vals = append(vals, v)
	}
	r := Check(b.h, final(whole(tpA, vals...)), Options{Durable: durableA.Durable, LinearizableOps: 10})
	if !r.OK() || !strings.HasPrefix(r.Stats.Linearizable["a-0"], "skipped") {
		t.Fatalf("over the cap: %s", r)
	}
}

func TestRecorderIsConcurrentAndMarshals(t *testing.T) {
	rec := NewRecorder()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				id := rec.Start("p", true, tpA, AcksAll, fmt.Sprintf("g%d-%d", g, i))
				switch i % 3 {
				case 0:
					rec.Acked(id, int64(i))
				case 1:
					rec.Failed(id, "NOT_ENOUGH_REPLICAS")
				default:
					rec.Unknown(id, "deadline exceeded")
				}
				rec.Consumed("c", 1, tpA, int64(i), "x")
				rec.Event(Note, "step %d", i)
			}
		}()
	}
	wg.Wait()
	h := rec.History()
	if len(h.Produces) != 400 || len(h.Consumes) != 400 || len(h.Events) != 400 {
		t.Fatalf("recorded %d/%d/%d", len(h.Produces), len(h.Consumes), len(h.Events))
	}
	for i, p := range h.Produces {
		if p.ID != int64(i) || p.Outcome == Pending || p.End.Before(p.Start) {
			t.Fatalf("produce %d: %+v", i, p)
		}
	}
	data, err := json.Marshal(struct {
		H History
		F Final
	}{h, final(whole(tpA, "v0"))})
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		H History
		F Final
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.H.Produces) != 400 || back.F.Partitions[0].Replicas[0].Records[0].Value != "v0" || !back.H.Produces[0].Start.Equal(h.Produces[0].Start) {
		t.Fatalf("JSON round trip lost data")
	}
}

func TestNoReadableReplica(t *testing.T) {
	ps := whole(tpA)
	for i := range ps.Replicas {
		ps.Replicas[i] = ReplicaState{Broker: ps.Replicas[i].Broker}
	}
	ps.LiveAt = time.Time{}
	r := Check(clean().h, final(ps), Options{Durable: durableA.Durable})
	mustKinds(t, r, NoFinalLog)
	if r.Count(NoFinalLog) != 1 {
		t.Fatalf("want one no-readable-replica violation per partition, got\n%s", r)
	}
}
