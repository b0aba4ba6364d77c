package replica

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"

	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// hwOf returns m's HW of tp0.
func hwOf(t *testing.T, m *Manager) int64 {
	t.Helper()
	return hwOfPartition(t, m, tp0)
}

// hwOfPartition returns m's HW of tp.
func hwOfPartition(t *testing.T, m *Manager, tp TP) int64 {
	t.Helper()
	r, ok := m.Replica(tp)
	if !ok {
		t.Fatalf("%v is not hosted", tp)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.HighWatermark()
}

// Broker 2's real follower fetcher replicates from broker 1 through the
// in-memory network: the acks=all produce is answered once the follower's
// fetch at the next offset reaches the leader, and the follower learns the
// HW only from a later answer: with nothing new the leader holds each fetch
// for its max wait and then answers with the HW as it is (Kafka's behaviour;
// the window of KIP-101).
func TestFollowerFetcherCommitsAcksAllProduce(t *testing.T) {
	e := newEnv(t)
	m2, _ := e.newManager(2)
	e.updateMetadataOn(m2)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)

	out := make(chan produceOutcome, 1)
	go func() {
		res, err := e.m.Produce(context.Background(), tp0, -1, batch("a"), produceTimeout)
		out <- produceOutcome{res, err}
	}()
	o := e.result(out)
	if o.err != nil || o.res.BaseOffset != 0 {
		t.Fatalf("produce: %+v %v", o.res, o.err)
	}
	r2, _ := m2.Replica(tp0)
	if leo := r2.Log().LogEndOffset(); leo != 1 {
		t.Fatalf("follower LEO %d after the commit, want 1", leo)
	}
	if hw := hwOf(t, m2); hw != 0 {
		t.Fatalf("follower HW %d before its next round trip, want 0", hw)
	}
	// The fetch at 1 moved the leader's HW after reading it (0); it is
	// answered at its max wait with the HW as it is then, 1
	// (TestQuietFollowerLearnsTheHWAtTheFirstMaxWait).
	wait := time.Duration(e.m.BrokerConfig().ReplicaFetchWaitMaxMs) * time.Millisecond
	for round := 1; hwOf(t, m2) != 1; round++ {
		if round > 1 {
			t.Fatalf("follower HW %d after a max wait, want 1", hwOf(t, m2))
		}
		e.clock.WaitTimer(t, wait, 1) // the follower's fetch, parked at the leader
		e.clock.Advance(wait)
		waitFor(t, "the follower's next fetch", func() bool { return hwOf(t, m2) == 1 || e.clock.pending(wait) > 0 })
	}
}

// fetching reports whether m's fetchers hold tp0.
func fetching(m *Manager) bool {
	m.fetchers.mu.Lock()
	defer m.fetchers.mu.Unlock()
	key, ok := m.fetchers.assigned[tp0]
	if !ok {
		return false
	}
	f := m.fetchers.fetchers[key]
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok = f.part[tp0]
	return ok
}

// A follower whose leader epoch is older than the leader's is fenced
// (FENCED_LEADER_EPOCH, F3): it stops fetching until the controller tells
// it more, then follows the new epoch.
func TestFencedFollowerWaitsForNewMetadata(t *testing.T) {
	e := newEnv(t)
	m2, _ := e.newManager(2)
	e.updateMetadataOn(m2)
	e.state(1, 2, 2, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil) // a LeaderAndIsr it missed
	waitFor(t, "the fenced follower to stop fetching", func() bool { return !fetching(m2) })

	e.stateOn(m2, tp0, 1, 2, 2, []int32{1, 2}, nil)
	if !fetching(m2) {
		t.Fatal("new metadata did not restart fetching")
	}
	if _, err := e.m.Produce(t.Context(), tp0, -1, batch("a"), produceTimeout); err != nil {
		t.Fatalf("acks=all produce with the follower back: %v", err)
	}
	r2, _ := m2.Replica(tp0)
	if leo := r2.Log().LogEndOffset(); leo != 1 {
		t.Fatalf("follower LEO %d, want 1", leo)
	}
}

