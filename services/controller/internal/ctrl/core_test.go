package ctrl

import (
	"log/slog"
	"testing"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// oneWrite is a core with a partition-state write in flight.
func oneWrite(t *testing.T) *core {
	t.Helper()
	c := newCore(&commonv1.Node{Id: 100}, 1, slog.New(slog.DiscardHandler), policy{})
	tp := &topic{name: "t"}
	p := &partition{t: tp, id: 0, replicas: election.Assignment{1, 2},
		rec: metastore.PartitionRecord{Topic: "t", State: metastore.PartitionState{Leader: 1, ISR: []int32{1, 2}}, ModRevision: 5}}
	tp.parts = []*partition{p}
	c.topics["t"] = tp
	c.brokers[2] = &broker{info: metastore.Broker{BrokerInfo: metastore.BrokerInfo{ID: 2}, Epoch: 7}}
	c.commit([]change{{p: p, d: election.Decision{State: election.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}}, Changed: true},
		cause: causeOffline}}, func([]*partition, error) {})
	if c.wait == nil {
		t.Fatal("commit did not wait for its write")
	}
	return c
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}

// Write, then push, enforced: while a write is in flight the core emits
// nothing and takes no other event.
func TestCoreRefusesToActWhileAWriteIsInFlight(t *testing.T) {
	c := oneWrite(t)
	mustPanic(t, "a push while a write is in flight", func() { c.pushUpdateMetadata(nil, nil, true, nil) })
	c = oneWrite(t)
	mustPanic(t, "an event while a write is in flight", func() { c.handle(evBrokerDeparted{id: 1}) })
	c = oneWrite(t)
	mustPanic(t, "the wrong result for the write in flight", func() { c.handle(evTopicRead{}) })
	c = newCore(&commonv1.Node{Id: 100}, 1, slog.New(slog.DiscardHandler), policy{})
	mustPanic(t, "a result with nothing in flight", func() { c.handle(evWriteResult{}) })
}
