package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// testTracing sends a REST call carrying a W3C traceparent through a
// gateway with tracing on: the gateway's HTTP span and the gRPC client
// span of its upstream call both join the caller's trace.
func testTracing(t *testing.T, e *env) {
	exp := tracetest.NewInMemoryExporter()
	g := startGateway(t, e.tc, func(o *Options) { o.Telemetry.Exporter = exp })
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := newREST(t, g)
	a := r.do(http.MethodGet, ordersPath+"/offsets?spec=OFFSET_SPEC_LATEST", nil,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if a.status != http.StatusOK {
		t.Fatalf("traced call: %d %s", a.status, a.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.tel.TracerProvider.(*sdktrace.TracerProvider).ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	var server, upstream bool
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() != traceID {
			continue
		}
		switch {
		case s.SpanKind == trace.SpanKindServer && strings.HasPrefix(s.Name, "GET /v1/topics/"):
			server = true
		case s.SpanKind == trace.SpanKindClient && s.Name == "tidemark.broker.v1.BrokerService/ListOffsets":
			upstream = true
		}
	}
	if !server || !upstream {
		var got []string
		for _, s := range exp.GetSpans() {
			got = append(got, s.SpanKind.String()+" "+s.Name+" "+s.SpanContext.TraceID().String())
		}
		t.Fatalf("want a server span and a ListOffsets client span in trace %s; spans: %q", traceID, got)
	}
}
