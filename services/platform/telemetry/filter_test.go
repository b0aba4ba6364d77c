package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestFetchFilterModes(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want []string
	}{
		{FetchesAdvancing, []string{"produce", "advancing"}},
		{FetchesAll, []string{"produce", "idle", "advancing"}},
		{FetchesNone, []string{"produce"}},
	} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(fetchFilter{next: rec, mode: tc.mode}))
		tr := tp.Tracer("t")
		_, s := tr.Start(context.Background(), "tidemark.broker.v1.BrokerService/Produce")
		s.SetAttributes(attribute.String("which", "produce"))
		s.End()
		_, s = tr.Start(context.Background(), ReplicaFetchSpan)
		s.SetAttributes(attribute.String("which", "idle"))
		s.End()
		_, s = tr.Start(context.Background(), ReplicaFetchSpan)
		s.SetAttributes(attribute.String("which", "advancing"), attribute.Bool(AttrHWAdvanced, true))
		s.End()
		var got []string
		for _, e := range rec.Ended() {
			for _, a := range e.Attributes() {
				if a.Key == "which" {
					got = append(got, a.Value.AsString())
				}
			}
		}
		if len(got) != len(tc.want) {
			t.Fatalf("mode %s exported %v, want %v", tc.mode, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("mode %s exported %v, want %v", tc.mode, got, tc.want)
			}
		}
	}
	if err := (Options{Fetches: "some"}).Validate(); err == nil {
		t.Fatal("bad --trace.fetches accepted")
	}
}
