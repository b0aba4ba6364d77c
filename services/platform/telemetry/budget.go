package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// spansHeldLimit bounds the spans a process holds for export: ended and not
// yet through an export, delivered or not (the batch span processor's
// default queue size).
const spansHeldLimit = 2048

// batchQueueSlack is room in the batch span processor's queue beyond
// spansHeldLimit: its ForceFlush puts a marker in the queue, which the
// count here does not see, and the processor must never find the queue full
// itself (it would drop the span without counting it).
const batchQueueSlack = 64

// spanBudget counts the spans between their end and the end of their
// export, and drops the one that would exceed the limit, counting it
// (tidemark_telemetry_spans_dropped_total) and warning at most once a
// minute. A collector that is slow, or away for longer than the export
// timeout lets the queue fill, lost spans that way without a trace: the
// batch span processor drops a span it has no room for silently.
type spanBudget struct {
	held    atomic.Int64
	limit   int64
	dropped prometheus.Counter
	log     *slog.Logger
	now     func() time.Time

	mu       sync.Mutex
	unwarned int       // drops since the last warning
	lastWarn time.Time // zero before the first
}

func newSpanBudget(limit int64, reg prometheus.Registerer, log *slog.Logger) *spanBudget {
	b := &spanBudget{limit: limit, log: log, now: time.Now,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tidemark_telemetry_spans_dropped_total",
			Help: "Spans dropped before export because the exporter held as many as it may (the collector slow or away).",
		})}
	reg.MustRegister(b.dropped)
	return b
}

// admit takes room for one span, or counts it dropped.
func (b *spanBudget) admit() bool {
	if b.held.Add(1) <= b.limit {
		return true
	}
	b.held.Add(-1)
	b.dropped.Inc()
	b.warn()
	return false
}

// release gives back the room of n exported spans.
func (b *spanBudget) release(n int) { b.held.Add(-int64(n)) }

func (b *spanBudget) warn() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unwarned++
	now := b.now()
	if !b.lastWarn.IsZero() && now.Sub(b.lastWarn) < exportWarnEvery {
		return
	}
	b.log.Warn("trace export is behind; spans dropped", "dropped_spans", b.unwarned, "held_spans", b.limit)
	b.unwarned, b.lastWarn = 0, now
}

// budgetedProcessor admits each sampled span into the batch span processor
// under the budget; the exporter releases it (budgetedExporter).
type budgetedProcessor struct {
	next   sdktrace.SpanProcessor
	budget *spanBudget
}

func (p budgetedProcessor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	p.next.OnStart(ctx, s)
}

func (p budgetedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	// The batch span processor takes only sampled spans; the others hold no room.
	if s.SpanContext().IsSampled() && !p.budget.admit() {
		return
	}
	p.next.OnEnd(s)
}

func (p budgetedProcessor) Shutdown(ctx context.Context) error   { return p.next.Shutdown(ctx) }
func (p budgetedProcessor) ForceFlush(ctx context.Context) error { return p.next.ForceFlush(ctx) }

// budgetedExporter releases the room of each batch once its export is over,
// delivered or failed.
type budgetedExporter struct {
	sdktrace.SpanExporter
	budget *spanBudget
}

func (e budgetedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	defer e.budget.release(len(spans))
	return e.SpanExporter.ExportSpans(ctx, spans)
}
