package replica

import (
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// pauseAdmitted holds the next request of kind between its fences and its
// application, as a broker paused there (or a handler waiting on a lock)
// does. It returns once the request is held, and release lets it go on;
// the request runs on a goroutine of its own (start) and its error comes
// back from release.
func pauseAdmitted(t *testing.T, m *Manager, kind string, start func() error) (release func() error) {
	t.Helper()
	held, resume := make(chan struct{}), make(chan struct{})
	m.admitted = func(k string) {
		if k == kind {
			m.admitted = nil // the next one of kind is not held
			close(held)
			<-resume
		}
	}
	done := make(chan error, 1)
	go func() { done <- start() }()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("%s returned without being held: %v", kind, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never passed its fences", kind)
	}
	return func() error {
		close(resume)
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not finish once released", kind)
			return nil
		}
	}
}

// yieldRequest is controller epoch ctrlEpoch's yield (or resume) of tp0 at
// the given state.
func yieldRequest(ctrlEpoch, leaderEpoch, partitionEpoch int32, resume bool) *controlv1.YieldLeadershipRequest {
	return &controlv1.YieldLeadershipRequest{ControllerId: 100, ControllerEpoch: ctrlEpoch, BrokerEpoch: brokerEpochs[1], Resume: resume,
		Partitions: []*controlv1.YieldPartition{{Topic: tp0.Topic, Partition: tp0.Partition, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch}}}
}

// A yield of a controller that is then succeeded, admitted before the new
// controller's LeaderAndIsr and applied after it, is not applied: that
// LeaderAndIsr (the same state: the move was never written) found no
// yield to end, and the partition, idle, refused every write while the
// metadata named its leader, until its state changed.
func TestAYieldOvertakenByANewerControllerIsNotApplied(t *testing.T) {
	e := newEnv(t)
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	var resp *controlv1.YieldLeadershipResponse
	release := pauseAdmitted(t, e.m, "YieldLeadership", func() (err error) {
		resp, err = e.m.YieldLeadership(yieldRequest(e.ctrlEpoch, 3, 5, false))
		return err
	})
	e.ctrlEpoch++
	e.state(1, 3, 5, []int32{1, 2, 3}, nil) // the new controller's push
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := e.produceOne("after the new controller's push"); err != nil {
		t.Fatalf("produce to the leader the new controller named: %v", err)
	}
	wantYieldCode(t, resp, kerr.StaleControllerEpoch)
}

// A resume of a succeeded controller, applied after the new controller
// had the leader yield the same state, leaves that yield in place: ended,
// the leader took writes while the new controller elected another.
func TestAnOvertakenResumeDoesNotEndANewerControllersYield(t *testing.T) {
	e := newEnv(t)
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	old := e.ctrlEpoch
	release := pauseAdmitted(t, e.m, "YieldLeadership", func() error {
		_, err := e.m.YieldLeadership(yieldRequest(old, 3, 5, true))
		return err
	})
	e.ctrlEpoch++
	e.state(1, 3, 5, []int32{1, 2, 3}, nil)
	wantYieldCode(t, e.yield(3, 5, false), kerr.None)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := e.produceOne("after the old resume"); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("produce after the old controller's resume: %v, want NOT_LEADER_OR_FOLLOWER (still yielded)", err)
	}
}

// A full UpdateMetadata of a succeeded controller, admitted before the new
// controller's requests and applied after them, is refused: its view,
// which lacks a topic created since, neither replaces the newer one nor
// deletes the replica the new controller's LeaderAndIsr made.
func TestAFullUpdateMetadataOvertakenByANewerControllerIsRefused(t *testing.T) {
	e := newEnv(t)
	full := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, Full: true,
		Controller: &commonv1.Node{Id: 100, Address: ctrlAddr}}
	for _, id := range []int32{1, 2, 3} {
		full.Brokers = append(full.Brokers, &controlv1.BrokerRegistration{Node: &commonv1.Node{Id: id, Address: brokerAddr(id)}, BrokerEpoch: brokerEpochs[id]})
	}
	release := pauseAdmitted(t, e.m, "UpdateMetadata", func() error { return e.m.UpdateMetadata(full) })
	e.ctrlEpoch++
	e.state(1, 0, 0, []int32{1, 2, 3}, nil) // a topic the old view does not list
	e.updateMetadata()
	if err := release(); kerr.CodeOf(err) != kerr.StaleControllerEpoch {
		t.Fatalf("the overtaken UpdateMetadata answered %v, want STALE_CONTROLLER_EPOCH", err)
	}
	if _, ok := e.m.Replica(tp0); !ok {
		t.Fatal("the replica the new controller made was deleted as a stray")
	}
	if got := e.meta.ControllerEpoch(); got != e.ctrlEpoch {
		t.Fatalf("controller epoch %d, want %d", got, e.ctrlEpoch)
	}
	if err := e.produceOne("after the old view"); err != nil {
		t.Fatalf("produce to the new topic: %v", err)
	}
}
