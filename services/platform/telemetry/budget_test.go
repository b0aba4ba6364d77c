package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// stalledExporter holds every export until released, like a collector that
// takes no batch for a while, and counts the spans it got.
type stalledExporter struct {
	release chan struct{}
	mu      sync.Mutex
	spans   int
}

func (e *stalledExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	<-e.release
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans += len(spans)
	return nil
}

func (e *stalledExporter) Shutdown(context.Context) error { return nil }

// TestSpansDroppedWhileTheCollectorStallsAreCounted: with the exporter
// stuck, the process holds at most spansHeldLimit spans; every span beyond
// them is counted in tidemark_telemetry_spans_dropped_total and warned
// about once, and every span is either exported or counted.
func TestSpansDroppedWhileTheCollectorStallsAreCounted(t *testing.T) {
	var logs bytes.Buffer
	exp := &stalledExporter{release: make(chan struct{})}
	ctx := context.Background()
	tel, err := Setup(ctx, Options{Exporter: exp}, Identity{Service: "tidemark-broker-1", Kind: "broker", NodeID: 1},
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	const ended = spansHeldLimit + 1000
	for range ended {
		_, span := tel.Tracer("test").Start(ctx, "probe")
		span.End()
	}
	close(exp.release)
	if err := tel.Close(ctx); err != nil {
		t.Fatalf("flushing: %v", err)
	}
	dropped := testutil.ToFloat64(tel.budget.dropped)
	if exp.spans != spansHeldLimit || dropped != ended-spansHeldLimit {
		t.Fatalf("exported %d and counted %v dropped of %d spans; want %d exported and the rest counted",
			exp.spans, dropped, ended, spansHeldLimit)
	}
	if n := strings.Count(logs.String(), "trace export is behind; spans dropped"); n != 1 {
		t.Fatalf("want one warning for the drops within a minute, got %d:\n%s", n, logs.String())
	}
	if n, err := testutil.GatherAndCount(tel.Registry, "tidemark_telemetry_spans_dropped_total"); err != nil || n != 1 {
		t.Fatalf("metric registered: %d, %v", n, err)
	}
}
