package replica

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

const tick = lagMax / 2

// expire runs one pass of the ISR expiration timer and waits until it is
// done (it has armed its next timer).
func (e *env) expire() {
	e.t.Helper()
	e.clock.WaitTimer(e.t, tick, 1)
	e.clock.Advance(tick)
	e.clock.WaitTimer(e.t, tick, 1)
}

// isr returns tp's committed ISR and whether a change is in flight, and
// whether that change is parked until new metadata.
func (e *env) isr(tp TP) (isr []int32, pending, parkedForMetadata bool) {
	r, ok := e.m.Replica(tp)
	if !ok {
		e.t.Fatalf("%v is not hosted", tp)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, awaiting, pending := r.state.Pending()
	return r.state.ISR(), pending, awaiting
}

func TestISRExpirationShrinksAfterLagTimeMax(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	e.followerFetch(2, 1, 0) // at the LEO: caught up for good
	e.followerFetch(3, 1, 0)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), 0); err != nil {
		t.Fatal(err)
	}
	e.followerFetch(2, 1, 1) // 3 stays behind from now on

	e.expire() // 5 s
	e.expire() // 10 s: exactly lag time max, still in sync
	e.ctrl.noCall(t)
	e.expire() // 15 s
	req := e.ctrl.call(t)
	if got := isrOf(req, 0); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("proposed ISR %v, want 1,2", got)
	}
	if p := req.GetPartitions()[0]; p.GetLeaderEpoch() != 1 || p.GetPartitionEpoch() != 1 || req.GetBrokerEpoch() != brokerEpochs[1] {
		t.Fatalf("request %v", req)
	}
	waitFor(t, "the shrink to commit", func() bool {
		isr, pending, _ := e.isr(tp0)
		return !pending && slices.Equal(isr, []int32{1, 2})
	})
}

func TestISRExpirationKeepsFollowersThatFetch(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	for i := 0; i < 6; i++ {
		if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), 0); err != nil {
			t.Fatal(err)
		}
		leo := e.replica().Log().LogEndOffset()
		e.followerFetch(2, 1, leo)
		e.followerFetch(3, 1, leo)
		e.expire()
	}
	e.ctrl.noCall(t)
}

// expandAll makes follower 3 join the ISR 1,2 of each partition: one
// expansion proposal each.
func (e *env) expandAll(tps ...TP) {
	e.t.Helper()
	for _, tp := range tps {
		e.followerFetchOf(tp, 3, 1, 0)
	}
}

func TestAlterPartitionSenderBatchesWhileACallIsInFlight(t *testing.T) {
	e := newEnv(t)
	tps := []TP{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "t", Partition: 2}}
	for _, tp := range tps {
		e.stateOf(tp, 1, 1, 1, []int32{1, 2}, nil)
	}
	hold := make(chan struct{})
	e.ctrl.mu.Lock()
	e.ctrl.hold = hold
	e.ctrl.mu.Unlock()

	e.expandAll(tps[0])
	first := e.ctrl.call(t)
	e.expandAll(tps[1], tps[2])
	close(hold)
	second := e.ctrl.call(t)
	if len(first.GetPartitions()) != 1 || len(second.GetPartitions()) != 2 {
		t.Fatalf("batches of %d and %d partitions, want 1 and 2", len(first.GetPartitions()), len(second.GetPartitions()))
	}
	for _, tp := range tps {
		waitFor(t, "the expansions to commit", func() bool {
			isr, pending, _ := e.isr(tp)
			return !pending && slices.Equal(isr, []int32{1, 2, 3})
		})
	}
}

