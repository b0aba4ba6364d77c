package telemetry

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"google.golang.org/grpc/credentials"
)

// exporterOptions turns an OTLP endpoint into the exporter's options. The
// scheme decides the link: https:// is mutual TLS with the process's own
// certificate (o.TLS), so spans, which name topics, brokers and clients,
// cross the network encrypted and only to a receiver the cluster's CA
// vouches for; http:// or a bare host:port is plain text (a local Jaeger on
// loopback).
func (o Options) exporterOptions(ep string) ([]otlptracegrpc.Option, error) {
	if host, ok := strings.CutPrefix(ep, "https://"); ok {
		if o.TLS.Plaintext || o.TLS.CA == "" || o.TLS.Cert == "" || o.TLS.Key == "" {
			return nil, fmt.Errorf("OTLP endpoint %s: https needs the process's certificate (--tls.ca, --tls.cert, --tls.key)", ep)
		}
		c, err := o.TLS.Client()
		if err != nil {
			return nil, fmt.Errorf("OTLP endpoint %s: %w", ep, err)
		}
		// The receiver is checked against its own host name, not the
		// cluster's --tls.server.name override.
		c.ServerName = ""
		return []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(strings.TrimSuffix(host, "/")), otlptracegrpc.WithTLSCredentials(credentials.NewTLS(c))}, nil
	}
	host := strings.TrimSuffix(strings.TrimPrefix(ep, "http://"), "/")
	return []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(host), otlptracegrpc.WithInsecure()}, nil
}
