// Package controller is a tidemark controller: one of two or more processes
// of which one, elected through etcd, is active. The active controller
// decides leaders and ISRs, keeps them in etcd, and pushes them to brokers;
// the others stand by. Start runs one in-process.
package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/lifecycle"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
)

// Controller is a running controller process.
type Controller struct {
	cfg  Config
	log  *slog.Logger
	tel  *telemetry.Telemetry
	srv  *grpcserver.Server
	lis  net.Listener
	done chan error
}

// Start binds the listener and serves; it returns once the controller
// answers health checks.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = logging.OrDiscard(log)
	tel, err := telemetry.Setup(ctx, cfg.Telemetry, telemetry.Identity{
		Service: fmt.Sprintf("tidemark-controller-%d", cfg.ID), Kind: "controller", NodeID: cfg.ID,
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
	adminv1.RegisterAdminServiceServer(srv, adminv1.UnimplementedAdminServiceServer{})
	controlv1.RegisterControllerServiceServer(srv, controlv1.UnimplementedControllerServiceServer{})
	srv.MarkAllServing()

	c := &Controller{cfg: cfg, log: log, tel: tel, srv: srv, lis: lis, done: make(chan error, 1)}
	go func() {
		if err := srv.Serve(lis); err != nil {
			c.done <- err
		}
	}()
	log.Info("controller started", "id", cfg.ID, "listen", lis.Addr().String())
	return c, nil
}

// Addr is the bound gRPC address.
func (c *Controller) Addr() string { return c.lis.Addr().String() }

// Failed reports a fatal serving error.
func (c *Controller) Failed() <-chan error { return c.done }

// Stop shuts the controller down: stop taking requests, then flush telemetry.
func (c *Controller) Stop(ctx context.Context) error {
	return lifecycle.Sequence(
		lifecycle.StopFunc(func(ctx context.Context) error { c.srv.Stop(ctx); return nil }),
		lifecycle.StopFunc(c.tel.Close),
	).Stop(ctx)
}
