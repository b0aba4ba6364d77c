package replica

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// An acks=all write held because the ISR fell below min.insync.replicas
// after its append (the HW does not move under the min ISR, KAFKA-15583)
// is committed when the topic's min.insync.replicas is lowered, and links
// to a span of that HW advance, as to a fetch or a LeaderAndIsr that
// moved the HW. The advance had no span, and the write no link.
func TestLoweredMinInsyncReleasesAHeldWriteWithASpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	e := newTracedEnv(t, tracer)
	e.state(1, 1, 1, []int32{1, 2}, map[string]string{"min.insync.replicas": "2"})

	ctx, produce := tracer.Start(context.Background(), "produce")
	out := make(chan produceOutcome, 1)
	before := e.clock.pending(produceTimeout)
	go func() {
		res, err := e.m.Produce(ctx, tp0, -1, batch("a"), produceTimeout)
		out <- produceOutcome{res, err}
	}()
	e.clock.WaitTimer(t, produceTimeout, before+1)

	// The controller drops follower 2: the ISR is the leader alone, below
	// min.insync.replicas 2, and the HW stays where it was.
	e.state(1, 1, 2, []int32{1}, nil)
	if hw := e.hw(); hw != 0 {
		t.Fatalf("HW %d under the min ISR, want 0", hw)
	}
	if _, waiting := parked(out); !waiting {
		t.Fatal("the write was answered while the HW was held")
	}

	e.configUpdate(map[string]map[string]string{"t": {"min.insync.replicas": "1"}}, nil)
	o := e.result(out)
	produce.End()
	if o.err != nil || e.hw() != 1 {
		t.Fatalf("after lowering min.insync.replicas: %v, HW %d; want the write committed at HW 1", o.err, e.hw())
	}
	var lowered sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "broker.min_insync_lowered" {
			lowered = s
		}
	}
	if lowered == nil {
		t.Fatal("no span for the HW advance lowering min.insync.replicas made")
	}
	attrs := attribute.NewSet(lowered.Attributes()...)
	if v, _ := attrs.Value("tidemark.hw.after"); v.AsInt64() != 1 {
		t.Errorf("span's tidemark.hw.after %v, want 1", v.Emit())
	}
	if v, _ := attrs.Value("tidemark.min_insync_replicas.after"); v.AsInt64() != 1 {
		t.Errorf("span's tidemark.min_insync_replicas.after %v, want 1", v.Emit())
	}
	for _, s := range rec.Ended() {
		if s.Name() != "produce" {
			continue
		}
		for _, l := range s.Links() {
			if l.SpanContext.SpanID() == lowered.SpanContext().SpanID() {
				return
			}
		}
	}
	t.Fatal("the write does not link to the HW advance that committed it")
}