// A follower fenced by its leader's OffsetForLeaderEpoch answer (its epoch
// is stale) stops until the controller tells it more, as a fenced fetch
// does. Before, it asked again every 50 ms, cutting its other partitions'
// long polls short each time, until new metadata came.
func TestFollowerFencedAskingWhereItsEpochEndsWaitsForNewMetadata(t *testing.T) {
	e := newEnv(t)
	m2, _ := e.newManager(2)
	e.updateMetadataOn(m2)
	// Broker 2 led at epoch 1 and wrote, so as a follower it asks its
	// leader where that epoch ends.
	e.stateOn(m2, tp0, 2, 1, 1, []int32{2}, nil)
	if _, err := m2.Produce(t.Context(), tp0, 1, batch("a"), produceTimeout); err != nil {
		t.Fatal(err)
	}
	e.state(1, 3, 3, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 2, 2, []int32{1, 2}, nil) // it missed epoch 3
	waitFor(t, "the fenced follower to stop fetching", func() bool { return !fetching(m2) })

	e.stateOn(m2, tp0, 1, 3, 3, []int32{1, 2}, nil)
	waitFor(t, "the follower to truncate to its leader and follow", func() bool {
		r2, _ := m2.Replica(tp0)
		return fetching(m2) && r2.Log().LogEndOffset() == 0
	})
}

// A follower copying a leader's cleaned log (gaps between batches), with no
// periodic flush, has made the data after each gap durable before its
// fetch tells the leader its new log end: once the leader's HW counts the
// records, a power loss of the follower keeps them all. Before, nothing
// flushed them, and recovery cut the copy at its first gap: with every
// replica crashed, acknowledged records were lost.
func TestFollowerFlushesGappedDataBeforeItsNextFetch(t *testing.T) {
	e := newEnv(t)
	leo := gappedLog(t, e, "a")
	mem := vfs.NewMem()
	e.fs = mem
	m2, _ := e.newManager(2)
	e.fs = nil
	e.updateMetadataOn(m2)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	waitFor(t, "the leader's HW to count the follower's copy", func() bool { return hwOf(t, e.m) == leo })
	survivesPowerLoss(t, mem, "the follower's log", leo)
}

// A follower fetcher whose partitions all copy a leader's cleaned log
// flushes their data after the gaps side by side before its next fetch,
// and each copy is durable once the leader's HW counts it. The follower's
// segment syncs stall until every partition's is in flight: flushed one
// after another, as before, the first one waited for the others for ever
// (here: until the test's bound).
func TestFollowerFlushesTheGapsOfItsPartitionsSideBySide(t *testing.T) {
	e := newEnv(t)
	tps := []TP{tp0, tp1, {Topic: "t", Partition: 2}}
	leos := make([]int64, len(tps))
	for i, tp := range tps {
		leos[i] = gappedLogOf(t, e, tp, "a")
		e.stateOf(tp, 1, 1, 1, []int32{1, 2}, nil)
	}
	mem := vfs.NewMem()
	faults := vfs.NewFaultFS(mem)
	stall := make(chan struct{})
	faults.Inject(vfs.Fault{Ops: vfs.OpSync, Path: ".log", Stall: stall})
	e.fs = faults
	m2, _ := e.newManager(2)
	e.fs = nil
	var once sync.Once
	release := func() { once.Do(func() { close(stall) }) }
	t.Cleanup(release) // before m2 closes: its fetcher may be stalled in a sync
	e.updateMetadataOn(m2)
	// One LeaderAndIsr: the follower's first fetch asks for every
	// partition, so its next one has all three to flush.
	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[2]}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, partitionState(tp, 1, 1, 1, []int32{1, 2}))
	}
	if _, err := m2.LeaderAndIsr(req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower's flushes of every partition to be in flight at once", func() bool { return faults.Fired() >= len(tps) })
	release()
	for i, tp := range tps {
		waitFor(t, "the leader's HW to count the follower's copy of "+tp.String(), func() bool { return hwOfPartition(t, e.m, tp) == leos[i] })
		survivesPowerLossOf(t, mem, tp, "the follower's log of "+tp.String(), leos[i])
	}
}

