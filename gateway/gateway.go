// Package gateway serves tidemark's REST API (grpc-gateway over the admin and
// client gRPC APIs, with each partition's calls routed to its leader), its
// OpenAPI document and, on the same port, gRPC health and reflection so
// grpcurl works against it like every other service.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"

	"tidemark.io/gateway/console"
	"tidemark.io/gateway/internal/restauth"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
)

// Gateway is a running gateway.
type Gateway struct {
	http   *http.Server
	grpc   *grpcserver.Server
	lis    net.Listener
	tel    *telemetry.Telemetry
	client *client.Client
	// follows carries the records:follow streams on connections of their
	// own: on the calls' connections, idle follows used up a broker's
	// streams per connection and every other call to it waited.
	follows *client.Client
	admin   *client.Admin
	console *console.Console
	demo    *connpool.Pool     // connections to the brokers' fault injection and the dev launcher
	stopAll context.CancelFunc // ends the streams
	streams *streamSlots       // the streams open, bounded
	done    chan error
	log     *slog.Logger
	handler http.Handler // the HTTP side, for in-process tests
}

// Start binds and serves; it returns once the gateway answers.
func Start(ctx context.Context, o Options, log *slog.Logger) (*Gateway, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log = logging.OrDiscard(log)
	o.Telemetry.TLS = o.TLS // an https:// OTLP endpoint is dialled with the gateway's certificate
	tel, err := telemetry.Setup(ctx, o.Telemetry, telemetry.Identity{Service: "tidemark-gateway", Kind: "gateway", NodeID: -1}, log)
	if err != nil {
		return nil, err
	}
	g := &Gateway{tel: tel, log: log, done: make(chan error, 1)}
	if err := g.build(ctx, o); err != nil {
		g.closeUpstreams(ctx)
		return nil, err
	}
	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		g.closeUpstreams(ctx)
		return nil, fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	g.lis = &peerTimeoutListener{Listener: lis, timeout: o.PeerTimeout, warn: func(err error) {
		log.Warn("cannot bound how long a vanished caller holds its connection", "err", err)
	}}
	lis = g.lis
	go func() {
		var err error
		if g.http.TLSConfig != nil {
			err = g.http.ServeTLS(lis, "", "") // the certificate comes from TLSConfig
		} else {
			err = g.http.Serve(lis)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.done <- err
		}
	}()
	log.Info("gateway started", "listen", lis.Addr().String(), "tls", o.TLS.Enabled(), "rest.auth", o.authOn(),
		"controllers", o.Controllers.String(), "brokers", o.Brokers.String())
	return g, nil
}

