package metastore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultWatchTimeout is the least silence after which a watch is presumed
// cut off (Options.WatchTimeout). With the default lease TTLs (a broker's
// 6 s broker.session.timeout.ms, a controller's 3 s controller.session.ttl.ms)
// it is the timeout used: a change is seen within about 25 s of a silent cut
// instead of the kernel's 15 minutes of retransmissions.
const DefaultWatchTimeout = 20 * time.Second

// watchTimeout is how long a watch may hear nothing from etcd (no event, no
// progress notification, though it asks for one every quarter of this)
// before it is presumed cut off: twice the longest lease TTL the store was
// granted, and at least the configured floor. Its leases could not have
// outlived such a silence had they shared the watch's fate, so a cut they
// are meant to ride out (shorter than a TTL) never moves a watch.
func (s *Store) watchTimeout() time.Duration {
	return max(2*time.Duration(s.longestTTL.Load()), s.minWatchTimeout)
}

// noteTTL records the TTL of a lease etcd granted.
func (s *Store) noteTTL(ttlSeconds int64) {
	raise(&s.longestTTL, int64(time.Duration(ttlSeconds)*time.Second))
}

// watchConn hands watches the etcd client they run on. With a dialer it is
// a client of their own, so that a watch found cut off moves to a new TCP
// connection (that client is closed and another dialled) without touching
// the connection the leases are renewed on. gRPC keepalive on the shared
// connection would notice a cut sooner, but it tore that connection down in
// cuts shorter than a lease's TTL, and the redial, with DNS failing too,
// came after the lease had expired.
type watchConn struct {
	main *clientv3.Client
	dial func(context.Context) (*clientv3.Client, error)
	log  *slog.Logger

	mu  sync.Mutex
	cur *clientv3.Client // nil: not dialled yet, or dropped
	gen uint64           // counts drops
}

// get returns the client to watch on and its generation: the watches' own,
// dialled on first use, or the main client without a dialer or when
// dialling fails.
func (c *watchConn) get(ctx context.Context) (*clientv3.Client, uint64) {
	for {
		c.mu.Lock()
		cur, gen := c.cur, c.gen
		c.mu.Unlock()
		if cur != nil {
			return cur, gen
		}
		if c.dial == nil || c.main.Ctx().Err() != nil {
			return c.main, gen
		}
		// Not under mu: dialling may wait for etcd (password auth).
		cli, err := c.dial(ctx)
		if err != nil {
			c.log.Debug("dial the watch client; watching on the shared one", slog.Any("err", err))
			return c.main, gen
		}
		c.mu.Lock()
		if c.cur == nil && c.gen == gen {
			c.cur = cli
			c.mu.Unlock()
			go func() {
				select {
				case <-c.main.Ctx().Done():
					_ = cli.Close()
				case <-cli.Ctx().Done():
				}
			}()
			return cli, gen
		}
		c.mu.Unlock()
		_ = cli.Close() // another watch dialled, or dropped, meanwhile
	}
}

// drop abandons the client of generation gen if it is still the current
// one: it is closed, so every watch on its connection resumes on the next,
// dialled anew.
func (c *watchConn) drop(gen uint64) {
	c.mu.Lock()
	if gen != c.gen {
		c.mu.Unlock()
		return
	}
	old := c.cur
	c.cur = nil
	c.gen++
	c.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}

// dropped reports whether the client of generation gen was dropped.
func (c *watchConn) dropped(gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen != gen
}

// watchRange is what a watch covers: key, or [key, end) when end is set.
type watchRange struct {
	key, end string
	prevKV   bool
}

// watchBatch is what a watch hands on: the new events of one response (rev
// is its header's revision), or the error that ends the watch.
type watchBatch struct {
	rev    int64
	events []*mvccpb.Event
	err    error
}

