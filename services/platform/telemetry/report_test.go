package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// scriptedExporter fails while err is set.
type scriptedExporter struct {
	tracetest.InMemoryExporter
	err error
}

func (e *scriptedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.err != nil {
		return e.err
	}
	return e.InMemoryExporter.ExportSpans(ctx, spans)
}

// A collector that is away is seen in the log (a warning for the first
// failed export, then at most one a minute, and a line when exports work
// again) and in tidemark_telemetry_export_failures_total, which counts
// every failed export.
func TestFailedExportsAreCountedAndWarnedAboutAtMostOnceAMinute(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	next := &scriptedExporter{err: errors.New("connection refused")}
	r := newReportingExporter(next, "jaeger:4317", reg, slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	export := func() {
		if err := r.ExportSpans(context.Background(), make([]sdktrace.ReadOnlySpan, 3)); err != nil {
			t.Fatalf("ExportSpans returned %v: the failure is reported, not handed on", err)
		}
	}
	count := func(s string) int { return strings.Count(logs.String(), s) }

	export()
	now = now.Add(30 * time.Second)
	export()
	if n := testutil.ToFloat64(r.failures); n != 2 {
		t.Fatalf("failures counted %v, want 2", n)
	}
	if count("exporting traces failed") != 1 {
		t.Fatalf("want one warning for two failures within a minute, got:\n%s", logs.String())
	}
	now = now.Add(exportWarnEvery)
	export()
	if count("exporting traces failed") != 2 || !strings.Contains(logs.String(), "failed_exports=3 lost_spans=9") {
		t.Fatalf("want a second warning a minute on, with the failures so far, got:\n%s", logs.String())
	}

	next.err = nil
	export()
	if count("exporting traces again") != 1 || len(next.GetSpans()) != 3 {
		t.Fatalf("want the recovery logged and the spans exported, got %d spans and:\n%s", len(next.GetSpans()), logs.String())
	}
	export()
	if count("exporting traces again") != 1 || testutil.ToFloat64(r.failures) != 3 {
		t.Fatalf("a working exporter logs nothing more and counts no failure, got:\n%s", logs.String())
	}
	if n, err := testutil.GatherAndCount(reg, "tidemark_telemetry_export_failures_total"); err != nil || n != 1 {
		t.Fatalf("metric registered: %d, %v", n, err)
	}
}
