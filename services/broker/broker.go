// Package broker is a tidemark broker: it hosts partition replicas, serves
// produce and fetch to clients, replicates as leader or follower, and obeys
// the active controller. Start runs one in-process, so the cluster tests and
// the broker binary share the same code.
package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/lifecycle"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
)

// Broker is a running broker.
type Broker struct {
	cfg  Config
	log  *slog.Logger
	tel  *telemetry.Telemetry
	srv  *grpcserver.Server
	lis  net.Listener
	done chan error
}

// Start opens the data directory, binds the listener and serves. It returns
// once the broker answers health checks.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = logging.OrDiscard(log)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("--data.dir %s: %w", cfg.DataDir, err)
	}
	tel, err := telemetry.Setup(ctx, cfg.Telemetry, telemetry.Identity{
		Service: fmt.Sprintf("tidemark-broker-%d", cfg.ID), Kind: "broker", NodeID: cfg.ID, Rack: cfg.Rack,
	}, log)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = tel.Close(ctx)
		return nil, fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	srv := grpcserver.New(grpcserver.Options{Logger: log, TracerProvider: tel.TracerProvider})
	brokerv1.RegisterBrokerServiceServer(srv, brokerv1.UnimplementedBrokerServiceServer{})
	replicationv1.RegisterReplicationServiceServer(srv, replicationv1.UnimplementedReplicationServiceServer{})
	controlv1.RegisterBrokerControlServiceServer(srv, controlv1.UnimplementedBrokerControlServiceServer{})
	faultv1.RegisterFaultInjectionServiceServer(srv, faultv1.UnimplementedFaultInjectionServiceServer{})
	srv.MarkAllServing()

	b := &Broker{cfg: cfg, log: log, tel: tel, srv: srv, lis: lis, done: make(chan error, 1)}
	go func() {
		if err := srv.Serve(lis); err != nil {
			b.done <- err
		}
	}()
	log.Info("broker started", "id", cfg.ID, "listen", lis.Addr().String(), "rack", cfg.Rack, "data_dir", cfg.DataDir)
	return b, nil
}

// Addr is the bound gRPC address.
func (b *Broker) Addr() string { return b.lis.Addr().String() }

// Failed reports a fatal serving error.
func (b *Broker) Failed() <-chan error { return b.done }

// Stop shuts the broker down in order: stop taking requests, then flush
// telemetry. It returns when done or when ctx ends.
func (b *Broker) Stop(ctx context.Context) error {
	return lifecycle.Sequence(
		lifecycle.StopFunc(func(ctx context.Context) error { b.srv.Stop(ctx); return nil }),
		lifecycle.StopFunc(b.tel.Close),
	).Stop(ctx)
}