// liveWatch reports every change in r from revision from (> 0) on, each
// once and in order, until ctx ends or the main client closes (the channel
// then closes) or etcd fails the watch: compacted history, no raft leader
// (with clientv3.WithRequireLeader on ctx), a refusal; the last batch then
// carries the error.
//
// It runs on a gRPC watch stream of its own and keeps it honest: when it
// has heard nothing for a quarter of the watch timeout it asks etcd for a
// progress notification, and when it has heard nothing at all for the whole
// timeout, a connection dropping packets without a reset (which TCP alone
// notices only after about 15 minutes of retransmissions), it logs a
// warning, drops the watch client and watches again on a new connection
// from the first revision not yet handed on. A broken stream (an etcd
// restart, a reset link) is opened again the same way.
func (s *Store) liveWatch(ctx context.Context, r watchRange, from int64) <-chan watchBatch {
	out := make(chan watchBatch, 16)
	go func() {
		defer close(out)
		w := &liveWatcher{s: s, r: r, out: out, next: from}
		w.run(ctx)
	}()
	return out
}

type liveWatcher struct {
	s   *Store
	r   watchRange
	out chan<- watchBatch
	// next is the first revision not handed on yet.
	next int64
	// exact starts the next stream at next itself, not one revision early.
	exact bool
}

// silenceError ends a stream that heard nothing for the watch timeout.
type silenceError struct{ silent time.Duration }

func (e silenceError) Error() string { return fmt.Sprintf("nothing heard for %s", e.silent) }

// ErrRevisionWentBack ends a watch whose etcd answers from a revision
// below one the watch had already seen: etcd was restored from an older
// snapshot. Resumed as it was, the watch would wait in silence for etcd's
// revision to climb back, missing every change made meanwhile; its owner
// must read etcd again, as after a compaction.
var ErrRevisionWentBack = errors.New("metastore: etcd's revision went back below one this watch had seen (etcd restored from an older snapshot?): read it again")

// errStartAtNext restarts a stream at next: the revision before it is compacted.
var errStartAtNext = errors.New("metastore: watch again from the first revision not handed on")

func (w *liveWatcher) run(ctx context.Context) {
	for {
		cli, gen := w.s.wc.get(ctx)
		err := w.stream(ctx, cli)
		if ctx.Err() != nil || w.s.cli.Ctx().Err() != nil {
			return
		}
		if w.s.wc.dropped(gen) {
			continue // another watch found the connection cut off: follow it to the new one
		}
		var silent silenceError
		switch {
		case errors.As(err, &silent):
			on := "a new stream"
			if w.s.wc.dial != nil {
				on = "a new connection"
			}
			w.s.log.Warn("etcd watch heard nothing, not even an answer to a progress request: presumed cut off, watching again on "+on,
				slog.String("key", w.r.key), slog.Duration("silent", silent.silent), slog.Int64("from_revision", w.next))
			w.s.wc.drop(gen)
			continue
		case errors.Is(err, errStartAtNext):
			continue
		case !retryable(err):
			select {
			case w.out <- watchBatch{err: rpctypes.Error(err)}:
			case <-ctx.Done():
			}
			return
		}
		// The stream broke (etcd restarted, the link was reset): the client
		// reconnects, and WaitForReady holds the next stream until it has.
		select {
		case <-ctx.Done():
			return
		case <-time.After(watchRetryPause):
		}
	}
}

// retryable reports whether a stream that failed with err may be opened
// again (etcd's client treats the same errors so): the server or the link
// went away, but not the raft leader of a watch that requires one.
func retryable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	if errors.Is(rpctypes.Error(err), rpctypes.ErrNoLeader) {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal:
		return true
	}
	return false
}

// streamMsg is one answer read from a stream, with the stream.
type streamMsg struct {
	stream pb.Watch_WatchClient
	resp   *pb.WatchResponse
	err    error
}

