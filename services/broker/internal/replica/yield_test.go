package replica

import (
	"context"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// yield sends broker 1 a YieldLeadership for tp0 at the given state.
func (e *env) yield(leaderEpoch, partitionEpoch int32, resume bool) *controlv1.YieldLeadershipResponse {
	e.t.Helper()
	resp, err := e.m.YieldLeadership(&controlv1.YieldLeadershipRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		BrokerEpoch: brokerEpochs[1], Resume: resume,
		Partitions: []*controlv1.YieldPartition{{Topic: tp0.Topic, Partition: tp0.Partition, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// produceOne is an acks=1 produce of one record to tp0.
func (e *env) produceOne(value string) error {
	_, err := e.m.Produce(context.Background(), tp0, 1, batch(value), produceTimeout)
	return err
}

func wantYieldCode(t *testing.T, resp *controlv1.YieldLeadershipResponse, want kerr.Code) {
	t.Helper()
	if got := kerr.Code(resp.GetPartitions()[0].GetErrorCode()); got != want {
		t.Fatalf("yield answered %v (%s), want %v", got, resp.GetPartitions()[0].GetErrorMessage(), want)
	}
}

// A leader that yielded takes no writes, acks=1 or otherwise, until the
// controller's next word: here the election that makes it a follower.
func TestYieldedLeaderRefusesWritesUntilTheElection(t *testing.T) {
	e := newEnv(t)
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	if err := e.produceOne("before"); err != nil {
		t.Fatal(err)
	}
	wantYieldCode(t, e.yield(3, 5, false), kerr.None)
	if err := e.produceOne("while yielded"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("produce after the yield: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	// Followers still fetch: the new leader may copy what the old one had.
	if a := e.followerFetch(2, 3, 0); len(a.Records) == 0 {
		t.Fatal("a follower's fetch of the yielded leader returned nothing")
	}
	e.state(2, 4, 6, []int32{1, 2, 3}, nil)
	e.state(1, 5, 7, []int32{1, 2, 3}, nil) // and back, at a newer state
	if err := e.produceOne("leader again"); err != nil {
		t.Fatalf("produce as leader at a newer state: %v", err)
	}
}

// A yield ends without an election: at a newer partition epoch (the
// controller changed the ISR and gave the move up), at a resume naming the
// state, and at a newer controller's LeaderAndIsr of the same state (that
// controller may know nothing of the move). A resume naming another state
// does not end it.
func TestYieldEndsAtANewerStateOrControllerOrAResume(t *testing.T) {
	e := newEnv(t)
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	refused := func(what string) {
		t.Helper()
		if err := e.produceOne(what); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
			t.Fatalf("%s: %v, want NOT_LEADER_OR_FOLLOWER", what, err)
		}
	}
	accepted := func(what string) {
		t.Helper()
		if err := e.produceOne(what); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	wantYieldCode(t, e.yield(3, 5, false), kerr.None)
	wantYieldCode(t, e.yield(3, 4, true), kerr.None) // another state's resume
	refused("after a resume of another state")
	wantYieldCode(t, e.yield(3, 5, true), kerr.None)
	accepted("after the resume")

	wantYieldCode(t, e.yield(3, 5, false), kerr.None)
	e.state(1, 3, 6, []int32{1, 2}, nil)
	accepted("at a newer partition epoch")

	wantYieldCode(t, e.yield(3, 6, false), kerr.None)
	e.state(1, 3, 6, []int32{1, 2}, nil) // the same controller, the same state
	refused("at the same state from the same controller")
	e.ctrlEpoch++
	e.state(1, 3, 6, []int32{1, 2}, nil)
	accepted("at a newer controller's word")
}

// The named state decides what a yield does: a leader whose partition
// epoch is behind the named one (an ISR change whose answer it has not
// had) yields; one leading at another leader epoch refuses, and keeps
// taking writes; a partition it does not lead or host answers NONE.
func TestYieldAnswersByTheNamedState(t *testing.T) {
	e := newEnv(t)
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	wantYieldCode(t, e.yield(2, 5, false), kerr.FencedLeaderEpoch)
	wantYieldCode(t, e.yield(4, 5, false), kerr.FencedLeaderEpoch)
	if err := e.produceOne("after refused yields"); err != nil {
		t.Fatalf("produce after refused yields: %v", err)
	}
	wantYieldCode(t, e.yield(3, 6, false), kerr.None)
	if err := e.produceOne("yielded at a newer partition epoch"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("produce: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	e.state(2, 4, 7, []int32{1, 2, 3}, nil)
	wantYieldCode(t, e.yield(4, 7, false), kerr.None) // a follower takes no writes anyway
	resp, err := e.m.YieldLeadership(&controlv1.YieldLeadershipRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		BrokerEpoch: brokerEpochs[1], Partitions: []*controlv1.YieldPartition{{Topic: "absent", Partition: 0}}})
	if err != nil || kerr.Code(resp.GetPartitions()[0].GetErrorCode()) != kerr.None {
		t.Fatalf("yield of a partition not hosted: %v %v", resp, err)
	}
	// A stale controller is refused as for every control request.
	if _, err := e.m.YieldLeadership(&controlv1.YieldLeadershipRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch - 1,
		BrokerEpoch: brokerEpochs[1]}); kerr.CodeOf(err) != kerr.StaleControllerEpoch {
		t.Fatalf("yield from an older controller: %v, want STALE_CONTROLLER_EPOCH", err)
	}
}

// The yield's answer waits for the next leader to have every record the
// leader took (its fetch offset at the leader's end), so the election
// loses no acknowledged acks=1 write; past catch_up_timeout_ms it answers
// anyway, still yielded.
func TestYieldAnswersOnceTheNextLeaderHasEveryRecord(t *testing.T) {
	e := newEnv(t)
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	for _, v := range []string{"a", "b", "c"} {
		if err := e.produceOne(v); err != nil {
			t.Fatal(err)
		}
	}
	e.followerFetch(2, 3, 1) // broker 2 has "a" only
	// A catch-up timeout no other timer of the manager uses (the ISR
	// expiry loop's is 5 s with the test's lag), so waiting for its timer
	// waits for the yield itself.
	const wait = 5*time.Second + 7*time.Millisecond
	yieldAsync := func() <-chan *controlv1.YieldLeadershipResponse {
		before := e.clock.pending(wait)
		out := make(chan *controlv1.YieldLeadershipResponse, 1)
		go func() {
			resp, err := e.m.YieldLeadership(&controlv1.YieldLeadershipRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
				BrokerEpoch: brokerEpochs[1], CatchUpTimeoutMs: int32(wait.Milliseconds()),
				Partitions: []*controlv1.YieldPartition{{Topic: tp0.Topic, Partition: tp0.Partition, LeaderEpoch: 3, PartitionEpoch: 5, NextLeader: 2}}})
			if err != nil {
				t.Error(err)
			}
			out <- resp
		}()
		e.clock.WaitTimer(t, wait, before+1)
		return out
	}
	out := yieldAsync()
	if err := e.produceOne("while catching up"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("produce while the next leader catches up: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	e.followerFetch(2, 3, 2)
	select {
	case <-out:
		t.Fatal("answered with broker 2 at offset 2 of 3")
	case <-time.After(50 * time.Millisecond):
	}
	e.followerFetch(2, 3, 3)
	select {
	case resp := <-out:
		wantYieldCode(t, resp, kerr.None)
	case <-time.After(5 * time.Second):
		t.Fatal("no answer once broker 2 had every record")
	}

	// A next leader that does not catch up: answered at the timeout, and
	// the leader stays yielded.
	wantYieldCode(t, e.yield(3, 5, true), kerr.None)
	if err := e.produceOne("d"); err != nil {
		t.Fatal(err)
	}
	out = yieldAsync()
	e.clock.Advance(wait)
	select {
	case resp := <-out:
		wantYieldCode(t, resp, kerr.None)
	case <-time.After(5 * time.Second):
		t.Fatal("no answer at the catch-up timeout")
	}
	if err := e.produceOne("after the timeout"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("produce after the catch-up timeout: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}

// A write refused while the leadership moves names where it goes next, as
// other NOT_LEADER_OR_FOLLOWER answers name the leader: the broker the
// controller means to elect, at the epoch known, and once this broker's
// metadata holds the election (before its replica applies it), the new
// leader at its new epoch.
func TestYieldedLeaderNamesTheNextLeader(t *testing.T) {
	e := newEnv(t)
	e.updateMetadata()
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	resp, err := e.m.YieldLeadership(&controlv1.YieldLeadershipRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		BrokerEpoch: brokerEpochs[1], Partitions: []*controlv1.YieldPartition{
			{Topic: tp0.Topic, Partition: tp0.Partition, LeaderEpoch: 3, PartitionEpoch: 5, NextLeader: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	wantYieldCode(t, resp, kerr.None)
	wantHint := func(what string, epoch int32) {
		t.Helper()
		err := e.produceOne(what)
		ke := kerr.As(err)
		if ke == nil || ke.Code != kerr.NotLeaderOrFollower {
			t.Fatalf("%s: %v, want NOT_LEADER_OR_FOLLOWER", what, err)
		}
		if h := ke.Leader; h == nil || h.ID != 2 || h.Address != brokerAddr(2) || h.LeaderEpoch != epoch {
			t.Fatalf("%s: leader hint %+v, want broker 2 at %s, leader epoch %d", what, h, brokerAddr(2), epoch)
		}
	}
	wantHint("while yielded", 3)
	e.m.opts.Meta.PutPartitions([]*commonv1.PartitionState{partitionState(tp0, 2, 4, 6, []int32{1, 2, 3})})
	wantHint("once the metadata holds the election", 4)
}