// build makes the upstream clients, the REST mux and the servers.
func (g *Gateway) build(ctx context.Context, o Options) error {
	tp := g.tel.Tracing()
	// The clients' own calls (metadata, admin) are bounded like the
	// gateway's: one attempt by the request timeout, a call by the retry
	// budget on top.
	// Every connection is mutual TLS with the gateway's certificate (or
	// plaintext) and speaks for the REST user of the call's context.
	tlsDial, err := o.TLS.DialOption()
	if err != nil {
		return err
	}
	copts := client.Options{TracerProvider: tp, Logger: g.log, Dialer: o.Dialer,
		DialOptions:    append([]grpc.DialOption{tlsDial}, restauth.ForwardUser()...),
		RequestTimeout: o.RequestTimeout, APITimeout: o.RetryTimeout + o.RequestTimeout}
	copts.DiscoverBrokers = func(ctx context.Context) []string { return g.discoverBrokers(ctx, o.RequestTimeout) }
	if g.client, err = client.New(o.Brokers, copts); err != nil {
		return err
	}
	if g.follows, err = client.New(o.Brokers, copts); err != nil {
		return err
	}
	if g.admin, err = client.NewAdmin(o.Controllers, copts); err != nil {
		return err
	}
	stopping, stopAll := context.WithCancel(context.Background())
	g.stopAll = stopAll
	r := &router{cl: g.client, budget: o.RetryTimeout, requestTimeout: o.RequestTimeout, stopping: stopping}
	follows := &router{cl: g.follows, budget: o.RetryTimeout, requestTimeout: o.RequestTimeout, stopping: stopping}
	streams := newStreamSlots(o.MaxStreamsPerUser, o.MaxStreams)
	g.streams = streams
	admin := adminService{a: g.admin, stopping: stopping, budget: o.RetryTimeout + o.RequestTimeout, streams: streams}
	g.console, err = console.New(console.Options{
		Admin: g.admin, Client: g.client, ClientOptions: copts,
		EnableActions: o.Console.Actions, DevControl: o.Console.DevControl, JaegerUI: o.Console.JaegerUI,
		Streams: streams.acquire, // the pages' event streams count and are bounded with the REST streams
		Logger:  g.log,
	})
	if err != nil {
		return err
	}
	// The brokers' fault injection and the dev launcher: demonstration
	// services the client package does not cover.
	g.demo = connpool.New(copts.DialOptions...)
	gate := demoGate{enabled: o.Console.Actions}
	mux, err := newRESTMux(ctx, restServices{
		brokers: brokerService{r: r, follows: follows, streams: streams}, groups: groupService{r}, admin: admin,
		faults: faultService{gate: gate, r: r, admin: g.admin, conns: g.demo, obs: g.console},
		dev:    devService{gate: gate, addr: o.Console.DevControl, conns: g.demo, obs: g.console},
	}, tp != nil, o.MaxJSONObjects)
	if err != nil {
		return err
	}
	authn, hosts, err := g.restSecurity(o)
	if err != nil {
		return err
	}
	metrics := newHTTPMetrics(g.tel.Registry, streams)
	g.handler = newHTTPHandler(mux, g.console, o.MaxBodyBytes, authn, hosts, tp, metrics, g.log)

	g.grpc = grpcserver.New(grpcserver.Options{Logger: g.log, TracerProvider: tp})
	g.grpc.MarkAllServing()
	g.http = &http.Server{
		Handler:           grpcOrHTTP(g.grpc, g.handler),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	// One port serves both: gRPC needs HTTP/2, over TLS (ALPN h2) or,
	// with --plaintext, without (h2c).
	g.http.Protocols = new(http.Protocols)
	g.http.Protocols.SetHTTP1(true)
	if o.TLS.Plaintext {
		g.http.Protocols.SetUnencryptedHTTP2(true)
		return nil
	}
	g.http.Protocols.SetHTTP2(true)
	if g.http.TLSConfig, err = o.TLS.Server(); err != nil {
		return err
	}
	// A client certificate is one way to authenticate among others (a
	// token, a session): asked for, verified against the CA when sent,
	// not required.
	g.http.TLSConfig.ClientAuth = tls.VerifyClientCertIfGiven
	return nil
}

// discoverBrokers names the live brokers' addresses as the active
// controller knows them, for the broker clients when no broker they know
// answers: with the gateway idle, every broker may have come back on
// another port, and the brokers were never asked again. Asked as the
// gateway itself (the addresses are not the REST user's to be refused),
// within one request timeout.
func (g *Gateway) discoverBrokers(ctx context.Context, timeout time.Duration) []string {
	if g.admin == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(restauth.WithUser(ctx, ""), timeout)
	defer cancel()
	resp, err := g.admin.DescribeCluster(ctx)
	if err != nil {
		g.log.Debug("no broker answered, and the controller could not name them", "err", err)
		return nil
	}
	var addrs []string
	for _, b := range resp.GetBrokers() {
		if b.GetAlive() && b.GetNode().GetAddress() != "" {
			addrs = append(addrs, b.GetNode().GetAddress())
		}
	}
	return addrs
}

// restSecurity makes the authenticator and the Host names of the HTTP side.
func (g *Gateway) restSecurity(o Options) (*restauth.Authenticator, *hostSet, error) {
	var tokens *restauth.Tokens
	if o.Auth.TokensFile != "" {
		t, err := restauth.LoadTokens(o.Auth.TokensFile, g.log)
		if err != nil {
			return nil, nil, err
		}
		tokens = t
	}
	certFile := ""
	if o.TLS.Enabled() {
		certFile = o.TLS.Cert
	}
	hosts, err := allowedHosts(o.Listen, certFile, o.Auth.AllowedHosts)
	if err != nil {
		return nil, nil, err
	}
	authn := restauth.New(restauth.Options{Required: o.authOn(), Tokens: tokens, SessionTTL: o.Auth.SessionTTL, Log: g.log})
	return authn, hosts, nil
}

// grpcOrHTTP sends gRPC calls (HTTP/2 with a gRPC content type) to the gRPC
// server and everything else to the HTTP handler.
func grpcOrHTTP(g *grpcserver.Server, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			g.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Addr is the bound HTTP address.
func (g *Gateway) Addr() string { return g.lis.Addr().String() }

// Failed reports a fatal serving error.
func (g *Gateway) Failed() <-chan error { return g.done }

// grpcStopGrace is how long Stop lets the gateway's own gRPC calls finish.
const grpcStopGrace = time.Second

// Stop ends the streams, drains the other HTTP requests, then closes the
// upstream connections and telemetry.
func (g *Gateway) Stop(ctx context.Context) error {
	g.stopAll()
	// The console's event streams never go idle: end them first, or
	// Shutdown would wait its whole deadline for them.
	if g.console != nil {
		_ = g.console.Close()
	}
	// The gateway's own gRPC services are health and reflection, served
	// through the HTTP server: a health Watch never ends by itself, and
	// Shutdown waited its whole deadline for one. Stop them first, with a
	// short grace for calls in flight.
	gctx, cancel := context.WithTimeout(ctx, grpcStopGrace)
	g.grpc.Stop(gctx)
	cancel()
	err := g.http.Shutdown(ctx)
	return errors.Join(err, g.closeUpstreams(ctx))
}

// closeUpstreams closes whatever build made, in reverse order.
func (g *Gateway) closeUpstreams(ctx context.Context) error {
	var errs []error
	if g.console != nil {
		errs = append(errs, g.console.Close())
	}
	if g.stopAll != nil {
		g.stopAll()
	}
	if g.demo != nil {
		errs = append(errs, g.demo.Close())
	}
	if g.admin != nil {
		errs = append(errs, g.admin.Close())
	}
	if g.follows != nil {
		errs = append(errs, g.follows.Close())
	}
	if g.client != nil {
		errs = append(errs, g.client.Close())
	}
	return errors.Join(append(errs, g.tel.Close(ctx))...)
}