// stream watches from w.next on one new stream of cli until the stream
// fails, is silent for the watch timeout, or ctx ends.
//
// The stream starts one revision early, at a revision etcd has reached,
// and what was already handed on is skipped: etcd answers a progress
// request only once the store's revision has reached the watch's start, so
// a watch started at the next revision, as a watch from a read usually is,
// would go unanswered in a quiet cluster and look cut off.
func (w *liveWatcher) stream(ctx context.Context, cli *clientv3.Client) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := w.next
	if !w.exact && start > 1 {
		start--
	}
	w.exact = false
	msgs := make(chan streamMsg)
	go func() {
		send := func(m streamMsg) bool {
			select {
			case msgs <- m:
				return m.err == nil
			case <-sctx.Done():
				return false
			}
		}
		stream, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(sctx,
			grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(math.MaxInt32))
		if err == nil {
			err = stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
				Key: []byte(w.r.key), RangeEnd: []byte(w.r.end), StartRevision: start,
				ProgressNotify: true, PrevKv: w.r.prevKV,
			}}})
		}
		if err != nil {
			send(streamMsg{err: err})
			return
		}
		for {
			resp, err := stream.Recv()
			if !send(streamMsg{stream: stream, resp: resp, err: err}) {
				return
			}
		}
	}()

	var (
		stream  pb.Watch_WatchClient
		created bool
		heard   = time.Now()
	)
	period := w.s.watchTimeout() / 4
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			silent := time.Since(heard)
			if silent >= w.s.watchTimeout() {
				return silenceError{silent}
			}
			// Only once created: etcd could send the progress before the
			// events it holds back until it has announced the watch.
			if created && silent >= period/2 {
				// A few bytes, at most four times before the stream is
				// given up: this cannot wait on flow control.
				_ = stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{
					ProgressRequest: &pb.WatchProgressRequest{}}})
			}
		case m := <-msgs:
			if m.err != nil {
				return m.err
			}
			stream, heard = m.stream, time.Now()
			resp := m.resp
			// Every stream starts at a revision etcd had reached (or one
			// past), so a header below it means etcd went back, or that
			// the member serving the stream lags behind the one that
			// answered before; a linearizable read tells which.
			if rev := resp.GetHeader().GetRevision(); rev > 0 && rev < w.next-1 && w.wentBack(ctx, cli) {
				w.s.log.Error("etcd's revision went back below one a watch had seen (etcd restored from an older snapshot?): the watch fails and its owner reads etcd again",
					slog.String("key", w.r.key), slog.Int64("etcd_revision", rev), slog.Int64("seen_revision", w.next-1))
				return ErrRevisionWentBack
			}
			switch {
			case resp.Canceled:
				return w.canceled(resp, start)
			case resp.Created:
				created = true
			case len(resp.Events) == 0:
				// Progress: every change up to the revision was sent.
				if created {
					w.next = max(w.next, resp.GetHeader().GetRevision()+1)
				}
			default:
				evs := resp.Events
				for len(evs) > 0 && evs[0].Kv.ModRevision < w.next {
					evs = evs[1:] // handed on before (the early start)
				}
				if len(evs) == 0 {
					continue
				}
				select {
				case w.out <- watchBatch{rev: resp.GetHeader().GetRevision(), events: evs}:
				case <-ctx.Done():
					return ctx.Err()
				}
				w.next = evs[len(evs)-1].Kv.ModRevision + 1
				heard = time.Now() // waiting for the reader is not etcd's silence
			}
		}
	}
}

// wentBack reports whether etcd's revision, read linearizably, is below
// one the watch has seen; a failed read says no (the stream goes on).
func (w *liveWatcher) wentBack(ctx context.Context, cli *clientv3.Client) bool {
	rctx, cancel := context.WithTimeout(ctx, w.s.watchTimeout()/4)
	defer cancel()
	resp, err := cli.Get(rctx, w.r.key, clientv3.WithCountOnly())
	return err == nil && resp.Header.Revision < w.next-1
}

// canceled turns etcd's cancellation of the watch into its error.
func (w *liveWatcher) canceled(resp *pb.WatchResponse, start int64) error {
	if resp.CompactRevision != 0 {
		if start < w.next && resp.CompactRevision <= w.next {
			w.exact = true
			return errStartAtNext
		}
		return rpctypes.ErrCompacted
	}
	if resp.CancelReason != "" {
		return rpctypes.Error(status.Error(codes.FailedPrecondition, resp.CancelReason))
	}
	return errors.New("etcd canceled the watch")
}
