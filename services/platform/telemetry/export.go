package telemetry

import (
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
)

// collectorRedial is how the exporter's connection is dialled again while
// the collector is away: at least once a second, so spans flow again within
// about a second of its return (gRPC's default backoff grows to two
// minutes, and every span ended meanwhile was lost).
var collectorRedial = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
})

// noRetry: a batch the collector did not take is dropped at once (and
// reported, reportingExporter). The exporter's own retries held the batch
// span processor on one batch for its whole timeout (10 s) while the
// collector was away, with its queue full of the outage's spans, so the
// spans of the first seconds after the collector came back found no room
// and were the ones dropped.
var noRetry = otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})

// exporterOptions turns an OTLP endpoint into the exporter's options, with
// dial added to its connection's dial options (connCutter's). The
// scheme decides the link: https:// is mutual TLS with the process's own
// certificate (o.TLS), so spans, which name topics, brokers and clients,
// cross the network encrypted and only to a receiver the cluster's CA
// vouches for; http:// or a bare host:port is plain text (a local Jaeger on
// loopback).
func (o Options) exporterOptions(ep string, dial ...grpc.DialOption) ([]otlptracegrpc.Option, error) {
	common := []otlptracegrpc.Option{otlptracegrpc.WithDialOption(append([]grpc.DialOption{collectorRedial}, dial...)...), noRetry}
	if o.exportTimeout > 0 {
		common = append(common, otlptracegrpc.WithTimeout(o.exportTimeout))
	}
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
		return append([]otlptracegrpc.Option{otlptracegrpc.WithEndpoint(strings.TrimSuffix(host, "/")),
			otlptracegrpc.WithTLSCredentials(credentials.NewTLS(c))}, common...), nil
	}
	host := strings.TrimSuffix(strings.TrimPrefix(ep, "http://"), "/")
	return append([]otlptracegrpc.Option{otlptracegrpc.WithEndpoint(host), otlptracegrpc.WithInsecure()}, common...), nil
}
