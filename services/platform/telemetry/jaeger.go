package telemetry

import "fmt"

// JaegerTLS is the OTLP receiver's mutual TLS: Jaeger's certificate and
// key, and the CA its callers' certificates must come from.
type JaegerTLS struct{ Cert, Key, ClientCA string }

// LocalJaegerConfig is the configuration tidemark runs a Jaeger v2 binary
// with outside Docker (`make run` with Jaeger, the trace tests): spans kept
// in memory, OTLP over gRPC received on otlpGRPC (with mutual TLS when tls
// is set), the query API and UI on queryHTTP, its gRPC query service on
// queryGRPC. Use loopback addresses. Jaeger's query service does not trace
// itself (enable_tracing is on by default in v2): it would export to the
// default OTLP endpoint, plaintext, which here is its own receiver, and
// with TLS on log a failed connection every few seconds to minutes forever.
func LocalJaegerConfig(otlpGRPC, queryHTTP, queryGRPC string, tls *JaegerTLS) string {
	receiverTLS := ""
	if tls != nil {
		receiverTLS = fmt.Sprintf(`
        tls:
          cert_file: %q
          key_file: %q
          client_ca_file: %q`, tls.Cert, tls.Key, tls.ClientCA)
	}
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_query:
    enable_tracing: false
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s%s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, queryHTTP, queryGRPC, otlpGRPC, receiverTLS)
}
