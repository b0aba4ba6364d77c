package metastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultMaxTxnOps is etcd's default limit on operations per transaction.
const DefaultMaxTxnOps = 128

// Options configures a Store.
type Options struct {
	// Prefix is the root of every key; empty means DefaultPrefix. A trailing
	// slash is dropped.
	Prefix string
	// MaxTxnOps must not exceed the server's --max-txn-ops; 0 means 128.
	// Writes larger than one transaction are split (see UpdatePartitionStates).
	MaxTxnOps int
	// Logger receives elections, registrations and fencing failures; nil is silent.
	Logger *slog.Logger
	// Now stamps elected_at, registered_at and requested_at; nil is time.Now.
	Now func() time.Time
	// WatchClient, when set, dials the client the store's watches run on,
	// apart from the store's own: a watch presumed cut off (WatchTimeout)
	// moves to a new TCP connection by closing it and dialling another,
	// while the connection the leases are renewed on is left alone. It is
	// closed when the store's client is. nil watches on the store's client,
	// where a watch found cut off is watched again on a new stream, which
	// reaches a new connection only if the client has another endpoint.
	WatchClient func(context.Context) (*clientv3.Client, error)
	// WatchTimeout is the least silence (no event, no answer to a progress
	// request) after which a watch is presumed cut off and watched again;
	// twice the longest lease TTL the store was granted is used when
	// longer. 0 means DefaultWatchTimeout.
	WatchTimeout time.Duration
	// Redial, when set, cuts the main client's connections so that it dials
	// etcd anew (conntrack.Conns.Close). The store calls it when a
	// registration is known lost, through a watch on a connection of its
	// own, while its lease renewals went unanswered for a whole TTL, and
	// when a controller session ends for such a silence: the lease the
	// silent connection protected is gone, and that connection is
	// presumed dead. Without it a broker whose address changed (a
	// container moved to another IP while running) or whose route to etcd
	// was lost without a reset kept sending its registrations into that
	// connection for TCP's 15 minutes of retransmissions.
	Redial func() int
}

// Store reads and writes tidemark's metadata in etcd. It is safe for
// concurrent use. It does not own the client (only the watch client it
// dials, Options.WatchClient).
type Store struct {
	cli    *clientv3.Client
	k      keys
	maxOps int
	log    *slog.Logger
	now    func() time.Time

	wc              *watchConn
	redial          func() int
	minWatchTimeout time.Duration
	longestTTL      atomic.Int64 // the longest lease TTL granted, as a Duration
}

// minTxnOps leaves room for the fence, one key and its read-back.
const minTxnOps = 8

// New returns a Store over cli.
func New(cli *clientv3.Client, opts Options) (*Store, error) {
	p := strings.TrimRight(opts.Prefix, "/")
	if opts.Prefix == "" {
		p = DefaultPrefix
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("metastore: prefix %q must start with /", opts.Prefix)
	}
	maxOps := opts.MaxTxnOps
	if maxOps == 0 {
		maxOps = DefaultMaxTxnOps
	}
	if maxOps < minTxnOps {
		return nil, fmt.Errorf("metastore: MaxTxnOps %d is below %d", maxOps, minTxnOps)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	wt := opts.WatchTimeout
	if wt < 0 {
		return nil, fmt.Errorf("metastore: negative WatchTimeout %s", wt)
	}
	if wt == 0 {
		wt = DefaultWatchTimeout
	}
	return &Store{cli: cli, k: keys{p: p}, maxOps: maxOps, log: log, now: now,
		wc: &watchConn{main: cli, dial: opts.WatchClient, log: log}, minWatchTimeout: wt, redial: opts.Redial}, nil
}

// Prefix is the root of the store's keys.
func (s *Store) Prefix() string { return s.k.p }

// pbResponseOp is one answer inside a transaction response.
type pbResponseOp = pb.ResponseOp

func (s *Store) stamp() time.Time { return s.now().UTC() }

// scanPage bounds each range read, so a large cluster is read in pieces.
const scanPage = 512

// ReadPrefix reads every key under prefix (one of the Store's *Prefix) at
// one revision, which it returns.
func (s *Store) ReadPrefix(ctx context.Context, prefix string) ([]*mvccpb.KeyValue, int64, error) {
	return s.scan(ctx, prefix, 0)
}

// scan reads every key under prefix at revision rev (0: the latest) in pages
// and returns them with the revision read. All pages come from that one
// revision, so the result is a consistent snapshot. A latest revision
// compacted away between pages is read again from the start (readAgain).
func (s *Store) scan(ctx context.Context, prefix string, rev int64) ([]*mvccpb.KeyValue, int64, error) {
	if rev > 0 {
		return s.scanAt(ctx, prefix, rev)
	}
	var kvs []*mvccpb.KeyValue
	err := s.readAgain(ctx, prefix, func() (err error) {
		kvs, rev, err = s.scanAt(ctx, prefix, 0)
		return err
	})
	return kvs, rev, err
}

// maxReadAttempts bounds the reads of one snapshot that compactions cut short.
const maxReadAttempts = 5

// readAgain runs read, which reads pages at one revision it picks, again
// while that revision is compacted away before its last page: a large
// prefix read page by page takes many round trips, and etcd compacting by
// revision on a busy etcd (--auto-compaction-mode=revision), or an
// operator's compact, could remove the revision in between. Before, the
// read failed: a new controller's load ended its term, and the next one's
// load, as large, could fail again.
func (s *Store) readAgain(ctx context.Context, what string, read func() error) error {
	for attempt := 1; ; attempt++ {
		err := read()
		if attempt == maxReadAttempts || !errors.Is(err, rpctypes.ErrCompacted) || ctx.Err() != nil {
			return err
		}
		s.log.Warn("etcd compacted the revision being read page by page: reading again at the newest",
			slog.String("prefix", what), slog.Int("attempt", attempt))
	}
}

// scanAt is scan at rev, or at the revision of its first page when rev is 0.
func (s *Store) scanAt(ctx context.Context, prefix string, rev int64) ([]*mvccpb.KeyValue, int64, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	var out []*mvccpb.KeyValue
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(scanPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("metastore: read %s: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		out = append(out, resp.Kvs...)
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
