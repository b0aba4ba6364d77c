package replica

import (
	"context"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/platform/kerr"
)

// A rack's consumer read on a follower passes its last fetched epoch check,
// then the follower's truncation (an unclean election) cuts the log below
// its offset before the log read. The read answers the divergence the
// check now finds, not the log's bare OFFSET_OUT_OF_RANGE, which would
// make the consumer reset by policy instead of going back to where the
// logs part.
func TestAConsumerReadOvertakenByATruncationAnswersTheDivergence(t *testing.T) {
	e := &env{t: t, clock: newManualClock(), ctrl: newFakeController(), ctrlEpoch: 1}
	e.net = &memNet{ctrl: e.ctrl, managers: map[string]*Manager{}}
	store := &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	e.m, e.meta = e.newManagerWith(1, func(s LogStore) LogStore { store.LogStore = s; return store })
	e.updateMetadata()

	// Leader first, of a topic the controller names by its id.
	if resp, err := e.m.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[1],
		TopicConfigs: []*controlv1.TopicConfig{{Topic: tp0.Topic, TopicId: "cut-id", Configs: map[string]string{}}},
		Partitions:   []*commonv1.PartitionState{partitionState(tp0, 1, 1, 1, []int32{1})}}); err != nil || kerr.Code(resp.GetPartitions()[0].GetErrorCode()) != kerr.None {
		t.Fatalf("LeaderAndIsr: %v %v", resp, err)
	}
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		if _, err := e.m.Produce(context.Background(), tp0, 1, batch(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	e.state(2, 2, 2, []int32{2}, nil) // broker 1 now follows, out of the ISR

	store.mu.Lock()
	store.armed = true
	store.mu.Unlock()
	type answer struct {
		res ConsumerFetchResult
		err error
	}
	out := make(chan answer, 1)
	go func() {
		res, err := e.m.Fetch(context.Background(), ConsumerFetch{TP: tp0, Offset: 5, Rack: "r1", CurrentLeaderEpoch: -1,
			LastFetchedEpoch: 1, HasLastFetchedEpoch: true})
		out <- answer{res, err}
	}()
	select {
	case <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer fetch never read")
	}
	r := e.replica()
	r.mu.Lock()
	if _, err := r.log.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	r.state.OnTruncated(2)
	r.mu.Unlock()
	close(store.release)

	a := recv(t, out)
	want := partition.EpochEndOffset{Epoch: 1, EndOffset: 2}
	if a.err != nil || a.res.Diverging == nil || *a.res.Diverging != want {
		t.Fatalf("the read overtaken by the truncation answered %+v, %v; want the divergence %v", a.res, a.err, want)
	}
	// Like every answer, it names the log's topic id: a reader that keeps
	// the id of what it reads must not take it for no id at all.
	if id := r.Log().TopicID(); id == "" || a.res.TopicID != id {
		t.Fatalf("the divergence answered topic id %q, the log's is %q", a.res.TopicID, id)
	}
}
