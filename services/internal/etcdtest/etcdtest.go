// Package etcdtest starts a real, in-process etcd server for tests: one member
// on free loopback ports in a temporary directory, tuned so 1 s leases are
// allowed, and stopped when the test ends. Clients can be routed through a
// Bridge that pauses or cuts their connection.
package etcdtest

import (
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"tidemark.io/services/metastore/embedded"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/pki"
)

// Test timings: with a 100 ms election timeout etcd's minimum lease TTL is
// ceil(1.5 × 100 ms) = 1 s, so tests may use 1–2 s leases.
const (
	DefaultHeartbeat       = 10 * time.Millisecond
	DefaultElectionTimeout = 100 * time.Millisecond
)

// Option adjusts the test server.
type Option func(*embedded.Config)

// WithTimings sets raft's heartbeat interval and election timeout.
func WithTimings(heartbeat, election time.Duration) Option {
	return func(c *embedded.Config) {
		c.HeartbeatInterval = heartbeat
		c.ElectionTimeout = election
	}
}

// WithMaxTxnOps caps operations per transaction (etcd's default is 128).
func WithMaxTxnOps(n uint) Option {
	return func(c *embedded.Config) { c.MaxTxnOps = n }
}

// WithLogger sends etcd's logs to l; by default they are discarded.
func WithLogger(l *slog.Logger) Option {
	return func(c *embedded.Config) { c.Logger = l }
}

// Server is a running test etcd.
type Server struct {
	cfg embedded.Config // with the real ports once started, for Restart

	mu      sync.Mutex
	srv     *embedded.Server
	bridges []*Bridge
	stopped time.Time // when the last Restart's stop returned
}

// Start starts a server and registers its Close with tb.Cleanup. It fails
// the test if the server is not ready in time.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	cfg := embedded.Config{
		Dir:               tb.TempDir(),
		ClientURL:         "http://127.0.0.1:0",
		PeerURL:           "http://127.0.0.1:0",
		HeartbeatInterval: DefaultHeartbeat,
		ElectionTimeout:   DefaultElectionTimeout,
		UnsafeNoFsync:     true,
		StartTimeout:      10 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := embedded.Start(cfg)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	cfg.ClientURL, cfg.PeerURL = srv.ClientURL(), srv.PeerURL()
	s := &Server{cfg: cfg, srv: srv}
	tb.Cleanup(s.Close)
	return s
}

// Restart stops the server and starts it again after down, on the same
// data and ports: what etcd keeps on disk survives, and as on any etcd
// start every lease's expiry is set a whole TTL ahead again. Clients that
// go through a Bridge see a process exit: their connections are cut and
// new ones refused until the server is back. Those that dial the server
// directly see etcd's graceful close, which serves their open streams for
// up to its request timeout.
func (s *Server) Restart(tb testing.TB, down time.Duration) {
	tb.Helper()
	s.stopAndStart(tb, down, nil)
}

// stopAndStart stops the server, runs stopped (if any) on its data while
// it is down, and starts it again after down.
func (s *Server) stopAndStart(tb testing.TB, down time.Duration, stopped func()) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bridges {
		b.setDown(true)
	}
	s.srv.Close()
	s.stopped = time.Now()
	if stopped != nil {
		stopped()
	}
	time.Sleep(down)
	srv, err := embedded.Start(s.cfg)
	if err != nil {
		tb.Fatalf("etcdtest: restart: %v", err)
	}
	s.srv = srv
	for _, b := range s.bridges {
		b.setDown(false)
	}
}

// Stopped is when the last Restart's stop returned: after a graceful
// close, when etcd had let its last open stream go.
func (s *Server) Stopped() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// Endpoint is the client URL to dial; a restart keeps it.
func (s *Server) Endpoint() string { return s.cfg.ClientURL }

// Client returns a new client of the server, closed when the test ends.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return NewClient(tb, s.Endpoint())
}

// Close stops the server. Safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv.Close()
}

// NewClient dials endpoint with quiet logging and registers its Close with
// tb.Cleanup.
func NewClient(tb testing.TB, endpoint string) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: etcdconn.DialOptions(),
	})
	if err != nil {
		tb.Fatalf("etcdtest: dial %s: %v", endpoint, err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// WithClientTLS serves clients over TLS only, with the server certificate
// "etcd" from the pki directory dir (created there if missing) and, with
// clientCertAuth, client certificates required and their Common Name taken
// as the etcd user. Endpoint is then https://.
func WithClientTLS(tb testing.TB, dir string, clientCertAuth bool) Option {
	tb.Helper()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "etcd"}); err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	return func(c *embedded.Config) {
		c.ClientURL = "https://127.0.0.1:0"
		c.ClientTLS = &embedded.TLS{
			CA: pki.CAPath(dir), Cert: pki.CertPath(dir, "etcd"), Key: pki.KeyPath(dir, "etcd"),
			ClientCertAuth: clientCertAuth,
		}
	}
}

// WithProgressNotify sets etcd's watch progress notification interval.
func WithProgressNotify(d time.Duration) Option {
	return func(c *embedded.Config) { c.WatchProgressNotifyInterval = d }
}

// Backup stops the server, copies its data directory (what an operator's
// file-level backup or `etcdctl snapshot save` keeps: keys, revisions,
// leases) and starts it again at once, as Restart does. It returns the
// copy for RestoreBackup.
func (s *Server) Backup(tb testing.TB) string {
	tb.Helper()
	dst := tb.TempDir()
	s.stopAndStart(tb, 0, func() {
		if err := os.CopyFS(dst, os.DirFS(s.cfg.Dir)); err != nil {
			tb.Fatalf("etcdtest: backup: %v", err)
		}
	})
	return dst
}

// RestoreBackup stops the server, replaces its data with a copy Backup
// made and starts it again after down, on the same ports: etcd's state
// goes back to the backup's, its revision, the epochs stored in its keys
// and its leases included (an operator restoring an older snapshot).
func (s *Server) RestoreBackup(tb testing.TB, backup string, down time.Duration) {
	tb.Helper()
	s.stopAndStart(tb, down, func() {
		if err := os.RemoveAll(s.cfg.Dir); err != nil {
			tb.Fatalf("etcdtest: restore: %v", err)
		}
		if err := os.CopyFS(s.cfg.Dir, os.DirFS(backup)); err != nil {
			tb.Fatalf("etcdtest: restore: %v", err)
		}
	})
}
