package replica

import (
	"context"
	"strings"
	"testing"
	"time"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

const (
	consumerWait = 3 * time.Second
	followerWait = 2 * time.Second
)

type consumerOutcome struct {
	res ConsumerFetchResult
	err error
}

// consumerFetchAsync parks a consumer fetch at offset and returns once its
// max-wait timer is armed.
func (e *env) consumerFetchAsync(offset int64) <-chan consumerOutcome {
	e.t.Helper()
	out := make(chan consumerOutcome, 1)
	before := e.clock.pending(consumerWait)
	go func() {
		res, err := e.m.Fetch(context.Background(), ConsumerFetch{TP: tp0, Offset: offset, MinBytes: 1,
			MaxWait: consumerWait, CurrentLeaderEpoch: -1})
		out <- consumerOutcome{res, err}
	}()
	e.clock.WaitTimer(e.t, consumerWait, before+1)
	return out
}

func (e *env) followerFetchAsync(id int32, offset int64) <-chan []FollowerFetchAnswer {
	e.t.Helper()
	out := make(chan []FollowerFetchAnswer, 1)
	before := e.clock.pending(followerWait)
	go func() {
		out <- e.m.ReplicaFetch(context.Background(), FollowerFetch{ReplicaID: id, BrokerEpoch: brokerEpochs[id],
			MaxWait: followerWait, MinBytes: 1, Partitions: []FollowerFetchPartition{
				{TP: tp0, FetchOffset: offset, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}}})
	}()
	e.clock.WaitTimer(e.t, followerWait, before+1)
	return out
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("the parked request was not answered")
		var zero T
		return zero
	}
}

func TestConsumerFetchWokenByHWMove(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1}, nil) // alone in the ISR: an append commits
	out := e.consumerFetchAsync(0)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), 0); err != nil {
		t.Fatal(err)
	}
	o := recv(t, out)
	if o.err != nil || len(o.res.Records) == 0 || o.res.HighWatermark != 1 {
		t.Fatalf("fetch: %+v %v", o.res, o.err)
	}
}

func TestConsumerFetchAnswersEmptyAtMaxWait(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	out := e.consumerFetchAsync(0)
	// An append the HW does not cover yet is not for consumers.
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), 0); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(consumerWait - time.Millisecond)
	select {
	case o := <-out:
		t.Fatalf("answered before max wait: %+v %v", o.res, o.err)
	default:
	}
	e.clock.Advance(time.Millisecond)
	o := recv(t, out)
	if o.err != nil || len(o.res.Records) != 0 || o.res.HighWatermark != 0 {
		t.Fatalf("fetch at max wait: %+v %v", o.res, o.err)
	}
}

func TestFollowerFetchWokenByAppend(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	out := e.followerFetchAsync(2, 0)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), 0); err != nil {
		t.Fatal(err)
	}
	a := recv(t, out)[0]
	if a.Err != nil || len(a.Records) == 0 || a.LeaderLEO != 1 {
		t.Fatalf("answer %+v", a)
	}
}

func TestFollowerFetchAnswersEmptyAtMaxWait(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	out := e.followerFetchAsync(2, 0)
	e.clock.Advance(followerWait - time.Millisecond)
	select {
	case a := <-out:
		t.Fatalf("answered before max wait: %+v", a)
	default:
	}
	e.clock.Advance(time.Millisecond)
	a := recv(t, out)[0]
	if a.Err != nil || len(a.Records) != 0 {
		t.Fatalf("answer %+v", a)
	}
}

// A consumer that sends a rack may read from a follower, and a gRPC reader
// sends no leader epoch. StopReplica leaves the stopped replica a
// leaderless follower, which such a read still passed: a fetch parked there
// went back to sleep on a replica nothing wakes any more and answered only
// at its max wait. It must end at once, sending the reader to the leader.
func TestParkedRackFetchEndsWhenItsReplicaStops(t *testing.T) {
	for _, del := range []bool{false, true} {
		e := newEnv(t)
		e.state(1, 1, 1, []int32{1}, nil)
		out := make(chan consumerOutcome, 1)
		before := e.clock.pending(consumerWait)
		go func() {
			res, err := e.m.Fetch(context.Background(), ConsumerFetch{TP: tp0, Offset: 0, MinBytes: 1,
				MaxWait: consumerWait, Rack: "nowhere", CurrentLeaderEpoch: -1})
			out <- consumerOutcome{res, err}
		}()
		e.clock.WaitTimer(t, consumerWait, before+1)
		stop := &controlv1.StopReplicaRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[1],
			Partitions: []*controlv1.StopReplicaPartition{{Topic: tp0.Topic, Partition: tp0.Partition, LeaderEpoch: 1, Delete: del}}}
		if _, err := e.m.StopReplica(stop); err != nil {
			t.Fatal(err)
		}
		o := recv(t, out)
		if code := kerr.CodeOf(o.err); code != kerr.NotLeaderOrFollower && code != kerr.UnknownTopicOrPartition {
			t.Fatalf("delete=%v: the parked fetch answered %+v, %v; want NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION", del, o.res, o.err)
		}
	}
}

// A follower fetch's answer keeps within its response budget but for one
// first batch, as Kafka's readFromLog: once a partition has brought
// records, later ones read only whole batches that fit, or none. Before,
// every partition past the budget still brought a whole batch, and an
// answer over gRPC's message limit failed every round: the fetcher stalled
// for good.
func TestFollowerFetchKeepsWithinItsBudgetButForOneBatch(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", 3000)
	var parts []FollowerFetchPartition
	batchSize := 0
	for p := range int32(4) {
		tp := TP{Topic: "t", Partition: p}
		e.stateOf(tp, 1, 1, 1, []int32{1, 2}, nil)
		if _, err := e.m.Produce(t.Context(), tp, 1, batch(big), 0); err != nil {
			t.Fatal(err)
		}
		batchSize = len(batch(big))
		parts = append(parts, FollowerFetchPartition{TP: tp, FetchOffset: 0, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1, MaxBytes: 10000})
	}
	answers := e.m.ReplicaFetch(t.Context(), FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2], MaxBytes: 4000, Partitions: parts})
	total, withRecords := 0, 0
	for _, a := range answers {
		if a.Err != nil {
			t.Fatalf("%v: %v", a.TP, a.Err)
		}
		total += len(a.Records)
		if len(a.Records) > 0 {
			withRecords++
		}
	}
	if total > 4000+batchSize || withRecords != 1 {
		t.Fatalf("the answer carries %d bytes in %d partitions, want at most the 4000-byte budget and one %d-byte batch", total, withRecords, batchSize)
	}
}