func TestAlterPartitionSenderRetriesAfterBackoff(t *testing.T) {
	for name, fail := range map[string]func(*controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error){
		"NOT_CONTROLLER": func(*controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
			return &controlv1.AlterPartitionResponse{ErrorCode: commonv1.ErrorCode(kerr.NotController)}, nil
		},
		"transport error": func(*controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
			return nil, errors.New("connection refused")
		},
		"partition NOT_CONTROLLER": answerEach(kerr.NotController),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.state(1, 1, 1, []int32{1, 2}, nil)
			e.ctrl.setAnswer(fail)
			e.expandAll(tp0)
			first := e.ctrl.call(t)
			e.clock.WaitTimer(t, alterBackoff, 1)
			e.ctrl.noCall(t)
			if _, pending, _ := e.isr(tp0); !pending {
				t.Fatal("the failed change is no longer in flight")
			}
			e.ctrl.setAnswer(commitAll)
			e.clock.Advance(alterBackoff)
			again := e.ctrl.call(t)
			if !slices.Equal(isrOf(first, 0), isrOf(again, 0)) || first.GetPartitions()[0].GetPartitionEpoch() != again.GetPartitions()[0].GetPartitionEpoch() {
				t.Fatalf("retry %v differs from %v", again, first)
			}
			waitFor(t, "the retried expansion to commit", func() bool {
				isr, pending, _ := e.isr(tp0)
				return !pending && slices.Equal(isr, []int32{1, 2, 3})
			})
		})
	}
}

// A change that keeps failing while new metadata replaces it is dropped,
// not sent beside its successor: the controller refuses a request naming
// a partition twice, and the successor, refused with INVALID_REQUEST, would
// park until metadata that never comes (an idle partition stuck without
// its restarted follower).
func TestAlterPartitionRetryIsReplacedByTheNewerProposal(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.ctrl.setAnswer(answerEach(kerr.StaleBrokerEpoch))
	e.expandAll(tp0)
	e.ctrl.call(t)
	e.clock.WaitTimer(t, alterBackoff, 1)

	// New metadata while the failed expansion waits for its retry; the
	// follower's next fetch proposes it again on the new leader epoch.
	e.state(1, 2, 2, []int32{1, 2}, nil)
	e.followerFetch(3, 2, 0)
	e.ctrl.setAnswer(commitAll)
	e.clock.Advance(alterBackoff)

	req := e.ctrl.call(t)
	if n := len(req.GetPartitions()); n != 1 || req.GetPartitions()[0].GetLeaderEpoch() != 2 {
		t.Fatalf("sent %v; want only the proposal on leader epoch 2", req)
	}
	waitFor(t, "the expansion to commit", func() bool {
		isr, pending, _ := e.isr(tp0)
		return !pending && slices.Equal(isr, []int32{1, 2, 3})
	})
	e.ctrl.noCall(t)
}

// A queued change that new metadata ended is not sent at all.
func TestAlterPartitionSenderDropsAChangeNoLongerPending(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.ctrl.setAnswer(answerEach(kerr.StaleBrokerEpoch))
	e.expandAll(tp0)
	e.ctrl.call(t)
	e.clock.WaitTimer(t, alterBackoff, 1)
	e.state(1, 2, 2, []int32{1, 2, 3}, nil) // the controller already has 3 back
	e.ctrl.setAnswer(commitAll)
	e.clock.Advance(alterBackoff)
	// The sender's next pass finds nothing to send; a fresh change goes
	// alone.
	e.stateOf(TP{Topic: "t", Partition: 1}, 1, 1, 1, []int32{1, 2}, nil)
	e.expandAll(TP{Topic: "t", Partition: 1})
	req := e.ctrl.call(t)
	if n := len(req.GetPartitions()); n != 1 || req.GetPartitions()[0].GetPartition() != 1 {
		t.Fatalf("sent %v; want only partition 1's change", req)
	}
	if isr, pending, _ := e.isr(tp0); pending || !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("partition 0: ISR %v pending %v", isr, pending)
	}
}

func TestAlterPartitionIneligibleReplicaReverts(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.ctrl.setAnswer(answerEach(kerr.IneligibleReplica))
	e.expandAll(tp0)
	e.ctrl.call(t)
	waitFor(t, "the refused expansion to be reverted", func() bool {
		isr, pending, _ := e.isr(tp0)
		return !pending && slices.Equal(isr, []int32{1, 2})
	})
	if e.clock.pending(alterBackoff) != 0 {
		t.Fatal("a refused change must not be retried")
	}
	e.ctrl.noCall(t)
}

