// Package telemetry sets up tracing (OpenTelemetry, exported over OTLP) and
// the Prometheus /metrics endpoint for a tidemark service.
package telemetry

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/tlsconf"
)

// Options configures tracing and metrics.
type Options struct {
	// OTLPEndpoint (host:port of an OTLP gRPC receiver, e.g. Jaeger's 4317;
	// https://host:port for mutual TLS with TLS's certificate).
	// Empty means: use OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT when set, else no tracing.
	OTLPEndpoint string
	// MetricsListen is the address of the /metrics HTTP endpoint; empty = off.
	MetricsListen string
	// Fetches selects which follower fetch round trips are exported:
	// advancing (those that moved a HW; default), all or none.
	Fetches string
	// Exporter, when set, receives spans instead of OTLP (in-process tests
	// record spans with it). Not a flag.
	Exporter sdktrace.SpanExporter
	// TLS is the process's own TLS settings, which an https:// endpoint is
	// dialled with. Not a flag: each service sets it from its --tls.*.
	TLS tlsconf.Options
	// exportTimeout bounds each OTLP export; 0 is the exporter's default
	// (10 s). Tests shorten it.
	exportTimeout time.Duration
}

// AddFlags registers --otel.endpoint and --metrics.listen.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.OTLPEndpoint, "otel.endpoint", o.OTLPEndpoint, "OTLP gRPC endpoint for traces: https://host:port (mutual TLS with this process's certificate) or host:port (plain text); empty uses OTEL_EXPORTER_OTLP_ENDPOINT, else tracing is off")
	fs.StringVar(&o.MetricsListen, "metrics.listen", o.MetricsListen, "address for the Prometheus /metrics endpoint; empty turns it off")
	fs.StringVar(&o.Fetches, "trace.fetches", o.Fetches, "follower fetch round trips to export: advancing (those that moved a HW), all or none")
}

// Validate names the telemetry flag that is wrong.
func (o Options) Validate() error {
	if o.Fetches != "" {
		if err := validFetchMode(o.Fetches); err != nil {
			return config.Invalid("trace.fetches", o.Fetches, "%v", err)
		}
	}
	return nil
}

// Identity names the process in traces and metrics.
type Identity struct {
	// Service is the OpenTelemetry service name, per instance, e.g.
	// tidemark-broker-1.
	Service    string
	Kind       string // broker, controller, gateway
	NodeID     int32
	Rack       string
	Attributes []attribute.KeyValue
}

// Telemetry holds the tracer provider and the metrics registry of a process.
type Telemetry struct {
	TracerProvider trace.TracerProvider
	Registry       *prometheus.Registry
	sdk            *sdktrace.TracerProvider
	metricsSrv     *http.Server
	metricsAddr    string
	budget         *spanBudget // spans held for export; nil when tracing is off
	log            *slog.Logger
}

// Enabled reports whether OTLP export is configured.
func (o Options) endpoint() string {
	if o.OTLPEndpoint != "" {
		return o.OTLPEndpoint
	}
	if os.Getenv("OTEL_SDK_DISABLED") == "true" {
		return ""
	}
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// Setup starts tracing and the metrics endpoint. Close stops both.
func Setup(ctx context.Context, o Options, id Identity, log *slog.Logger) (*Telemetry, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	t := &Telemetry{Registry: prometheus.NewRegistry(), log: logging.OrDiscard(log)}
	t.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	if ep := o.endpoint(); ep != "" || o.Exporter != nil {
		exp := o.Exporter
		if exp == nil {
			opts, err := o.exporterOptions(ep, newConnCutter(ep, t.log).dialOptions()...)
			if err != nil {
				return nil, err
			}
			exp, err = otlptracegrpc.New(ctx, opts...)
			if err != nil {
				return nil, fmt.Errorf("otlp exporter for %s: %w", ep, err)
			}
		}
		exp = newReportingExporter(exp, ep, t.Registry, t.log) // failures counted and logged here
		t.budget = newSpanBudget(spansHeldLimit, t.Registry, t.log)
		exp = budgetedExporter{SpanExporter: exp, budget: t.budget}
		batcher := sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithMaxQueueSize(spansHeldLimit+batchQueueSlack))
		attrs := append([]attribute.KeyValue{
			semconv.ServiceName(id.Service),
			semconv.ServiceNamespace("tidemark"),
			attribute.String("tidemark.kind", id.Kind),
			attribute.Int("tidemark.node_id", int(id.NodeID)),
		}, id.Attributes...)
		if id.Rack != "" {
			attrs = append(attrs, attribute.String("tidemark.rack", id.Rack))
		}
		res, err := sdkresource.Merge(sdkresource.Default(), sdkresource.NewWithAttributes(semconv.SchemaURL, attrs...))
		if err != nil {
			res = sdkresource.NewSchemaless(attrs...)
		}
		mode := o.Fetches
		if mode == "" {
			mode = FetchesAdvancing
		}
		t.sdk = sdktrace.NewTracerProvider(
			sdktrace.WithSpanProcessor(fetchFilter{next: budgetedProcessor{next: batcher, budget: t.budget}, mode: mode}),
			sdktrace.WithResource(res))
		t.TracerProvider = t.sdk
		t.log.Info("tracing on", "otlp_endpoint", ep, "service_name", id.Service)
	} else {
		t.TracerProvider = noop.NewTracerProvider()
	}

	if o.MetricsListen != "" {
		lis, err := net.Listen("tcp", o.MetricsListen)
		if err != nil {
			return nil, fmt.Errorf("--metrics.listen %s: %w", o.MetricsListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{}))
		t.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		t.metricsAddr = lis.Addr().String()
		go func() {
			if err := t.metricsSrv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.log.Error("metrics endpoint stopped", "err", err)
			}
		}()
	}
	return t, nil
}

// Tracing returns the tracer provider when traces are exported, nil when
// tracing is off (callers then skip instrumentation altogether).
func (t *Telemetry) Tracing() trace.TracerProvider {
	if t.sdk == nil {
		return nil
	}
	return t.sdk
}

// MetricsAddr is the bound address of /metrics, or "" when off.
func (t *Telemetry) MetricsAddr() string { return t.metricsAddr }

// Tracer returns a named tracer from the process's provider.
func (t *Telemetry) Tracer(name string) trace.Tracer { return t.TracerProvider.Tracer(name) }

// Close flushes spans and stops the metrics endpoint.
func (t *Telemetry) Close(ctx context.Context) error {
	var errs []error
	if t.metricsSrv != nil {
		errs = append(errs, t.metricsSrv.Shutdown(ctx))
	}
	if t.sdk != nil {
		errs = append(errs, t.sdk.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
