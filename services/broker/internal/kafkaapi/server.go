package kafkaapi

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/connlimit"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/logging"
)

// Options configure a Server.
type Options struct {
	// BrokerID is this broker; Metadata names it as the controller, since
	// it forwards controller-only requests itself (as Kafka's brokers do
	// under KRaft).
	BrokerID int32
	// Broker is the gRPC front door's handler set; the Kafka handlers call
	// it for produce, fetch, list offsets and producer ids so both doors run
	// the same code.
	Broker *grpcapi.Broker
	// Replication answers OffsetForLeaderEpoch as it does for followers.
	Replication *grpcapi.Replication
	// RM is the replica manager (metadata cache, leader epochs).
	RM *replica.Manager
	// Admin returns the active controller's AdminService, reached as this
	// broker speaking for the caller in ctx.
	Admin func(ctx context.Context) (adminv1.AdminServiceClient, error)
	// CreateOffsetsTopic asks the active controller for __consumer_offsets,
	// as the group coordinator does: a Metadata request may create it
	// (auto.create.topics.enable). Nil: it is not created that way.
	CreateOffsetsTopic func(ctx context.Context) error
	// Authorizer decides each request as the gRPC methods are decided.
	Authorizer *authz.Authorizer
	// TLS, when set, makes Serve's listener TLS with client certificates;
	// the certificate's Common Name is the principal. ServeListener takes
	// each listener's own.
	TLS    *tls.Config
	Limits Limits
	// SASL configures the listeners with Listener.SASL set.
	SASL SASLOptions
	// LogDirs describes this broker's log dirs for DescribeLogDirs; nil:
	// the API is not advertised.
	LogDirs func() []LogDir
	// Extension serves further APIs (consumer groups); nil: none.
	Extension Extension
	Logger    *slog.Logger
	// Registry, when set, gets the tidemark_kafka_* metrics.
	Registry prometheus.Registerer
}

// Extension serves APIs beyond this package's on the same listener (the
// group coordinator's FindCoordinator, JoinGroup, OffsetCommit...). Its keys
// are advertised in ApiVersions unless this package serves them already.
type Extension interface {
	APIs() map[int16]VersionRange
	// Handle answers one request (its version set) for principal p.
	Handle(ctx context.Context, p identity.Principal, req kmsg.Request) kmsg.Response
}

// Server serves Kafka's protocol on one or more named listeners.
type Server struct {
	opts    Options
	log     *slog.Logger
	table   map[int16]api
	metrics *metrics
	sasl    SASLOptions
	// creating are the topics Metadata requests are having created.
	creating creatingTopics

	mu    sync.Mutex
	lis   []net.Listener
	conns map[*conn]struct{}
	// counts are the connections per client address on all the listeners:
	// max.connections.per.ip is one limit across them, as in Kafka.
	counts *connlimit.Counts
	// clientLines spaces the lines a client's own doings write (failed
	// logins, broken connections): one per kind and client address per
	// connlimit.RefusedWarnEvery, so reconnecting in a loop cannot flood
	// the log; the metrics count every one.
	clientLines *logging.Limiter
	closed      bool
	wg          sync.WaitGroup

	// parkedFetch, when set, replaces the replica manager's Fetch for the
	// long poll's parked partitions (tests).
	parkedFetch func(context.Context, replica.ConsumerFetch) (replica.ConsumerFetchResult, error)
}

// New builds a server; Serve starts it.
func New(o Options) *Server {
	o.Limits = o.Limits.withDefaults()
	s := &Server{opts: o, log: logging.OrDiscard(o.Logger).With("listener", "kafka"), conns: map[*conn]struct{}{}, metrics: newMetrics(o.Registry),
		counts: connlimit.NewCounts(), clientLines: logging.NewLimiter(connlimit.RefusedWarnEvery)}
	s.sasl = o.SASL.withDefaults()
	s.table = s.apis()
	return s
}

// Serve accepts connections on lis, the unnamed listener with Options.TLS,
// until Close.
func (s *Server) Serve(lis net.Listener) error {
	return s.ServeListener(Listener{TLS: s.opts.TLS}, lis)
}

// ServeListener accepts connections on lis, the socket of listener l, until
// Close; each is answered with the brokers' endpoints for l. Connections
// over the per-address limit (counted across all the listeners) are closed
// before a byte is read (connlimit).
func (s *Server) ServeListener(l Listener, lis net.Listener) error {
	overrides, err := connlimit.ParseOverrides(s.opts.Limits.MaxConnectionsPerIPOverrides)
	if err != nil {
		return err
	}
	// A client reconnecting in a loop is counted each time, and warned
	// about once per connlimit.RefusedWarnEvery.
	warned := logging.NewLimiter(connlimit.RefusedWarnEvery)
	lis = connlimit.Wrap(lis, connlimit.Options{PerIP: s.opts.Limits.MaxConnectionsPerIP, Overrides: overrides, Counts: s.counts,
		Refused: func(ip string, limit int) {
			s.metrics.closed.WithLabelValues("refused").Inc()
			if n, ok := warned.Allow(ip); ok {
				s.log.Warn("connection refused: too many from one address", "ip", ip, "max_connections_per_ip", limit,
					"unlogged_since_last_warning", n)
			}
		}})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return lis.Close()
	}
	s.lis = append(s.lis, lis)
	s.mu.Unlock()
	for {
		nc, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		c := s.newConn(nc, l)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.metrics.open.Inc()
		go func() {
			defer s.wg.Done()
			defer s.metrics.open.Dec()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection (their handlers see their
// context end) and waits for them.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for _, lis := range s.lis {
		_ = lis.Close()
	}
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
