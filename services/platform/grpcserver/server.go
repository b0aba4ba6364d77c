// Package grpcserver is the one constructor for every tidemark gRPC server:
// health, reflection, the OpenTelemetry stats handler, panic recovery,
// Kafka-style error mapping, authorization, logging, message size, stream and
// connection limits, a look at request bytes before decoding (Admit), and an ordered
// graceful stop with a deadline.
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/flowcontrol"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/wirecodec"
)

// DefaultMaxMessageBytes bounds requests and answers: large enough for a
// replica fetch answer (replica.fetch.response.max.bytes, 10 MiB, plus one
// oversized first batch), small enough that a bad client cannot make the
// server buffer without limit.
const DefaultMaxMessageBytes = 64 << 20

// Options configures a server. Zero values pick the defaults.
type Options struct {
	Logger          *slog.Logger
	MaxMessageBytes int
	// TracerProvider for the otelgrpc stats handler; nil turns the handler
	// off (it costs tens of microseconds a call, for nothing when tracing is
	// off).
	TracerProvider trace.TracerProvider
	// StatsFilter, when set, decides per call whether it is traced.
	StatsFilter otelgrpc.Filter
	Unary       []grpc.UnaryServerInterceptor
	Stream      []grpc.StreamServerInterceptor
	// Credentials secures the listener (tlsconf.Options.ServerCredentials:
	// mutual TLS); nil serves plaintext.
	Credentials credentials.TransportCredentials
	// Authorizer decides every call after panic recovery and error
	// mapping and before the handler; Serve refuses to start when a
	// registered method has no policy. With Credentials and no
	// Authorizer, the server authorizes with the defaults (super user
	// User:admin, no ACLs): TLS never runs without authorization.
	Authorizer *authz.Authorizer
	// Limits bound streams per connection and connections per address; the
	// zero value means DefaultLimits.
	Limits Limits
	// Admit, when set, sees every request's bytes before they are decoded.
	Admit Admit
	// Registerer, when set, gets tidemark_connections_refused_total (and,
	// with an answer budget, tidemark_answer_bytes_reserved*).
	Registerer prometheus.Registerer
	// AnswerBytesPerConnection, when positive, gives every connection an
	// answer budget of that many bytes (max.queued.answer.bytes.per.connection):
	// the handlers that charge their answers (ReserveAnswer) hold at most
	// about that much queued for a client that does not read. 0: none.
	AnswerBytesPerConnection int
}

// Server wraps a *grpc.Server with its health service.
type Server struct {
	*grpc.Server
	health  *health.Server
	log     *slog.Logger
	authz   *authz.Authorizer
	limits  Limits
	refused *prometheus.CounterVec
	serving *serving
	answers *answerBudgets // nil without an answer budget
	tls     bool           // connections are tracked by the credentials, after their handshake
}

// KeepaliveEnforcement is the keepalive policy of every tidemark server,
// a non-grpcserver one included (the dev launcher's): pings as often as
// every 5 s, with or without calls in flight. Every tidemark connection
// pings after 10 s without a read (connpool.Keepalive); gRPC's default
// policy (5 minutes, none while idle) answers such pings with GOAWAY
// "too_many_pings", which ends the calls in flight.
func KeepaliveEnforcement() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true})
}

// New builds a server with health and reflection registered. Register the
// service implementations on it, then call Serve.
func New(o Options) *Server {
	log := logging.OrDiscard(o.Logger)
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits()
	}
	if o.Credentials != nil && o.Authorizer == nil {
		// No ACL file: cannot fail.
		o.Authorizer, _ = authz.New(authz.Options{Config: authz.DefaultConfig(), TLS: true, Logger: log})
	}
	if o.Credentials != nil && !o.Authorizer.Enabled() {
		panic("grpcserver: a TLS listener with an authorizer built for plaintext (give authz.Options.TLS the same setting)")
	}
	protoCodec := wirecodec.Codec{}
	// releaseUnary right inside error mapping: every interceptor after it
	// (authorization's answer filters) sees the reply itself, and only the
	// two before it see an encodedReply.
	// The serving count outermost: a stop must see every call (drain.go).
	calls := &serving{}
	unary := []grpc.UnaryServerInterceptor{calls.unary(), recoverUnary(log), errorsUnary(log), releaseUnary(protoCodec)}
	stream := []grpc.StreamServerInterceptor{calls.stream(), recoverStream(log), errorsStream(log)}
	var opts []grpc.ServerOption
	if o.Admit != nil {
		// Right after error mapping, before authorization and any other
		// interceptor: a parked refusal must be collected for every decoded
		// request, whatever a later interceptor decides.
		ac := newAdmitCodec(o.Admit)
		opts = append(opts, grpc.ForceServerCodecV2(ac))
		unary, stream = append(unary, ac.unary()), append(stream, ac.stream())
	} else {
		opts = append(opts, grpc.ForceServerCodecV2(replyCodec{proto: protoCodec}))
	}
	var answers *answerBudgets
	if o.AnswerBytesPerConnection > 0 {
		answers = newAnswerBudgets(o.AnswerBytesPerConnection)
		unary, stream = append(unary, answers.unary()), append(stream, answers.stream())
	}
	if o.Authorizer != nil {
		unary = append(unary, o.Authorizer.Unary())
		stream = append(stream, o.Authorizer.Stream())
	}
	unary = append(unary, o.Unary...)
	stream = append(stream, o.Stream...)
	if o.Credentials != nil && answers != nil {
		opts = append(opts, grpc.Creds(answerCreds{TransportCredentials: o.Credentials, budgets: answers}))
	} else if o.Credentials != nil {
		opts = append(opts, grpc.Creds(o.Credentials))
	}
	if o.Limits.MaxConcurrentStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(o.Limits.MaxConcurrentStreams))
	}
	if o.TracerProvider != nil {
		handlerOpts := []otelgrpc.Option{otelgrpc.WithTracerProvider(o.TracerProvider)}
		if o.StatsFilter != nil {
			handlerOpts = append(handlerOpts, otelgrpc.WithFilter(o.StatsFilter))
		}
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(handlerOpts...)))
	}
	opts = append(opts, flowcontrol.ServerOptions()...)
	gs := grpc.NewServer(append(opts,
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(o.MaxMessageBytes),
		grpc.MaxSendMsgSize(o.MaxMessageBytes),
		KeepaliveEnforcement(),
	)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	srv := &Server{Server: gs, health: hs, log: log, authz: o.Authorizer, limits: o.Limits, serving: calls, answers: answers, tls: o.Credentials != nil}
	if o.Registerer != nil && answers != nil {
		registerAnswerGauges(o.Registerer, answers)
	}
	if o.Registerer != nil {
		srv.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_connections_refused_total",
			Help: "Client connections closed at accept because a limit was reached, by limit.",
		}, []string{"limit"})
		o.Registerer.MustRegister(srv.refused)
	}
	return srv
}

