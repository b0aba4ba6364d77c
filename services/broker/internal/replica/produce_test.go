package replica

import (
	"context"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
)

const produceTimeout = 7 * time.Second

func TestProduceAcksAllAnswersWhenHWCoversIt(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	out := e.produceAsync(produceTimeout, "a")

	e.followerFetch(2, 1, 1)
	if o, waiting := parked(out); !waiting {
		t.Fatalf("answered with follower 3 still behind: %+v", o)
	}
	if hw := e.hw(); hw != 0 {
		t.Fatalf("HW %d with follower 3 at 0, want 0", hw)
	}
	e.followerFetch(3, 1, 1)
	o := e.result(out)
	if o.err != nil || o.res.BaseOffset != 0 || o.res.LastOffset != 0 || o.res.LeaderEpoch != 1 {
		t.Fatalf("produce: %+v %v", o.res, o.err)
	}
}

func TestProduceFailsWhenLeadershipMoves(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	out := e.produceAsync(produceTimeout, "a")

	e.state(2, 2, 2, []int32{1, 2, 3}, nil)
	o := e.result(out)
	ke := kerr.As(o.err)
	if ke == nil || ke.Code != kerr.NotLeaderOrFollower {
		t.Fatalf("want NOT_LEADER_OR_FOLLOWER, got %v", o.err)
	}
	if ke.Leader == nil || ke.Leader.ID != 2 || ke.Leader.Address != "broker2" {
		t.Fatalf("leader hint %+v, want broker 2 at broker2", ke.Leader)
	}
}

func TestProduceTimesOut(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	out := e.produceAsync(produceTimeout, "a")

	e.clock.Advance(produceTimeout - time.Millisecond)
	e.followerFetch(2, 1, 1) // a fetch wakes it; it must wait on
	if o, waiting := parked(out); !waiting {
		t.Fatalf("answered before its timeout: %+v", o)
	}
	e.clock.Advance(time.Millisecond)
	o := e.result(out)
	if kerr.CodeOf(o.err) != kerr.RequestTimedOut {
		t.Fatalf("want REQUEST_TIMED_OUT, got %v", o.err)
	}
	// The record stays in the log: a timeout is not a rollback.
	if leo := e.replica().Log().LogEndOffset(); leo != 1 {
		t.Fatalf("LEO %d after a timed-out produce, want 1", leo)
	}
}

// When the HW covers the records but the ISR has meanwhile shrunk below
// min.insync.replicas, the records are in the log and the producer is told
// so (F16): NOT_ENOUGH_REPLICAS_AFTER_APPEND, not success.
func TestProduceNotEnoughReplicasAfterAppend(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, map[string]string{"min.insync.replicas": "2"})
	out := e.produceAsync(produceTimeout, "a")

	// The HW passes the record and the controller shrinks the ISR to the
	// leader before the parked produce looks again.
	r := e.replica()
	r.mu.Lock()
	if _, err := r.state.UpdateFollowerFetch(partition.FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2],
		FetchOffset: 1, LeaderLEO: 1}, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.applyStateLocked(r, partitionState(tp0, 1, 1, 2, []int32{1}), nil); err != nil {
		t.Fatal(err)
	}
	hw := r.state.HighWatermark()
	r.mu.Unlock()
	r.wake()
	if hw != 1 {
		t.Fatalf("HW %d, want 1", hw)
	}
	o := e.result(out)
	if kerr.CodeOf(o.err) != kerr.NotEnoughReplicasAfterAppend {
		t.Fatalf("want NOT_ENOUGH_REPLICAS_AFTER_APPEND, got %v", o.err)
	}
}

// A timeout of 0 does not wait (Kafka's): acks=-1 is answered at once,
// REQUEST_TIMED_OUT with the ISR behind (the records stay appended), and
// success when the leader is the whole ISR.
func TestProduceTimeoutZeroDoesNotWait(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	produce := func() <-chan produceOutcome {
		out := make(chan produceOutcome, 1)
		go func() {
			res, err := e.m.Produce(t.Context(), tp0, -1, batch("a"), 0)
			out <- produceOutcome{res, err}
		}()
		return out
	}
	if o := e.result(produce()); kerr.CodeOf(o.err) != kerr.RequestTimedOut {
		t.Fatalf("ISR behind: %+v %v, want REQUEST_TIMED_OUT", o.res, o.err)
	}
	if leo := e.replica().Log().LogEndOffset(); leo != 1 {
		t.Fatalf("LEO %d, want 1: the records are appended", leo)
	}
	e.state(1, 2, 2, []int32{1}, nil)
	if o := e.result(produce()); o.err != nil || o.res.BaseOffset != 1 {
		t.Fatalf("leader alone in the ISR: %+v %v, want offset 1", o.res, o.err)
	}
}

