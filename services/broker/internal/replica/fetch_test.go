package replica

import (
	"context"
	"testing"
	"time"
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
