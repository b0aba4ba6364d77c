package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

type deleteOutcome struct {
	low int64
	err error
}

// deleteAsync runs DeleteRecords on tp0 in the background and returns once
// it waits for the low watermark (its timeout timer is armed after its
// first check: only a wake-up ends the wait then).
func (e *env) deleteAsync(offset int64, timeout time.Duration) <-chan deleteOutcome {
	e.t.Helper()
	if timeout == tick {
		e.t.Fatalf("a DeleteRecords timeout of %s cannot be told from the ISR expiration timer", timeout)
	}
	before := e.clock.pending(timeout)
	out := make(chan deleteOutcome, 1)
	go func() {
		res := e.m.DeleteRecords(context.Background(), []DeleteRecordsPartition{{TP: tp0, Offset: offset}}, timeout)[0]
		out <- deleteOutcome{res.LowWatermark, res.Err}
	}()
	e.clock.WaitTimer(e.t, timeout, before+1)
	return out
}

// fetchWithLogStart is follower id's fetch at offset telling the leader its
// log start.
func (e *env) fetchWithLogStart(id int32, offset, logStart int64) FollowerFetchAnswer {
	e.t.Helper()
	a := e.m.ReplicaFetch(context.Background(), FollowerFetch{ReplicaID: id, BrokerEpoch: brokerEpochs[id],
		Partitions: []FollowerFetchPartition{{TP: tp0, FetchOffset: offset, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1, LogStartOffset: logStart}}})
	if a[0].Err != nil {
		e.t.Fatalf("fetch of follower %d: %v", id, a[0].Err)
	}
	return a[0]
}

func deleteResult(t *testing.T, out <-chan deleteOutcome) deleteOutcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("DeleteRecords was not answered")
		return deleteOutcome{}
	}
}

