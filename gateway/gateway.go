// Package gateway serves tidemark's REST API (grpc-gateway over the admin and
// client gRPC APIs), its OpenAPI document and, on the same port, gRPC health
// and reflection so grpcurl works against it like every other service.
package gateway

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
)

//go:embed openapi/tidemark.swagger.json
var openAPIDoc []byte

// Options configures the gateway.
type Options struct {
	// Listen is the HTTP address (REST, console, and gRPC health/reflection).
	Listen string
	// Controllers and Brokers are the gRPC addresses the gateway talks to.
	Controllers config.StringList
	Brokers     config.StringList
	// MaxBodyBytes refuses larger request bodies before reading them whole.
	MaxBodyBytes int64

	Log       logging.Options
	Telemetry telemetry.Options
}

// DefaultOptions matches the dev cluster's default ports.
func DefaultOptions() Options {
	return Options{
		Listen:       "127.0.0.1:8080",
		Controllers:  config.StringList{"127.0.0.1:9190", "127.0.0.1:9191"},
		Brokers:      config.StringList{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"},
		MaxBodyBytes: 8 << 20,
		Log:          logging.DefaultOptions(),
	}
}

// AddFlags registers the gateway's flags.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", o.Listen, "HTTP listen address for REST, the console and gRPC health")
	fs.Var(&o.Controllers, "controllers", "comma-separated controller gRPC addresses")
	fs.Var(&o.Brokers, "brokers", "comma-separated bootstrap broker gRPC addresses")
	fs.Int64Var(&o.MaxBodyBytes, "http.max.body.bytes", o.MaxBodyBytes, "largest request body accepted")
	o.Log.AddFlags(fs)
	o.Telemetry.AddFlags(fs)
}

// Validate names the first flag whose value cannot work.
func (o Options) Validate() error {
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return config.Invalid("listen", o.Listen, "must be host:port")
	}
	if len(o.Controllers) == 0 {
		return config.Invalid("controllers", "", "at least one controller address is needed")
	}
	if len(o.Brokers) == 0 {
		return config.Invalid("brokers", "", "at least one broker address is needed")
	}
	if o.MaxBodyBytes <= 0 {
		return config.Invalid("http.max.body.bytes", o.MaxBodyBytes, "must be > 0")
	}
	return o.Log.Validate()
}

// Gateway is a running gateway.
type Gateway struct {
	http  *http.Server
	grpc  *grpcserver.Server
	lis   net.Listener
	tel   *telemetry.Telemetry
	conns []*grpc.ClientConn
	done  chan error
	log   *slog.Logger
}

// Start binds and serves; it returns once the gateway answers.
func Start(ctx context.Context, o Options, log *slog.Logger) (*Gateway, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log = logging.OrDiscard(log)
	tel, err := telemetry.Setup(ctx, o.Telemetry, telemetry.Identity{Service: "tidemark-gateway", Kind: "gateway", NodeID: -1}, log)
	if err != nil {
		return nil, err
	}
	g := &Gateway{tel: tel, log: log, done: make(chan error, 1)}

	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}),
		runtime.WithErrorHandler(errorHandler),
	)
	ctrlConn, err := grpc.NewClient(o.Controllers[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("--controllers %s: %w", o.Controllers[0], err)
	}
	brokerConn, err := grpc.NewClient(o.Brokers[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("--brokers %s: %w", o.Brokers[0], err)
	}
	g.conns = []*grpc.ClientConn{ctrlConn, brokerConn}
	if err := adminv1.RegisterAdminServiceHandlerClient(ctx, mux, adminv1.NewAdminServiceClient(ctrlConn)); err != nil {
		return nil, err
	}
	if err := brokerv1.RegisterBrokerServiceHandlerClient(ctx, mux, brokerv1.NewBrokerServiceClient(brokerConn)); err != nil {
		return nil, err
	}

	g.grpc = grpcserver.New(grpcserver.Options{Logger: log, TracerProvider: tel.TracerProvider})
	g.grpc.MarkAllServing()

	root := http.NewServeMux()
	root.Handle("/v1/", http.MaxBytesHandler(mux, o.MaxBodyBytes))
	root.HandleFunc("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPIDoc)
	})
	root.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})

	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	g.lis = lis
	g.http = &http.Server{Handler: grpcOrHTTP(g.grpc, root), ReadHeaderTimeout: 10 * time.Second}
	// One port serves both: gRPC needs HTTP/2 without TLS (h2c).
	g.http.Protocols = new(http.Protocols)
	g.http.Protocols.SetHTTP1(true)
	g.http.Protocols.SetUnencryptedHTTP2(true)
	go func() {
		if err := g.http.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.done <- err
		}
	}()
	log.Info("gateway started", "listen", lis.Addr().String(), "controllers", o.Controllers.String(), "brokers", o.Brokers.String())
	return g, nil
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

// Stop drains HTTP requests, then closes upstream connections and telemetry.
func (g *Gateway) Stop(ctx context.Context) error {
	err := g.http.Shutdown(ctx)
	g.grpc.Stop(ctx)
	for _, c := range g.conns {
		_ = c.Close()
	}
	return errors.Join(err, g.tel.Close(ctx))
}
