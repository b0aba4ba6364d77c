package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exportWarnEvery bounds the warnings of a collector that stays away: one
// a minute, the metric counts every failure.
const exportWarnEvery = time.Minute

// reportingExporter tells the operator when spans stop reaching the
// collector. The batch span processor drops a batch whose export failed and
// hands the error to OpenTelemetry's global handler, which prints it to
// stderr outside the process's log and counts nothing; here each failure is
// counted (tidemark_telemetry_export_failures_total), the first of a run
// and then one a minute are logged as warnings, and the recovery as info.
type reportingExporter struct {
	sdktrace.SpanExporter
	failures prometheus.Counter
	log      *slog.Logger
	endpoint string
	now      func() time.Time

	mu     sync.Mutex
	failed int       // failed exports since the last success
	lost   int       // the spans in them
	warned time.Time // last warning; zero when this run of failures has none
	last   time.Time // last warning of any run, for the rate limit
}

func newReportingExporter(exp sdktrace.SpanExporter, endpoint string, reg prometheus.Registerer, log *slog.Logger) *reportingExporter {
	r := &reportingExporter{SpanExporter: exp, log: log, endpoint: endpoint, now: time.Now,
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tidemark_telemetry_export_failures_total",
			Help: "Span batches the trace exporter failed to deliver to the OTLP collector (their spans are lost).",
		})}
	reg.MustRegister(r.failures)
	return r
}

// ExportSpans exports and reports the outcome. The error is not returned:
// it has been reported, and the processor would only print it again.
func (r *reportingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	r.report(r.SpanExporter.ExportSpans(ctx, spans), len(spans))
	return nil
}

func (r *reportingExporter) report(err error, spans int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if !r.warned.IsZero() {
			r.log.Info("exporting traces again", "otlp_endpoint", r.endpoint, "failed_exports", r.failed, "lost_spans", r.lost)
		}
		r.failed, r.lost, r.warned = 0, 0, time.Time{}
		return
	}
	r.failures.Inc()
	r.failed++
	r.lost += spans
	now := r.now()
	if !r.last.IsZero() && now.Sub(r.last) < exportWarnEvery {
		return
	}
	r.warned, r.last = now, now
	r.log.Warn("exporting traces failed; their spans are lost", "otlp_endpoint", r.endpoint, "err", err,
		"failed_exports", r.failed, "lost_spans", r.lost)
}
