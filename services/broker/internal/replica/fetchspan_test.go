package replica

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A follower fetch that moves the HW of two partitions shows both moves on
// the leader's span: an event per partition naming it, and the list in
// tidemark.hw.advances. The span's attributes were set per partition, so
// only the last partition's move survived, and the events named none.
func TestLeaderFetchSpanShowsEveryPartitionsHWMove(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	e := newEnv(t)
	e.stateOf(tp0, 1, 1, 1, []int32{1, 2}, nil)
	e.stateOf(tp1, 1, 1, 1, []int32{1, 2}, nil)
	for _, tp := range []TP{tp0, tp1, tp1} {
		if _, err := e.m.Produce(context.Background(), tp, 1, batch("a"), produceTimeout); err != nil {
			t.Fatal(err)
		}
	}
	ctx, span := tracer.Start(context.Background(), "fetch")
	answers := e.m.ReplicaFetch(ctx, FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2], Partitions: []FollowerFetchPartition{
		{TP: tp0, FetchOffset: 1, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1},
		{TP: tp1, FetchOffset: 2, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}}})
	span.End()
	for _, a := range answers {
		if a.Err != nil || a.HWAfter <= a.HWBefore {
			t.Fatalf("%v: %v, HW %d -> %d; want the fetch to move it", a.TP, a.Err, a.HWBefore, a.HWAfter)
		}
	}
	s := rec.Ended()[0]
	moves := map[string]int64{} // "topic-partition" -> hw.after
	for _, ev := range s.Events() {
		if ev.Name != "high watermark advanced" {
			continue
		}
		attrs := attribute.NewSet(ev.Attributes...)
		topic, _ := attrs.Value("tidemark.topic")
		p, _ := attrs.Value("tidemark.partition")
		after, _ := attrs.Value("hw.after")
		moves[topic.AsString()+"-"+itoa(p.AsInt64())] = after.AsInt64()
	}
	if moves["t-0"] != 1 || moves["t-1"] != 2 || len(moves) != 2 {
		t.Errorf("HW-advance events name %v, want t-0 to 1 and t-1 to 2", moves)
	}
	attrs := attribute.NewSet(s.Attributes()...)
	advances, _ := attrs.Value("tidemark.hw.advances")
	if advances.AsString() != "t-0:0>1,t-1:0>2" {
		t.Errorf("tidemark.hw.advances %q, want t-0:0>1,t-1:0>2", advances.AsString())
	}
	if after, ok := attrs.Value("tidemark.hw.after"); ok {
		t.Errorf("the span claims one HW move, tidemark.hw.after %d, of the two it made", after.AsInt64())
	}
}
