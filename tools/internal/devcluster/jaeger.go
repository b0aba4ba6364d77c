package devcluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// Jaeger's documented ports on the dev machine: OTLP gRPC and the query
// API/UI.
const (
	JaegerOTLP  = "127.0.0.1:4317"
	JaegerQuery = "127.0.0.1:16686"
)

// jaegerConfig runs Jaeger with in-memory storage, receiving OTLP over gRPC
// and serving its query API, on loopback only.
const jaegerConfig = `service:
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
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: 127.0.0.1:16685
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// jaegerNode plans a Jaeger process from the binary `make thirdparty`
// builds, its config written under the data dir.
func (o Options) jaegerNode() (*Node, error) {
	bin := o.JaegerBin
	if bin == "" {
		bin = filepath.Join(o.BinDir, "..", ".bin", "jaeger")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("jaeger binary %s not found (run `make thirdparty`, or pass --jaeger-bin): %w", bin, err)
	}
	cfg := filepath.Join(o.DataDir, "jaeger.yaml")
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, JaegerQuery, JaegerOTLP), 0o644); err != nil {
		return nil, err
	}
	return &Node{Name: "jaeger", Kind: "jaeger", Addr: JaegerQuery, Binary: bin,
		Args: []string{"--config", cfg}, LogPath: filepath.Join(o.DataDir, "logs", "jaeger.log")}, nil
}