// leaderWithTen is broker 1 leading t-0 with followers 2 and 3 in the ISR
// and records 0-9 committed, both followers at log start 0.
func leaderWithTen(t *testing.T) *env {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	for i := range 10 {
		if err := e.produceOne(fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	e.fetchWithLogStart(2, 10, 0)
	e.fetchWithLogStart(3, 10, 0)
	if hw := e.hw(); hw != 10 {
		t.Fatalf("HW %d, want 10", hw)
	}
	return e
}

// DeleteRecords moves the leader's log start at once (reads below it are
// out of range), answers the followers' fetches with it, and completes when
// the last follower's fetch reports it: the low watermark it returns.
func TestDeleteRecordsWaitsForEveryFollowersLogStart(t *testing.T) {
	e := leaderWithTen(t)
	out := e.deleteAsync(6, 30*time.Second)
	r := e.replica()
	if got := r.log.LogStartOffset(); got != 6 {
		t.Fatalf("leader log start %d, want 6", got)
	}
	if a := e.fetchWithLogStart(2, 10, 0); a.LogStartOffset != 6 {
		t.Fatalf("a follower fetch carries log start %d, want 6", a.LogStartOffset)
	}
	e.fetchWithLogStart(2, 10, 6)
	if o, waiting := parkedDelete(out); !waiting {
		t.Fatalf("answered %+v with follower 3 still at log start 0", o)
	}
	e.fetchWithLogStart(3, 10, 6)
	if o := deleteResult(t, out); o.err != nil || o.low != 6 {
		t.Fatalf("got %d, %v; want low watermark 6", o.low, o.err)
	}
}

func parkedDelete(out <-chan deleteOutcome) (deleteOutcome, bool) {
	select {
	case o := <-out:
		return o, false
	default:
		return deleteOutcome{}, true
	}
}

// A follower that never reports the new log start holds the request until
// its timeout: REQUEST_TIMED_OUT with the low watermark reached, the
// leader's log start moved all the same.
func TestDeleteRecordsTimesOutOnALaggingFollower(t *testing.T) {
	e := leaderWithTen(t)
	// Not lagMax/2: deleteAsync tells its timer from the others by its
	// duration, and the ISR expiration loop's first one, armed late on a
	// loaded machine, was taken for it; time then moved before the
	// request's timer was armed, and that one never fired.
	const timeout = 4 * time.Second
	out := e.deleteAsync(-1, timeout) // -1: the HW, 10
	e.fetchWithLogStart(2, 10, 10)
	e.clock.Advance(timeout)
	o := deleteResult(t, out)
	if kerr.CodeOf(o.err) != kerr.RequestTimedOut || o.low != 0 {
		t.Fatalf("got %d, %v; want REQUEST_TIMED_OUT at low watermark 0", o.low, o.err)
	}
	if got := e.replica().log.LogStartOffset(); got != 10 {
		t.Fatalf("leader log start %d, want 10", got)
	}
}

// Losing the leadership ends the wait with NOT_LEADER_OR_FOLLOWER; a
// follower refuses at once.
func TestDeleteRecordsEndsWithTheLeadership(t *testing.T) {
	e := leaderWithTen(t)
	out := e.deleteAsync(3, 30*time.Second)
	e.state(2, 2, 2, []int32{1, 2, 3}, nil)
	if o := deleteResult(t, out); kerr.CodeOf(o.err) != kerr.NotLeaderOrFollower {
		t.Fatalf("got %d, %v; want NOT_LEADER_OR_FOLLOWER", o.low, o.err)
	}
	res := e.m.DeleteRecords(context.Background(), []DeleteRecordsPartition{{TP: tp0, Offset: 5}}, time.Second)[0]
	if kerr.CodeOf(res.Err) != kerr.NotLeaderOrFollower || res.LowWatermark != -1 {
		t.Fatalf("on a follower: %+v, want NOT_LEADER_OR_FOLLOWER", res)
	}
}

// A follower whose broker leaves the metadata (its registration expired)
// no longer holds the low watermark: the parked request completes.
func TestDeleteRecordsStopsWaitingForADeadBroker(t *testing.T) {
	e := leaderWithTen(t)
	e.fetchWithLogStart(2, 10, 8) // ahead of the leader: only the least counts
	out := e.deleteAsync(8, 30*time.Second)
	if o, waiting := parkedDelete(out); !waiting {
		t.Fatalf("answered %+v with follower 3 alive at log start 0", o)
	}
	req := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		Controller: &commonv1.Node{Id: 100, Address: ctrlAddr}}
	for _, id := range []int32{1, 2} {
		req.Brokers = append(req.Brokers, &controlv1.BrokerRegistration{
			Node: &commonv1.Node{Id: id, Address: brokerAddr(id)}, BrokerEpoch: brokerEpochs[id]})
	}
	if err := e.m.UpdateMetadata(req); err != nil {
		t.Fatal(err)
	}
	if o := deleteResult(t, out); o.err != nil || o.low != 8 {
		t.Fatalf("got %d, %v; want low watermark 8", o.low, o.err)
	}
}

// One request, several partitions: each is answered for itself, a refused
// one at once and with -1, a parked one when its low watermark arrives.
func TestDeleteRecordsAnswersEachPartition(t *testing.T) {
	e := leaderWithTen(t)
	parts := []DeleteRecordsPartition{{TP: TP{Topic: "nope", Partition: 0}, Offset: 1}, {TP: tp0, Offset: 4}, {TP: tp0, Offset: 11}}
	before := e.clock.pending(time.Minute)
	out := make(chan []DeleteRecordsResult, 1)
	go func() { out <- e.m.DeleteRecords(context.Background(), parts, time.Minute) }()
	e.clock.WaitTimer(t, time.Minute, before+1)
	e.fetchWithLogStart(2, 10, 4)
	e.fetchWithLogStart(3, 10, 4)
	var res []DeleteRecordsResult
	select {
	case res = <-out:
	case <-time.After(10 * time.Second):
		t.Fatal("DeleteRecords was not answered")
	}
	if kerr.CodeOf(res[0].Err) != kerr.UnknownTopicOrPartition || res[0].LowWatermark != -1 {
		t.Errorf("unknown partition: %+v", res[0])
	}
	if res[1].Err != nil || res[1].LowWatermark != 4 {
		t.Errorf("t-0 at 4: %+v, want low watermark 4", res[1])
	}
	if kerr.CodeOf(res[2].Err) != kerr.OffsetOutOfRange || res[2].LowWatermark != -1 {
		t.Errorf("t-0 past the HW: %+v", res[2])
	}
}

// On an idle partition a follower's fetch is parked at the leader when
// DeleteRecords moves the log start. The answer at its max wait carries the
// log start as it is then, as Kafka's delayed fetch reads again when it
// completes: it carried the one read before parking, so the follower
// learned of the deletion, and the request heard back from it, only a
// whole max wait later.
func TestAParkedFollowerFetchLearnsADeletionAtItsMaxWait(t *testing.T) {
	e := leaderWithTen(t)
	fetched := e.followerFetchAsync(2, 10)
	out := e.deleteAsync(6, 30*time.Second)
	e.clock.Advance(followerWait)
	if a := recv(t, fetched)[0]; a.Err != nil || a.LogStartOffset != 6 || a.HighWatermark != 10 {
		t.Fatalf("parked fetch answered log start %d, HW %d (%v); want 6 and 10", a.LogStartOffset, a.HighWatermark, a.Err)
	}
	e.fetchWithLogStart(2, 10, 6)
	e.fetchWithLogStart(3, 10, 6)
	if o := deleteResult(t, out); o.err != nil || o.low != 6 {
		t.Fatalf("got %d, %v; want low watermark 6", o.low, o.err)
	}
}
