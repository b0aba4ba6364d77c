package history

import (
	"testing"
	"time"
)

// Mutation tests: each injects one broken promise into an otherwise
// clean history or final state and wants the checker to report it.

// An acknowledged acks=all write whose acknowledgement carried no offset
// (the client turns a DUPLICATE_SEQUENCE_NUMBER answer into a success with
// offset -1, services/client/partition_settle.go) and that is nowhere in the
// final log, of a topic whose log start is still 0 (nothing expired), is a
// lost write. The checker files it under "expired by retention" instead.
func TestAckedWriteWithoutOffsetMissingFromLog(t *testing.T) {
	b := clean()
	b.produce(tpA, AcksAll, "dup-acked", 62, 64, Acked, -1) // acked, offset unknown, never written
	r := Check(b.h, final(whole(tpA, "v0", "v1", "v2")), Options{Durable: durableA.Durable, LivenessBound: time.Second, LinearizableOps: -1})
	if r.Count(LostWrite) == 0 {
		t.Fatalf("acked acks=all write missing from the final log not reported (expired=%d):\n%s", r.Stats.Expired, r)
	}
}

// A replica whose HW is above its LEO is never legitimate; the
// min.insync.replicas exemption is for an HW that may not move up.
func TestHWAboveLEOUnderMinISR(t *testing.T) {
	ps := whole(tpA, "v0", "v1", "v2")
	ps.ISR, ps.MinInsyncReplicas = []int32{1}, 2
	ps.Replicas[1].HW = 7 // broker 2 claims records 3..6 committed that it does not hold
	r := Check(clean().h, final(ps), Options{Durable: durableA.Durable, LinearizableOps: -1})
	if r.OK() {
		t.Fatalf("HW 7 above LEO 3 on replica 2 not reported:\n%s", r)
	}
}

// The leader lost its first records (segment deleted, log start moved up)
// in a topic with no retention at all; the followers still hold them. The
// checker counts the acknowledged writes as expired and compares nothing
// below the leader's log start.
func TestLostPrefixOfTopicWithoutRetentionLooksExpired(t *testing.T) {
	ps := whole(tpA, "v0", "v1", "v2")
	ps.Replicas[0] = replica(1, 2, "v2") // the leader: log start 2
	r := Check(clean().h, final(ps), durableA)
	if r.OK() {
		t.Fatalf("acknowledged writes v0, v1 gone from the leader of a topic without retention: no violation (expired=%d)\n%s", r.Stats.Expired, r)
	}
}

// A partition whose named leader is not one of its replicas is not whole.
func TestLeaderOutsideReplicasIsNotLive(t *testing.T) {
	ps := whole(tpA, "v0", "v1", "v2")
	ps.Leader = 7
	if ok, _ := ps.Live(); ok {
		t.Fatalf("leader 7 of replicas 1,2,3 counted as whole")
	}
}

// The linearizability cap: an acknowledgement order that contradicts real
// time (only porcupine checks it) passes once the partition has more
// operations than LinearizableOps (3000 in every run; the chaos run's
// partitions reach it in about a minute), and Report.OK stays true.
func TestRealTimeOrderViolationHiddenByTheCap(t *testing.T) {
	b := &build{}
	b.produce(tpA, AcksAll, "v1", 0, 10, Acked, 1)
	b.produce(tpA, AcksAll, "v0", 20, 30, Acked, 0) // sent after v1 was acked, got the lower offset
	r := Check(b.h, final(whole(tpA, "v0", "v1")), Options{Durable: durableA.Durable, LivenessBound: time.Second, LinearizableOps: 2})
	if r.OK() {
		t.Fatalf("real-time order violation passes when linearizability is %q:\n%s", r.Stats.Linearizable["a-0"], r)
	}
}

// No false alarm: a write acknowledged without an offset that is in the
// log passes; a read before its write was sent is caught above the cap.
func TestDirectChecksStayQuietOnCleanHistories(t *testing.T) {
	b := clean()
	b.produce(tpA, AcksAll, "dup-acked", 62, 64, Acked, -1)
	if r := Check(b.h, final(whole(tpA, "v0", "v1", "v2", "dup-acked")), Options{Durable: durableA.Durable, LinearizableOps: 2}); !r.OK() {
		t.Fatalf("clean history with an offsetless ack reported:\n%s", r)
	}
	b = &build{}
	b.read(1, tpA, 0, "v0", 5)
	b.produce(tpA, AcksAll, "v0", 20, 30, Acked, 0)
	mustKinds(t, Check(b.h, final(whole(tpA, "v0")), Options{Durable: durableA.Durable, LinearizableOps: 1}), NotLinearizable)
}
