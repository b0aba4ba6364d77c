package telemetry

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"tidemark.io/services/platform/pki"
)

// receiver is an OTLP trace receiver over mutual TLS that records the span
// names it got and the Common Name of each caller's certificate.
type receiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []string
	callers []string
}

func (r *receiver) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			r.callers = append(r.callers, ti.State.PeerCertificates[0].Subject.CommonName)
		}
	}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, s.GetName())
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// TestHTTPSEndpointExportsOverMutualTLS: with an https:// endpoint the
// exporter presents the process's own certificate and checks the
// receiver's against the cluster's CA; the spans arrive.
func TestHTTPSEndpointExportsOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-1"}, pki.Leaf{Name: "jaeger", Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	serverCreds, err := pki.Options(dir, "jaeger").ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(serverCreds))
	rec := &receiver{}
	coltrace.RegisterTraceServiceServer(srv, rec)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	ctx := context.Background()
	tel, err := Setup(ctx, Options{OTLPEndpoint: "https://" + lis.Addr().String(), TLS: pki.Options(dir, "broker-1")},
		Identity{Service: "tidemark-broker-1", Kind: "broker", NodeID: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.Tracer("test").Start(ctx, "probe")
	span.End()
	if err := tel.Close(ctx); err != nil {
		t.Fatalf("flushing the span: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.spans) != 1 || rec.spans[0] != "probe" {
		t.Fatalf("receiver got spans %v, want [probe]", rec.spans)
	}
	if len(rec.callers) == 0 || rec.callers[0] != "broker-1" {
		t.Fatalf("receiver saw callers %v, want the broker's certificate (broker-1)", rec.callers)
	}
}

// TestHTTPSEndpointNeedsTheProcessCertificate: an https:// endpoint in a
// process without TLS settings is a start-up error naming the flags.
func TestHTTPSEndpointNeedsTheProcessCertificate(t *testing.T) {
	_, err := Setup(context.Background(), Options{OTLPEndpoint: "https://jaeger:4317"}, Identity{Service: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--tls.cert") {
		t.Fatalf("Setup: %v, want an error naming --tls.cert", err)
	}
}

// TestPlainEndpointsStayPlain: host:port and http://host:port are plain
// text, as before (a local Jaeger on loopback).
func TestPlainEndpointsStayPlain(t *testing.T) {
	for _, ep := range []string{"127.0.0.1:4317", "http://127.0.0.1:4317"} {
		opts, err := Options{}.exporterOptions(ep)
		if err != nil || len(opts) != 4 {
			t.Fatalf("%s: %d options, %v", ep, len(opts), err)
		}
	}
}