// A partition whose gap flush fails is left out of the fetch and backed
// off, and the partitions flushed beside it are fetched as usual: the
// leader's HW counts their copies, not the one whose flush failed, until
// its retry after the backoff flushes it.
func TestFollowerLeavesOutAPartitionWhoseGapFlushFailed(t *testing.T) {
	e := newEnv(t)
	tps := []TP{tp0, tp1, {Topic: "t", Partition: 2}}
	leos := make([]int64, len(tps))
	for i, tp := range tps {
		leos[i] = gappedLogOf(t, e, tp, "a")
		e.stateOf(tp, 1, 1, 1, []int32{1, 2}, nil)
	}
	mem := vfs.NewMem()
	faults := vfs.NewFaultFS(mem)
	faults.Inject(vfs.Fault{Ops: vfs.OpSync, Path: "t-1/00000000000000000000.log", Count: 1, Err: errors.New("sync failed")})
	e.fs = faults
	m2, _ := e.newManager(2)
	e.fs = nil
	e.updateMetadataOn(m2)
	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[2]}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, partitionState(tp, 1, 1, 1, []int32{1, 2}))
	}
	if _, err := m2.LeaderAndIsr(req); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		waitFor(t, "the leader's HW to count the follower's copy of "+tps[i].String(), func() bool { return hwOfPartition(t, e.m, tps[i]) == leos[i] })
	}
	if faults.Fired() != 1 {
		t.Fatalf("%d failed syncs, want 1", faults.Fired())
	}
	if hw := hwOfPartition(t, e.m, tp1); hw != 0 {
		t.Fatalf("leader HW of t-1 %d after the follower's flush failed, want 0", hw)
	}
	waitFor(t, "the follower's retry of t-1 after its backoff", func() bool {
		e.clock.Advance(100 * time.Millisecond)
		return hwOfPartition(t, e.m, tp1) == leos[1]
	})
	for i, tp := range tps {
		survivesPowerLossOf(t, mem, tp, "the follower's log of "+tp.String(), leos[i])
	}
}

// gappedLog fills broker 1's log of tp0 with 20 batches of two records of
// value, with gaps between them as the leader's cleaner leaves them, and
// returns its log end.
func gappedLog(t *testing.T, e *env, value string) int64 {
	t.Helper()
	return gappedLogOf(t, e, tp0, value)
}

// gappedLogOf is gappedLog for tp.
func gappedLogOf(t *testing.T, e *env, tp TP, value string) int64 {
	t.Helper()
	l, err := e.m.opts.Store.GetOrCreate(tp, logstore.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		b := recordbatch.Batch(batch(value, value))
		b.SetBaseOffset(l.LogEndOffset() + int64(i%3))
		b.SetPartitionLeaderEpoch(0)
		if _, err := l.AppendAsFollowerUnflushed(b); err != nil {
			t.Fatal(err)
		}
	}
	return l.LogEndOffset()
}

// survivesPowerLoss checks that tp0's log in mem, as a power loss could
// leave it (several ways), still ends at leo.
func survivesPowerLoss(t *testing.T, mem *vfs.MemFS, what string, leo int64) {
	t.Helper()
	survivesPowerLossOf(t, mem, tp0, what, leo)
}

