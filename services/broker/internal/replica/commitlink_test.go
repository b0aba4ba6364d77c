package replica

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// An acks=all write links to what committed it, never to a fetch of an
// earlier leadership: a leader that lost records to an unclean election
// and leads again writes new records at those offsets, and the fetch that
// once moved its HW past them committed other records.
func TestProduceDoesNotLinkToAFetchOfAnEarlierLeadership(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	for _, v := range []string{"a", "b", "c"} {
		if err := e.produceOne(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx, old := tracer.Start(context.Background(), "old fetch")
	a := e.m.ReplicaFetch(ctx, FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2],
		Partitions: []FollowerFetchPartition{{TP: tp0, FetchOffset: 3, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}}})
	old.End()
	if a[0].Err != nil || e.hw() != 3 {
		t.Fatalf("fetch at 3: %v, HW %d; want HW 3", a[0].Err, e.hw())
	}

	// Broker 2 is elected uncleanly with one record; broker 1 follows it
	// and truncates, then leads again with an ISR of itself.
	e.state(2, 2, 2, []int32{2}, nil)
	r := e.replica()
	r.mu.Lock()
	newLEO, err := r.log.TruncateTo(1)
	if err == nil {
		r.state.OnTruncated(newLEO)
	}
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	e.state(1, 3, 3, []int32{1}, nil)

	ctx, produce := tracer.Start(context.Background(), "produce")
	res, err := e.m.Produce(ctx, tp0, -1, batch("x"), produceTimeout)
	produce.End()
	if err != nil || res.BaseOffset != 1 {
		t.Fatalf("produce: offset %d, %v; want offset 1", res.BaseOffset, err)
	}
	for _, s := range rec.Ended() {
		if s.Name() != "produce" {
			continue
		}
		for _, l := range s.Links() {
			if l.SpanContext.SpanID() == old.SpanContext().SpanID() {
				t.Fatal("the write at offset 1 links to the fetch that committed offsets 0-2 of the earlier leadership")
			}
		}
	}
}
