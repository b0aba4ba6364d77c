package chaos

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"tidemark.io/services/clustertest/history"
)

// fenceHistory: leader-acks-0 led by broker 1 at epoch 4, cut at t0.
// Two acks=1 writes acknowledged by the old epoch: one sent just after the
// cut (allowed: before the lease), one sent two leases after the cut (the
// fence must have refused it).
func fenceHistory(t0 time.Time) (*runner, history.History, history.Final) {
	tp := history.TP{Topic: "leader-acks", Partition: 0}
	h := history.History{Produces: []history.Produce{
		{ID: 0, TP: tp, Value: "early", Acks: history.AcksLeader, Start: t0.Add(100 * time.Millisecond), End: t0.Add(150 * time.Millisecond), Outcome: history.Acked, Offset: 0},
		{ID: 1, TP: tp, Value: "late", Acks: history.AcksLeader, Start: t0.Add(2 * leaseTTL), End: t0.Add(2*leaseTTL + 50*time.Millisecond), Outcome: history.Acked, Offset: 1},
	}}
	r := &runner{}
	r.epochs.set(0, 4)
	r.epochs.set(1, 4)
	final := history.Final{Partitions: []history.PartitionState{{TP: tp, Leader: 1, ISR: []int32{1, 2, 3},
		Replicas: []history.ReplicaState{{Broker: 1, Readable: true, LEO: 2, HW: 2,
			Records: []history.Record{{Offset: 0, Value: "early"}, {Offset: 1, Value: "late"}}}}}}}
	return r, h, final
}

// Sanity (passes today): with a new leader seen, an old-epoch ack sent
// after the lease and acknowledged after the election breaks the fence.
func TestFenceBrokenAfterElectionIsReported(t *testing.T) {
	t0 := time.Now()
	r, h, final := fenceHistory(t0)
	r.fences = []Fence{{TP: h.Produces[0].TP, OldLeader: 1, OldEpoch: 4, NewLeader: 2, NewEpoch: 5,
		CutAt: t0, ElectedAt: t0.Add(leaseTTL + 100*time.Millisecond), HealedAt: t0.Add(3 * leaseTTL)}}
	f := r.judgeFences(h, final)[0]
	if f.OK() || f.AckedAfterElection != 1 || f.SentAfterLease != 1 {
		t.Fatalf("fence judged OK: %s", f)
	}
}

// The leader fence refuses acks=0/1 writes once the lease may be gone,
// election or not (DESIGN.md section 4; section 3: "none sent more than a
// lease after the cut"). When the runner saw no new leader (the controller
// never elected one, or the cut did not actually cut the leader from etcd),
// judgeFences counts nothing and the fence is reported held.
func TestFenceWithoutNewLeaderStillJudged(t *testing.T) {
	t0 := time.Now()
	r, h, final := fenceHistory(t0)
	r.fences = []Fence{{TP: h.Produces[0].TP, OldLeader: 1, OldEpoch: 4, NewLeader: -1,
		CutAt: t0, HealedAt: t0.Add(3 * leaseTTL)}}
	f := r.judgeFences(h, final)[0]
	if f.OK() {
		t.Fatalf("broker-1 acknowledged an acks=1 write sent %s after its cut (lease %s), yet the fence is judged held: %s",
			2*leaseTTL, leaseTTL, f)
	}
}

// A replica whose HW checkpoint (written by its graceful stop) is above
// the log it left on disk: the reader clamps the HW to the LEO, so the
// checker sees HW = LEO and reports nothing.
func TestDiskHWAboveLEOReported(t *testing.T) {
	dir := t.TempDir()
	tp := history.TP{Topic: "durable", Partition: 0}
	writeFile(t, filepath.Join(dir, "durable-0", "00000000000000000000.log"), slices.Concat(batch(0, "a", "b", "c")))
	writeFile(t, filepath.Join(dir, "log-start-offset-checkpoint"), checkpoint("durable 0 0"))
	writeFile(t, filepath.Join(dir, "replication-offset-checkpoint"), checkpoint("durable 0 9"))
	rs, notes, err := readReplica(dir, 1, tp)
	if err != nil {
		t.Fatal(err)
	}
	ps := history.PartitionState{TP: tp, Leader: 1, ISR: []int32{1}, Replicas: []history.ReplicaState{rs}}
	var h history.History
	for i, v := range []string{"a", "b", "c"} {
		h.Produces = append(h.Produces, history.Produce{ID: int64(i), TP: tp, Value: v, Acks: history.AcksAll,
			Start: time.Unix(int64(i), 0), End: time.Unix(int64(i), 1), Outcome: history.Acked, Offset: int64(i)})
	}
	rep := history.Check(h, history.Final{Partitions: []history.PartitionState{ps}},
		history.Options{Durable: map[string]bool{"durable": true}, LinearizableOps: -1})
	if rep.OK() {
		t.Fatalf("HW checkpoint 9 over a log ending at 3: read as HW %d LEO %d (notes %q); checker:\n%s", rs.HW, rs.LEO, notes, rep)
	}
}
