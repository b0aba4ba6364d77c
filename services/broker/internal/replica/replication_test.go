package replica

import (
	"context"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// hwOf returns m's HW of tp0.
func hwOf(t *testing.T, m *Manager) int64 {
	t.Helper()
	r, ok := m.Replica(tp0)
	if !ok {
		t.Fatal("t-0 is not hosted")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.HighWatermark()
}

// Broker 2's real follower fetcher replicates from broker 1 through the
// in-memory network: the acks=all produce is answered once the follower's
// fetch at the next offset reaches the leader, and the follower learns the
// HW only from a later answer: an answer carries the HW as the leader read
// it, and with nothing new the leader holds each fetch for its max wait
// (Kafka's behaviour; the window of KIP-101).
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
	// The fetch at 1 moved the leader's HW but answers with the HW it read
	// (0) at its max wait; the next one reads 1 and answers at its own. (A
	// wake-up of the parked fetch by the append, arriving late, can make it
	// read again and answer 1 at the first max wait.)
	wait := time.Duration(e.m.BrokerConfig().ReplicaFetchWaitMaxMs) * time.Millisecond
	for round := 1; hwOf(t, m2) != 1; round++ {
		if round > 2 {
			t.Fatalf("follower HW %d after two max waits, want 1", hwOf(t, m2))
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

// A follower copying a leader's cleaned log (gaps between batches), with no
// periodic flush, has made the data after each gap durable before its
// fetch tells the leader its new log end: once the leader's HW counts the
// records, a power loss of the follower keeps them all. Before, nothing
// flushed them, and recovery cut the copy at its first gap: with every
// replica crashed, acknowledged records were lost.
func TestFollowerFlushesGappedDataBeforeItsNextFetch(t *testing.T) {
	e := newEnv(t)
	leaderLog, err := e.m.opts.Store.GetOrCreate(tp0, logstore.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 { // as the leader's cleaner leaves it
		b := recordbatch.Batch(batch("a", "b"))
		b.SetBaseOffset(leaderLog.LogEndOffset() + int64(i%3))
		b.SetPartitionLeaderEpoch(0)
		if _, err := leaderLog.AppendAsFollowerUnflushed(b); err != nil {
			t.Fatal(err)
		}
	}
	leo := leaderLog.LogEndOffset()
	mem := vfs.NewMem()
	e.fs = mem
	m2, _ := e.newManager(2)
	e.fs = nil
	e.updateMetadataOn(m2)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	waitFor(t, "the leader's HW to count the follower's copy", func() bool { return hwOf(t, e.m) == leo })

	for seed := range uint64(8) {
		logs, err := logstore.OpenManager(logstore.ManagerOptions{FS: mem.CrashClone(seed), Dir: "/data", NoBackground: true})
		if err != nil {
			t.Fatal(err)
		}
		l, ok := logs.Log(logstore.TopicPartition{Topic: tp0.Topic, Partition: tp0.Partition})
		if !ok || l.LogEndOffset() != leo {
			var got int64 = -1
			if ok {
				got = l.LogEndOffset()
			}
			t.Fatalf("seed %d: the follower's log after a power loss: found %v, LEO %d, want %d", seed, ok, got, leo)
		}
		logs.Close()
	}
}