// survivesPowerLossOf is survivesPowerLoss for tp's log.
func survivesPowerLossOf(t *testing.T, mem *vfs.MemFS, tp TP, what string, leo int64) {
	t.Helper()
	for seed := range uint64(8) {
		logs, err := logstore.OpenManager(logstore.ManagerOptions{FS: mem.CrashClone(seed), Dir: "/data", NoBackground: true})
		if err != nil {
			t.Fatal(err)
		}
		l, ok := logs.Log(logstore.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		var got int64 = -1
		if ok {
			got = l.LogEndOffset()
		}
		logs.Close()
		if got != leo {
			t.Fatalf("seed %d: %s after a power loss: found %v, LEO %d, want %d", seed, what, ok, got, leo)
		}
	}
}

// A follower made leader sends no next fetch, which is where it flushes
// the data it copied after a compaction gap (FlushGaps), yet its log end
// counts toward the HW from then on: becoming leader flushes it. Broker 2's
// first answer brings part of the leader's cleaned log, gaps included, and
// leaves it behind the HW; over its follower throttle, its next fetch
// leaves the partition out (as does a fetch that sees the new leader
// epoch). Made sole leader, it commits what it has, and a power loss keeps
// it. Before, nothing flushed it, and recovery cut the log at its first
// gap: committed records were lost.
func TestFollowerMadeLeaderFlushesItsGappedData(t *testing.T) {
	e := newEnv(t)
	leo := gappedLog(t, e, strings.Repeat("x", 100))
	mem := vfs.NewMem()
	e.fs = mem
	n := newTapNet(e.net)
	m2 := e.followerOver(n)
	e.fs = nil
	// replica.fetch.max.bytes 600: two batches a fetch, so the first
	// answer leaves broker 2 behind the HW (not in sync).
	e.throttleRates(m2, map[string]string{"follower.replication.throttled.rate": "100", "replica.fetch.max.bytes": "600",
		"replication.quota.window.num": "2", "replication.quota.window.size.seconds": "1"})
	throttled := map[string]string{"follower.replication.throttled.replicas": "*"}
	e.state(1, 1, 1, []int32{1}, throttled)
	if hw := hwOf(t, e.m); hw != leo {
		t.Fatalf("leader HW %d, want %d", hw, leo)
	}
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1}, throttled)
	r2, _ := m2.Replica(tp0)
	waitFor(t, "broker 2 to copy the first batches, over its throttled rate", func() bool {
		_, follower := m2.ReplicationRates()
		return r2.Log().LogEndOffset() > 0 && follower > 100
	})

	e.stateOn(m2, tp0, 2, 2, 2, []int32{2}, nil)
	copied := r2.Log().LogEndOffset()
	if copied <= 2 || copied >= leo {
		t.Fatalf("broker 2 copied up to %d: want past the first gap (at 2) and short of %d", copied, leo)
	}
	for _, req := range n.requests() {
		if off, ok := fetchesOf(req, tp0); ok && off > 0 {
			t.Fatalf("broker 2 fetched t-0 at %d before it led: that fetch flushed, the test shows nothing", off)
		}
	}
	if hw := hwOf(t, m2); hw != copied {
		t.Fatalf("HW of broker 2 as sole leader %d, want its LEO %d", hw, copied)
	}
	survivesPowerLoss(t, mem, "the new leader's log", copied)
}

// On a quiet partition a follower learns the HW its own fetch moved at that
// fetch's max wait: the leader answers a fetch that waited it out with the
// HW as it is then, as Kafka's delayed fetch reads again when it completes.
// It answered with the HW read before the fetch recorded its offset, so the
// follower (and a consumer reading from it, or it as the next leader) had
// the HW only a whole max wait later.
func TestQuietFollowerLearnsTheHWAtTheFirstMaxWait(t *testing.T) {
	e := newEnv(t)
	m2, _ := e.newManager(2)
	e.updateMetadataOn(m2)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	if _, err := e.m.Produce(t.Context(), tp0, -1, batch("a"), produceTimeout); err != nil {
		t.Fatalf("acks=all produce: %v", err)
	}
	if hw := hwOf(t, e.m); hw != 1 {
		t.Fatalf("leader HW %d after the commit, want 1", hw)
	}
	wait := time.Duration(e.m.BrokerConfig().ReplicaFetchWaitMaxMs) * time.Millisecond
	e.clock.WaitTimer(t, wait, 1) // the fetch that committed, parked at the leader
	e.clock.Advance(wait)
	// The follower applies the answer before it sends its next fetch.
	waitFor(t, "the follower's next fetch", func() bool { return hwOf(t, m2) == 1 || e.clock.pending(wait) > 0 })
	if hw := hwOf(t, m2); hw != 1 {
		t.Fatalf("follower HW %d after the max wait of the fetch that moved the leader's to 1", hw)
	}
}
