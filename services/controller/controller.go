// Package controller is a tidemark controller: one of two or more processes
// of which one, elected through etcd, is active. The active controller
// decides leaders and ISRs, keeps them in etcd, and pushes them to brokers;
// the others stand by and answer NOT_CONTROLLER naming it. Start runs one
// in-process.
//
// Layout: office.go runs the campaign loop (campaign, hold a term, resign);
// internal/ctrl is one term of office (the event loop and all its state);
// internal/sender queues control requests per broker; internal/grpcapi has
// the thin gRPC handlers; internal/election and internal/placement hold the
// pure rules.
package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/aclsync"
	"tidemark.io/services/controller/internal/ctrl"
	"tidemark.io/services/controller/internal/grpcapi"
	"tidemark.io/services/etcdfollow"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/conntrack"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/lifecycle"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
)

// Controller is a running controller process.
type Controller struct {
	cfg    Config
	log    *slog.Logger
	tel    *telemetry.Telemetry
	srv    *grpcserver.Server
	lis    net.Listener
	cli    *clientv3.Client
	office *office
	cancel context.CancelFunc
	bg     sync.WaitGroup
	done   chan error
}

// Start binds the listener, serves, and starts campaigning for the
// controller role; it returns once the controller answers health checks
// (as a standby until it wins).
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Controller, err error) {
	defer func() {
		// Start took the given listener over.
		if err != nil && cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = logging.OrDiscard(log)
	cfg.Telemetry.TLS = cfg.TLS // an https:// OTLP endpoint is dialled with the controller's certificate
	tel, err := telemetry.Setup(ctx, cfg.Telemetry, telemetry.Identity{
		Service: fmt.Sprintf("tidemark-controller-%d", cfg.ID), Kind: "controller", NodeID: cfg.ID,
	}, log)
	if err != nil {
		return nil, err
	}
	serverCreds, err := cfg.TLS.ServerCredentials()
	if err != nil {
		_ = tel.Close(ctx)
		return nil, err
	}
	brokerCreds, err := cfg.TLS.DialOption()
	if err != nil {
		_ = tel.Close(ctx)
		return nil, err
	}
	// The main client's connections are recorded, so that a session lost
	// to silence campaigns again on a new one (Options.Redial).
	conns := conntrack.NewConns()
	etcdOpts := cfg.Etcd
	etcdOpts.Dialer = conns.Dialer(etcdOpts.Dialer)
	cli, err := etcdOpts.Connect(ctx)
	if err != nil {
		_ = tel.Close(ctx)
		return nil, err
	}
	// Watches get a client of their own, which a silent watch may close
	// and dial again without touching the lease's connection.
	store, err := metastore.New(cli, metastore.Options{Prefix: cfg.Etcd.Prefix, Logger: log, WatchClient: cfg.Etcd.Client, Redial: conns.Close})
	if err != nil {
		_ = cli.Close()
		_ = tel.Close(ctx)
		return nil, err
	}
	lis, err := cfg.Listener, error(nil)
	if lis == nil {
		lis, err = net.Listen("tcp", cfg.Listen)
	}
	if err != nil {
		_ = cli.Close()
		_ = tel.Close(ctx)
		return nil, fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	addr := cfg.Advertised
	if addr == "" {
		addr = lis.Addr().String()
	}
	c := &Controller{cfg: cfg, log: log, tel: tel, lis: lis, cli: cli, done: make(chan error, 1)}
	c.office = &office{cfg: cfg, store: store, log: log, metrics: ctrl.NewMetrics(tel.Registry), addr: addr, creds: brokerCreds}
	if tp := tel.Tracing(); tp != nil {
		c.office.tracer = tp.Tracer("tidemark/controller")
	}
	az, err := authz.New(authz.Options{Config: cfg.Authz, TLS: cfg.TLS.Enabled(), Logger: log, Registry: tel.Registry, StoredBindings: true})
	if err != nil {
		_ = lis.Close()
		_ = cli.Close()
		_ = tel.Close(ctx)
		return nil, err
	}
	c.srv = grpcserver.New(grpcserver.Options{Logger: log, TracerProvider: tel.Tracing(), Authorizer: az, Credentials: serverCreds,
		Limits: cfg.Limits, Registerer: tel.Registry})
	admin := grpcapi.NewAdmin(c.office)
	admin.TimeoutMaxMs = int32(cfg.RequestTimeoutMax.Milliseconds())
	adminv1.RegisterAdminServiceServer(c.srv, admin)
	controlv1.RegisterControllerServiceServer(c.srv, grpcapi.NewControl(c.office))
	if err := authz.Covers(c.srv.GetServiceInfo()); err != nil {
		_ = lis.Close()
		_ = cli.Close()
		_ = tel.Close(ctx)
		return nil, err
	}
	c.srv.MarkAllServing()
	go func() {
		if err := c.srv.Serve(lis); err != nil {
			c.done <- err
		}
	}()

	// The campaign outlives Start's ctx: it ends with Stop.
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	follow := etcdfollow.NewMetrics(tel.Registry)
	c.bg.Add(3)
	go func() { defer c.bg.Done(); c.office.run(runCtx) }()
	// Every controller, active or standby, decides by the bindings in
	// etcd: a forwarded admin request is authorized by whichever answers.
	go func() { defer c.bg.Done(); aclsync.Run(runCtx, store, az, follow, log) }()
	go func() {
		defer c.bg.Done()
		keepRegistered(runCtx, store, metastore.ControllerNode{ID: cfg.ID, Address: addr}, cfg.SessionTTL, log)
	}()
	log.Info("controller started", "id", cfg.ID, "listen", lis.Addr().String(), "advertised", addr)
	return c, nil
}

// Addr is the bound gRPC address.
func (c *Controller) Addr() string { return c.lis.Addr().String() }

// Services lists the gRPC services and methods the controller serves (the
// authorization tests check each has a policy).
func (c *Controller) Services() map[string]grpc.ServiceInfo { return c.srv.GetServiceInfo() }

// Failed reports a fatal serving error.
func (c *Controller) Failed() <-chan error { return c.done }

// Active reports whether this process holds the controller role now, and
// with which epoch.
func (c *Controller) Active() (epoch int32, ok bool) {
	if a := c.office.current(); a != nil {
		return a.Epoch(), true
	}
	return 0, false
}

// Stop shuts the controller down: the active term resigns first (a standby
// takes over at once instead of after the lease TTL), then the server stops,
// then the etcd client and telemetry.
func (c *Controller) Stop(ctx context.Context) error {
	return lifecycle.Sequence(
		lifecycle.StopFunc(func(ctx context.Context) error {
			c.srv.SetServing("", false)
			c.cancel()
			waitGroup(ctx, &c.bg)
			return nil
		}),
		lifecycle.StopFunc(func(ctx context.Context) error { c.srv.Stop(ctx); return nil }),
		lifecycle.StopFunc(func(context.Context) error { return c.cli.Close() }),
		lifecycle.StopFunc(c.tel.Close),
	).Stop(ctx)
}

// waitGroup waits for wg or ctx, whichever comes first.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// crash stops the process's work without any goodbye, for tests that play
// kill -9: they cut its etcd connection first (see the tests' harness),
// so its leases expire on their own. Stop still releases the rest.
func (c *Controller) crash() {
	c.cancel()
	c.srv.Server.Stop()
}