// SetServing marks a service (or "" for the whole server) serving or not.
func (s *Server) SetServing(service string, serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus(service, st)
}

// IncarnationService is the health service a broker process serves for
// its registration epoch. A health check of it tells "the incarnation I
// mean answers" from "some process answers at its address": after a fast
// restart the address is the new process's, which does not know the old
// epoch (NOT_FOUND), so the old incarnation is gone.
func IncarnationService(brokerEpoch int64) string {
	return fmt.Sprintf("%s%d", IncarnationServicePrefix, brokerEpoch)
}

// IncarnationServicePrefix starts every IncarnationService name.
const IncarnationServicePrefix = "tidemark.broker.incarnation/"

// MarkAllServing sets every registered service, and the server, to SERVING.
func (s *Server) MarkAllServing() {
	for name := range s.GetServiceInfo() {
		s.SetServing(name, true)
	}
	s.SetServing("", true)
}

// Serve serves on lis until Stop. A listener closed by Stop is not an error.
// Connections over max.connections.per.ip are closed as they are accepted.
func (s *Server) Serve(lis net.Listener) error {
	if s.authz != nil {
		if err := authz.Covers(s.GetServiceInfo()); err != nil {
			_ = lis.Close()
			return err
		}
	}
	lis = limitListener(lis, s.limits, s.log, s.refused)
	if s.answers != nil && !s.tls {
		lis = answerListener{Listener: lis, budgets: s.answers}
	}
	err := s.Server.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop reports NOT_SERVING, then drains in-flight calls, and closes the
// connections left once no call has been served for a moment (a frozen
// peer never closes its own; see drain.go) or when ctx ends. Health goes
// first so that load balancers and clients stop sending before the
// listener closes.
func (s *Server) Stop(ctx context.Context) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(done)
	}()
	switch s.drain(ctx, done) {
	case "":
		return
	case "idle":
		s.log.Info("graceful stop: every call answered; closing the connections whose peers have not closed them")
	default:
		s.log.Warn("graceful stop deadline passed; closing open calls", "calls_in_service", s.serving.n.Load())
	}
	s.Server.Stop()
	<-done
}

func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Errorf(codes.Internal, "internal error in %s", info.FullMethod)
			}
		}()
		return h(ctx, req)
	}
}

func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in stream handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Errorf(codes.Internal, "internal error in %s", info.FullMethod)
			}
		}()
		return h(srv, ss)
	}
}

// errorsUnary maps handler errors through the one error table, so handlers
// return *kerr.Error and never build statuses themselves.
func errorsUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil {
			st := kerr.ToStatus(err)
			logCall(log, info.FullMethod, st)
			return nil, st.Err()
		}
		return resp, nil
	}
}

func errorsStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := h(srv, ss); err != nil {
			st := kerr.ToStatus(err)
			logCall(log, info.FullMethod, st)
			return st.Err()
		}
		return nil
	}
}

func logCall(log *slog.Logger, method string, st *status.Status) {
	switch st.Code() {
	case codes.Internal, codes.Unknown, codes.DataLoss:
		log.Error("call failed", "method", method, "code", st.Code().String(), "err", st.Message())
	default:
		log.Debug("call refused", "method", method, "code", st.Code().String(), "err", st.Message())
	}
}
