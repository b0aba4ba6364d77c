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

// leaderAndIsrOfTopic is controller epoch ctrlEpoch's LeaderAndIsr making
// broker 1 lead tp0, of topic id, at leaderEpoch, with the topic's configs.
func leaderAndIsrOfTopic(ctrlEpoch int32, id string, leaderEpoch int32, configs map[string]string) *controlv1.LeaderAndIsrRequest {
	return &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: ctrlEpoch, BrokerEpoch: brokerEpochs[1],
		TopicConfigs: []*controlv1.TopicConfig{{Topic: tp0.Topic, TopicId: id, Configs: configs}},
		Partitions:   []*commonv1.PartitionState{partitionState(tp0, 1, leaderEpoch, leaderEpoch, []int32{1, 2, 3})}}
}

// wantLeaderAndIsrApplied fails t unless a LeaderAndIsr of tp0 answered
// NONE.
func wantLeaderAndIsrApplied(t *testing.T, resp *controlv1.LeaderAndIsrResponse, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("LeaderAndIsr: %v", err)
	}
	if p := resp.GetPartitions()[0]; kerr.Code(p.GetErrorCode()) != kerr.None {
		t.Fatalf("LeaderAndIsr answered %v: %s", p.GetErrorCode(), p.GetErrorMessage())
	}
}

// A full UpdateMetadata whose view no longer lists a topic sweeps its log
// on disk away as a stray. A newer controller's LeaderAndIsr arriving
// between the sweep's last look at the controller epoch and the deletion
// (the topic created again, on this broker) is applied only after the
// sweep: before, it was applied in that window and the sweep then deleted
// the replica it had just made, with its log.
func TestAStraySweepNeverDeletesWhatANewerControllerJustAssigned(t *testing.T) {
	e := newEnv(t)
	e.logOnDisk(tp0, "old-id")
	full := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, Full: true,
		Controller: &commonv1.Node{Id: 100, Address: ctrlAddr}}
	for _, id := range []int32{1, 2, 3} {
		full.Brokers = append(full.Brokers, &controlv1.BrokerRegistration{Node: &commonv1.Node{Id: id, Address: brokerAddr(id)}, BrokerEpoch: brokerEpochs[id]})
	}
	newer := leaderAndIsrOfTopic(e.ctrlEpoch+1, "new-id", 1, map[string]string{})
	var resp *controlv1.LeaderAndIsrResponse
	var err error
	admitted, finished := make(chan struct{}), make(chan struct{})
	e.m.admitted = func(kind string) {
		if kind == "LeaderAndIsr" {
			close(admitted)
		}
	}
	e.m.deletingStray = func(tp TP) {
		e.m.deletingStray = nil
		go func() {
			defer close(finished)
			resp, err = e.m.LeaderAndIsr(newer)
		}()
		// Until the newer request is applied, or past its fences and
		// waiting to be.
		select {
		case <-admitted:
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("the newer LeaderAndIsr neither passed its fences nor finished")
		}
	}
	if err := e.m.UpdateMetadata(full); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the newer LeaderAndIsr did not finish once the sweep was done")
	}
	wantLeaderAndIsrApplied(t, resp, err)
	r, ok := e.m.Replica(tp0)
	if !ok {
		t.Fatal("the replica the newer controller assigned was deleted as a stray")
	}
	if got := r.Log().TopicID(); got != "new-id" {
		t.Fatalf("the replica's log records topic id %q, want new-id", got)
	}
	if err := e.produceOne("after the sweep"); err != nil {
		t.Fatalf("produce to the leader the newer controller named: %v", err)
	}
}

