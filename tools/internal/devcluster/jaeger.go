package devcluster

import (
	"fmt"
	"os"
	"path/filepath"

	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/telemetry"
)

// JaegerName is Jaeger's certificate in the dev cluster's PKI.
const JaegerName = "jaeger"

// Jaeger's documented ports on the dev machine: OTLP gRPC and the query
// API/UI. With a PortBase b it takes b+3 (OTLP), b+4 (UI) and b+5.
const (
	JaegerOTLP  = "127.0.0.1:4317"
	JaegerQuery = "127.0.0.1:16686"
)

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
	ports := o.Ports()
	var tls *telemetry.JaegerTLS
	if !o.Plaintext {
		// The services export over mutual TLS (OTLPEndpoint is https://),
		// to Jaeger's own certificate from the dev cluster's CA.
		dir := o.PKIDir()
		tls = &telemetry.JaegerTLS{Cert: pki.CertPath(dir, JaegerName), Key: pki.KeyPath(dir, JaegerName), ClientCA: pki.CAPath(dir)}
	}
	if err := os.WriteFile(cfg, []byte(telemetry.LocalJaegerConfig(ports.JaegerOTLP, ports.JaegerQuery, ports.JaegerQueryGRPC, tls)), 0o644); err != nil {
		return nil, err
	}
	return &Node{Name: "jaeger", Kind: "jaeger", Addr: ports.JaegerQuery, Binary: bin,
		Args: []string{"--config", cfg}, LogPath: filepath.Join(o.DataDir, "logs", "jaeger.log")}, nil
}