// A produce refused before the append (ISR below min.insync.replicas)
// writes nothing.
func TestProduceNotEnoughReplicasWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1}, map[string]string{"min.insync.replicas": "2"})
	_, err := e.m.Produce(t.Context(), tp0, -1, batch("a"), produceTimeout)
	if kerr.CodeOf(err) != kerr.NotEnoughReplicas {
		t.Fatalf("want NOT_ENOUGH_REPLICAS, got %v", err)
	}
	if leo := e.replica().Log().LogEndOffset(); leo != 0 {
		t.Fatalf("LEO %d after a refused produce, want 0", leo)
	}
}

// The controller bumps the leader epoch on every write it makes, an ISR
// shrink included, while the leader stays. A produce parked before the bump
// must keep waiting: its records were appended by this same leader, which
// recorded where the new epoch starts after them (KAFKA-7415), so no
// follower truncates them. Failing it made a producer without idempotence
// write the record twice.
func TestProduceSurvivesLeaderEpochBumpOfTheSameLeader(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	out := e.produceAsync(produceTimeout, "a")

	e.state(1, 2, 2, []int32{1, 2}, nil) // the controller removed 3
	e.followerFetch(2, 2, 1)
	o := e.result(out)
	if o.err != nil || o.res.BaseOffset != 0 || o.res.LeaderEpoch != 1 {
		t.Fatalf("produce across a leader epoch bump of the same leader: %+v %v", o.res, o.err)
	}
	if hw := e.hw(); hw != 1 {
		t.Fatalf("HW %d, want 1", hw)
	}
}

// If leadership moved away and came back while the produce was parked, its
// records may have been truncated by the other leader and the offsets
// reused: the produce fails even though this broker leads again, and even
// when it never saw the interval in which it was a follower.
func TestProduceFailsWhenLeadershipLeavesAndComesBack(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	out := e.produceAsync(produceTimeout, "a")

	r := e.replica()
	r.mu.Lock()
	for _, ps := range []*commonv1.PartitionState{
		partitionState(tp0, 2, 2, 2, []int32{1, 2, 3}),
		partitionState(tp0, 1, 3, 3, []int32{1, 2, 3}),
	} {
		if _, err := e.m.applyStateLocked(r, ps, nil); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Unlock()
	r.wake()
	o := e.result(out)
	if kerr.CodeOf(o.err) != kerr.NotLeaderOrFollower {
		t.Fatalf("want NOT_LEADER_OR_FOLLOWER after leadership left and came back, got %+v %v", o.res, o.err)
	}
}

// ProduceSince writes only in the leadership it names: once leadership
// left and came back it refuses, writing nothing, where Produce would
// append in the new leadership.
func TestProduceSinceRefusesALaterLeadership(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1}, nil)
	since, ok := e.m.LeadingSince(e.replica())
	if !ok || since != 1 {
		t.Fatalf("leading since %d %v, want 1", since, ok)
	}
	e.state(2, 2, 2, []int32{2}, nil)
	e.state(1, 3, 3, []int32{1}, nil)
	_, err := e.m.ProduceSince(context.Background(), tp0, since, batch("a"), 0)
	if kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("a write of leadership %d in leadership 3: %v, want NOT_LEADER_OR_FOLLOWER", since, err)
	}
	if leo := e.replica().Log().LogEndOffset(); leo != 0 {
		t.Fatalf("LEO %d after a refused write, want 0", leo)
	}
	if _, err := e.m.ProduceSince(context.Background(), tp0, 3, batch("b"), produceTimeout); err != nil {
		t.Fatalf("a write in the current leadership: %v", err)
	}
	e.state(1, 4, 4, []int32{1}, nil) // the same leadership, a new epoch
	if _, err := e.m.ProduceSince(context.Background(), tp0, 3, batch("c"), produceTimeout); err != nil {
		t.Fatalf("a write after an epoch bump of the same leadership: %v", err)
	}
}