func TestAlterPartitionFencedLeaderEpochParksUntilMetadata(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	e.ctrl.setAnswer(answerEach(kerr.FencedLeaderEpoch))
	e.followerFetch(2, 1, 0)
	e.expire()
	e.expire()
	e.expire() // 3 is out of sync: shrink proposed and fenced
	e.ctrl.call(t)
	waitFor(t, "the fenced change to park", func() bool {
		_, pending, parked := e.isr(tp0)
		return pending && parked
	})
	if e.clock.pending(alterBackoff) != 0 {
		t.Fatal("a fenced change must not be retried")
	}
	// Parked, it blocks further changes: the next expiration proposes nothing.
	e.expire()
	e.ctrl.noCall(t)

	// New metadata ends it; the next expiration proposes again.
	e.ctrl.setAnswer(commitAll)
	e.state(1, 2, 2, []int32{1, 2, 3}, nil)
	e.followerFetch(2, 2, 0)
	e.expire()
	e.expire()
	e.expire()
	if got := isrOf(e.ctrl.call(t), 0); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("proposed ISR %v after new metadata, want 1,2", got)
	}
}

// A broker in controlled shutdown stays registered but may not join an ISR
// (KIP-841): the controller refuses it with INELIGIBLE_REPLICA. The leader
// keeps the same rule, so the shutting-down broker's fetches propose
// nothing; once its shutdown is over (it registers again) it may rejoin.
func TestShuttingDownFollowerIsNotProposedIntoISR(t *testing.T) {
	e := newEnv(t)
	e.updateMetadata(3)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.ctrl.setAnswer(answerEach(kerr.IneligibleReplica))
	for i := 0; i < 3; i++ {
		e.followerFetch(3, 1, 0)
		if _, pending, _ := e.isr(tp0); pending {
			e.ctrl.call(t)
			t.Fatal("broker 3 is shutting down, yet its fetch proposed it into the ISR")
		}
	}
	e.ctrl.noCall(t)

	// Nor does the HW wait for it as a caught-up candidate: follower 2 alone
	// commits.
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), 0); err != nil {
		t.Fatal(err)
	}
	e.followerFetch(3, 1, 0)
	e.followerFetch(2, 1, 1)
	if hw := e.hw(); hw != 1 {
		t.Fatalf("HW %d, want 1", hw)
	}

	e.ctrl.setAnswer(commitAll)
	e.updateMetadata()
	e.followerFetch(3, 1, 1)
	if got := isrOf(e.ctrl.call(t), 0); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("proposed ISR %v once the shutdown is over, want 1,2,3", got)
	}
}

// A controller that froze holds an AlterPartition until the attempt times
// out (10 s). Once the broker admits a newer controller's request, the call
// is given up and, after the backoff, sent to the controller in office.
func TestAlterPartitionGivesUpOnASucceededController(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	hold := make(chan struct{})
	defer close(hold)
	e.ctrl.mu.Lock()
	e.ctrl.hold = hold
	e.ctrl.mu.Unlock()
	e.expandAll(tp0)
	e.ctrl.call(t) // held: the controller froze

	e.ctrl.mu.Lock()
	e.ctrl.hold = nil
	e.ctrl.mu.Unlock()
	e.ctrlEpoch++
	e.updateMetadata()
	select {
	case <-e.ctrl.abandoned:
	case <-time.After(3 * time.Second):
		t.Fatal("the call to the succeeded controller was still waiting 3 s after its successor's request")
	}
	e.clock.WaitTimer(t, alterBackoff, 1)
	e.clock.Advance(alterBackoff)
	if got := isrOf(e.ctrl.call(t), 0); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("resent ISR %v, want 1,2,3", got)
	}
	waitFor(t, "the expansion to commit", func() bool {
		isr, pending, _ := e.isr(tp0)
		return !pending && slices.Equal(isr, []int32{1, 2, 3})
	})
}

