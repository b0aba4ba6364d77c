// Package embedded runs a single-member etcd server inside the calling
// process. The dev launcher uses it as tidemark's metadata store, and tests
// start it (through internal/etcdtest) so they talk to a real etcd.
package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Defaults for Config's zero fields.
const (
	DefaultName              = "tidemark-meta"
	DefaultClientURL         = "http://127.0.0.1:2379"
	DefaultPeerURL           = "http://127.0.0.1:2380"
	DefaultHeartbeatInterval = 100 * time.Millisecond
	DefaultElectionTimeout   = time.Second
	DefaultStartTimeout      = 10 * time.Second
)

// Config describes one embedded etcd member. Only Dir is required.
type Config struct {
	// Name is the member name.
	Name string
	// Dir holds etcd's data (WAL and snapshots). It is created if missing.
	Dir string
	// ClientURL is where clients connect, e.g. http://127.0.0.1:2379.
	// Port 0 picks a free port and Server.ClientURL reports the real one;
	// the member then advertises port 0, which is harmless for a single
	// member whose clients dial Server.ClientURL (and do not auto-sync).
	ClientURL string
	// PeerURL is the raft peer address. Port 0 picks a free port.
	PeerURL string
	// HeartbeatInterval and ElectionTimeout are raft's timings. etcd refuses
	// lease TTLs shorter than about 1.5 × ElectionTimeout (rounded up to a
	// whole second), so tests that want 1 s leases lower ElectionTimeout.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// MaxTxnOps caps operations per transaction; 0 keeps etcd's 128.
	MaxTxnOps uint
	// UnsafeNoFsync skips fsync: faster, and loses data on a crash. Tests only.
	UnsafeNoFsync bool
	// StartTimeout bounds the wait for the server to become ready.
	StartTimeout time.Duration
	// Logger receives etcd's own logs; nil discards them.
	Logger *slog.Logger
	// ClientTLS, when set, serves clients over TLS only: ClientURL must
	// then be https://.
	ClientTLS *TLS
	// CompactionRetention, when set, keeps that much history and compacts
	// older revisions (etcd's --auto-compaction-mode=periodic): every
	// metadata write adds a revision, and without compaction the store
	// grows until etcd refuses writes at its backend quota. tidemark never
	// watches from far back: a controller reloads and watches from the
	// load's revision, and steps down if a watch fails.
	CompactionRetention time.Duration
	// WatchProgressNotifyInterval is how often etcd tells an idle watch
	// (one asking for progress) the current revision; 0 keeps etcd's 10 min.
	WatchProgressNotifyInterval time.Duration
}

// TLS are the PEM files of etcd's client listener.
type TLS struct {
	// Cert and Key are the server's certificate (its host names must
	// include the address clients dial) and key.
	Cert, Key string
	// CA verifies client certificates.
	CA string
	// ClientCertAuth requires a client certificate signed by CA; with
	// auth enabled, its Common Name is the etcd user (etcd's
	// --client-cert-auth).
	ClientCertAuth bool
}

// Server is a running embedded etcd member.
type Server struct {
	etcd      *embed.Etcd
	clientURL string
	peerURL   string
	closeOnce sync.Once
}

// Start launches the member and waits until it serves clients.
func Start(cfg Config) (*Server, error) {
	ec, err := cfg.embedConfig()
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: start: %w", err)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: failed while starting: %w", err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd: not ready after %s", timeout)
	}
	if len(e.Clients) == 0 || len(e.Peers) == 0 {
		e.Close()
		return nil, errors.New("embedded etcd: no client or peer listener")
	}
	scheme := "http://"
	if cfg.ClientTLS != nil {
		scheme = "https://"
	}
	return &Server{
		etcd:      e,
		clientURL: scheme + e.Clients[0].Addr().String(),
		peerURL:   "http://" + e.Peers[0].Listener.Addr().String(),
	}, nil
}

// ClientURL is the address clients dial, with the real port.
func (s *Server) ClientURL() string { return s.clientURL }

// PeerURL is the raft peer address, with the real port.
func (s *Server) PeerURL() string { return s.peerURL }

// Err reports a fatal server error; it is closed once the server has stopped.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the server: client connections are drained (bounded by etcd's
// request timeout), then raft and the listeners stop. Safe to call twice.
func (s *Server) Close() {
	s.closeOnce.Do(s.etcd.Close)
}

func (cfg Config) embedConfig() (*embed.Config, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded etcd: Config.Dir is required")
	}
	name := cfg.Name
	if name == "" {
		name = DefaultName
	}
	clientScheme := "http"
	if cfg.ClientTLS != nil {
		clientScheme = "https"
	}
	curl, err := parseURL("ClientURL", cfg.ClientURL, DefaultClientURL, clientScheme)
	if err != nil {
		return nil, err
	}
	purl, err := parseURL("PeerURL", cfg.PeerURL, DefaultPeerURL, "http")
	if err != nil {
		return nil, err
	}
	hb, el := cfg.HeartbeatInterval, cfg.ElectionTimeout
	if hb <= 0 {
		hb = DefaultHeartbeatInterval
	}
	if el <= 0 {
		el = DefaultElectionTimeout
	}
	if el < 5*hb {
		return nil, fmt.Errorf("embedded etcd: ElectionTimeout %s must be at least 5 × HeartbeatInterval %s", el, hb)
	}

	ec := embed.NewConfig()
	ec.Name = name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{*curl}
	ec.AdvertiseClientUrls = []url.URL{*curl}
	ec.ListenPeerUrls = []url.URL{*purl}
	ec.AdvertisePeerUrls = []url.URL{*purl}
	ec.InitialCluster = ec.InitialClusterFromName(name)
	ec.TickMs = uint(hb / time.Millisecond)
	ec.ElectionMs = uint(el / time.Millisecond)
	if cfg.MaxTxnOps > 0 {
		ec.MaxTxnOps = cfg.MaxTxnOps
	}
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	if cfg.WatchProgressNotifyInterval > 0 {
		ec.WatchProgressNotifyInterval = cfg.WatchProgressNotifyInterval
	}
	if cfg.CompactionRetention > 0 {
		ec.AutoCompactionMode = "periodic"
		ec.AutoCompactionRetention = cfg.CompactionRetention.String()
	}
	if t := cfg.ClientTLS; t != nil {
		if t.Cert == "" || t.Key == "" || (t.ClientCertAuth && t.CA == "") {
			return nil, errors.New("embedded etcd: ClientTLS needs Cert and Key, and CA with ClientCertAuth")
		}
		ec.ClientTLSInfo = transport.TLSInfo{CertFile: t.Cert, KeyFile: t.Key, TrustedCAFile: t.CA, ClientCertAuth: t.ClientCertAuth}
	}
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zapToSlog(cfg.Logger))
	return ec, nil
}

func parseURL(field, raw, def, scheme string) (*url.URL, error) {
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("embedded etcd: Config.%s %q is not a URL like %s", field, raw, def)
	}
	if raw == def {
		u.Scheme = scheme
	}
	if u.Scheme != scheme {
		return nil, fmt.Errorf("embedded etcd: Config.%s %q: must be %s://", field, raw, scheme)
	}
	return u, nil
}