// A LeaderAndIsr of a controller then succeeded, admitted before the new
// controller's requests and applied after them, is refused: before, the
// topic configs it carried replaced the newer ones the new controller had
// set, in the metadata cache and in the replica's effective config, until
// the topic's configs next changed.
func TestALeaderAndIsrOvertakenByANewerControllerKeepsItsConfigs(t *testing.T) {
	for _, overtaker := range []string{"LeaderAndIsr", "UpdateMetadata"} {
		t.Run(overtaker, func(t *testing.T) {
			e := newEnv(t)
			resp, err := e.m.LeaderAndIsr(leaderAndIsrOfTopic(e.ctrlEpoch, "id", 0, map[string]string{"retention.ms": "1000"}))
			wantLeaderAndIsrApplied(t, resp, err)
			old := e.ctrlEpoch
			release := pauseAdmitted(t, e.m, "LeaderAndIsr", func() error {
				_, err := e.m.LeaderAndIsr(leaderAndIsrOfTopic(old, "id", 0, map[string]string{"retention.ms": "2000"}))
				return err
			})
			e.ctrlEpoch++
			newer := map[string]string{"retention.ms": "3000"}
			switch overtaker {
			case "LeaderAndIsr":
				resp, err := e.m.LeaderAndIsr(leaderAndIsrOfTopic(e.ctrlEpoch, "id", 1, newer))
				wantLeaderAndIsrApplied(t, resp, err)
			case "UpdateMetadata":
				if err := e.m.UpdateMetadata(&controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
					Controller:   &commonv1.Node{Id: 100, Address: ctrlAddr},
					TopicConfigs: []*controlv1.TopicConfig{{Topic: tp0.Topic, TopicId: "id", Configs: newer}}}); err != nil {
					t.Fatal(err)
				}
			}
			overtaken := release()
			if got := e.meta.TopicConfig(tp0.Topic)["retention.ms"]; got != "3000" {
				t.Errorf("metadata cache: retention.ms=%s, want the newer controller's 3000", got)
			}
			r := e.replica()
			r.mu.Lock()
			got := r.cfg.RetentionMs
			r.mu.Unlock()
			if got != 3000 {
				t.Errorf("the replica's retention.ms is %d, want the newer controller's 3000", got)
			}
			if kerr.CodeOf(overtaken) != kerr.StaleControllerEpoch {
				t.Errorf("the overtaken LeaderAndIsr answered %v, want STALE_CONTROLLER_EPOCH", overtaken)
			}
		})
	}
}

// A StopReplica deleting a topic, of a controller then succeeded, admitted
// before the new controller's LeaderAndIsr and applied after it, is
// refused: before, it deleted the replica that LeaderAndIsr had just made
// here (the topic created again under its name), and its log.
func TestAStopReplicaOvertakenByANewerControllerDeletesNothing(t *testing.T) {
	e := newEnv(t)
	e.leaderAndIsrWithID("old-id", 1, 0)
	old := e.ctrlEpoch
	release := pauseAdmitted(t, e.m, "StopReplica", func() error {
		_, err := e.m.StopReplica(&controlv1.StopReplicaRequest{ControllerId: 100, ControllerEpoch: old, BrokerEpoch: brokerEpochs[1],
			Partitions: []*controlv1.StopReplicaPartition{{Topic: tp0.Topic, Partition: tp0.Partition, LeaderEpoch: -1, Delete: true}}})
		return err
	})
	e.ctrlEpoch++
	resp, err := e.m.LeaderAndIsr(leaderAndIsrOfTopic(e.ctrlEpoch, "new-id", 0, map[string]string{}))
	wantLeaderAndIsrApplied(t, resp, err)
	overtaken := release()
	r, ok := e.m.Replica(tp0)
	if !ok {
		t.Fatal("the replica the newer controller made was deleted by the older controller's StopReplica")
	}
	if got := r.Log().TopicID(); got != "new-id" {
		t.Fatalf("the replica's log records topic id %q, want new-id", got)
	}
	if err := e.produceOne("after the old StopReplica"); err != nil {
		t.Fatalf("produce to the leader the newer controller named: %v", err)
	}
	if kerr.CodeOf(overtaken) != kerr.StaleControllerEpoch {
		t.Fatalf("the overtaken StopReplica answered %v, want STALE_CONTROLLER_EPOCH", overtaken)
	}
}