// IsrShrinksPerSec and IsrExpandsPerSec count the changes the controller
// committed, as Kafka marks them on the committed answer: a change it
// refused (its etcd write fenced, or beaten by another) changed no ISR.
func TestISRChangeMetricsCountCommittedChangesOnly(t *testing.T) {
	e := newEnv(t)
	shrinks := func() float64 { return testutil.ToFloat64(e.m.metrics.isrShrinks) }
	expands := func() float64 { return testutil.ToFloat64(e.m.metrics.isrExpands) }
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	e.followerFetch(2, 1, 0)
	e.followerFetch(3, 1, 0)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), 0); err != nil {
		t.Fatal(err)
	}
	e.followerFetch(2, 1, 1) // 3 falls behind

	// The controller could not write the shrink: it is retried.
	e.ctrl.setAnswer(answerEach(kerr.NotController))
	e.expire()
	e.expire()
	e.expire()
	e.ctrl.call(t)
	e.clock.WaitTimer(t, alterBackoff, 1)
	if n := shrinks(); n != 0 {
		t.Fatalf("isr_shrinks_total = %v after a shrink the controller did not commit, want 0", n)
	}
	e.ctrl.setAnswer(commitAll)
	e.clock.Advance(alterBackoff)
	e.ctrl.call(t)
	waitFor(t, "the shrink to commit", func() bool {
		isr, pending, _ := e.isr(tp0)
		return !pending && slices.Equal(isr, []int32{1, 2})
	})
	if n := shrinks(); n != 1 {
		t.Fatalf("isr_shrinks_total = %v after one committed shrink (and one refused attempt), want 1", n)
	}

	// 3 catches up; another controller wrote the partition first.
	e.ctrl.setAnswer(answerEach(kerr.InvalidUpdateVersion))
	e.followerFetch(3, 1, 1)
	e.ctrl.call(t)
	waitFor(t, "the refused expansion to wait for metadata", func() bool {
		_, _, parked := e.isr(tp0)
		return parked
	})
	if n := expands(); n != 0 {
		t.Fatalf("isr_expands_total = %v after an expansion the controller refused, want 0", n)
	}
	e.ctrl.setAnswer(commitAll)
	e.state(1, 1, 3, []int32{1, 2}, nil) // the controller's push ends the parked change
	e.followerFetch(3, 1, 1)
	e.ctrl.call(t)
	waitFor(t, "the expansion to commit", func() bool {
		isr, pending, _ := e.isr(tp0)
		return !pending && slices.Equal(isr, []int32{1, 2, 3})
	})
	if n := expands(); n != 1 {
		t.Fatalf("isr_expands_total = %v after one committed expansion, want 1", n)
	}
}

// A follower outside the ISR that caught up holds the HW back while it is
// caught up (it may join the ISR any moment); once it stops fetching, the
// ISR expiration releases the HW after replica.lag.time.max.ms, with no
// write or fetch to do it. The HW stayed below the LEO on a quiet
// partition, and an acks=all write waiting on it timed out.
func TestHWHeldByAFollowerOutsideTheISRIsReleasedWhenItStops(t *testing.T) {
	e := newEnv(t)
	e.ctrl.setAnswer(answerEach(kerr.IneligibleReplica)) // follower 2 stays out
	e.state(1, 1, 1, []int32{1}, nil)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), 0); err != nil {
		t.Fatal(err)
	}
	e.followerFetch(2, 1, 1) // caught up: it asks to join, and is refused
	e.ctrl.call(t)
	waitFor(t, "the refused expansion to be reverted", func() bool {
		_, pending, _ := e.isr(tp0)
		return !pending
	})
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("b"), 0); err != nil {
		t.Fatal(err)
	}
	if hw := hwOf(t, e.m); hw != 1 {
		t.Fatalf("HW %d, want 1: held by the caught-up follower at 1", hw)
	}
	// Follower 2 fetches no more.
	e.expire() // 5 s
	e.expire() // 10 s: exactly lag time max, still caught up
	if hw := hwOf(t, e.m); hw != 1 {
		t.Fatalf("HW %d within replica.lag.time.max.ms, want 1", hw)
	}
	e.expire() // 15 s
	if hw := hwOf(t, e.m); hw != 2 {
		t.Fatalf("HW %d once the follower outside the ISR stopped being caught up, want the LEO, 2", hw)
	}
}
