package metastore

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/platform/etcdconn"
)

// watchDialer dials a store's watch clients through a bridge, counting them.
type watchDialer struct {
	endpoint string
	dials    atomic.Int32
}

func (d *watchDialer) dial(ctx context.Context) (*clientv3.Client, error) {
	d.dials.Add(1)
	o := etcdconn.Defaults()
	o.Endpoints = []string{d.endpoint}
	return o.Client(ctx)
}

// logBuffer keeps what a store logs.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const cutOffLog = "presumed cut off"

// bridgedWatchStore returns a store whose reads, writes and lease renewals
// go straight to srv while its watches go through br.
func bridgedWatchStore(t *testing.T, srv *etcdtest.Server, br *etcdtest.Bridge, watchTimeout time.Duration) (*Store, *watchDialer, *logBuffer) {
	t.Helper()
	d := &watchDialer{endpoint: br.Endpoint()}
	logs := &logBuffer{}
	s, err := New(srv.Client(t), Options{WatchClient: d.dial, WatchTimeout: watchTimeout,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, d, logs
}

// putRev writes key and returns the revision of the write.
func putRev(t *testing.T, ctx context.Context, cli *clientv3.Client, key, val string) int64 {
	t.Helper()
	resp, err := cli.Put(ctx, key, val)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// receiveRevs reads events from ch until it has len(want) of them, and
// fails unless they are want's revisions, in order, each once.
func receiveRevs(t *testing.T, ch <-chan WatchResponse, want []int64, within time.Duration) {
	t.Helper()
	var got []int64
	deadline := time.After(within)
	for len(got) < len(want) {
		select {
		case wr, ok := <-ch:
			if !ok || wr.Err != nil {
				t.Fatalf("watch ended (err %v) after revisions %v, want %v", wr.Err, got, want)
			}
			for _, ev := range wr.Events {
				got = append(got, ev.Revision)
			}
		case <-deadline:
			t.Fatalf("within %s got revisions %v, want %v", within, got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got revisions %v, want %v (each once, in order)", got, want)
	}
}

// TestBlackholedWatchIsWatchedAgainOnANewConnection: a watch whose
// connection drops every packet without a reset hears nothing (TCP notices
// after about 15 minutes) while the lease, renewed on another connection,
// lives on: the controller missed registrations, elections and leader
// changes meanwhile. After the watch timeout the watch is watched again on
// a new connection, from where it stopped: every change made meanwhile
// arrives once, in order.
func TestBlackholedWatchIsWatchedAgainOnANewConnection(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, dialer, logs := bridgedWatchStore(t, srv, br, time.Second)
	direct := srv.Client(t)

	// A lease renewed on the direct connection; the watch timeout is then
	// twice its TTL.
	reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "127.0.0.1:1"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	timeout := s.watchTimeout()
	if timeout != 2*longTTL {
		t.Fatalf("watch timeout %s, want twice the lease TTL %s", timeout, 2*longTTL)
	}

	ch := s.Watch(ctx, reg.Epoch()+1)
	receiveRevs(t, ch, []int64{putRev(t, ctx, direct, "/tidemark/config/topics/a", `{"retention.ms":"1"}`)}, 5*time.Second)

	br.Blackhole()
	cut := time.Now()
	var want []int64
	want = append(want, putRev(t, ctx, direct, "/tidemark/config/topics/b", `{"retention.ms":"2"}`))
	del, err := direct.Delete(ctx, "/tidemark/config/topics/a")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, del.Header.Revision)
	want = append(want, putRev(t, ctx, direct, "/tidemark/config/topics/b", `{"retention.ms":"3"}`))
	receiveRevs(t, ch, want, timeout+timeout/4+3*time.Second)
	if took := time.Since(cut); took < timeout/2 {
		t.Fatalf("the changes arrived %s after the cut, before the watch could have been given up", took)
	}
	// Nothing is repeated after the changes made during the cut.
	receiveRevs(t, ch, []int64{putRev(t, ctx, direct, "/tidemark/config/topics/c", `{"retention.ms":"4"}`)}, 5*time.Second)

	// One more client after the cut; a starved machine (the race detector
	// on 2 cores) may make the new watch's progress late once more, so a
	// third is not a failure. TestWatchRidesOutSilenceShorterThanItsTimeout
	// check that a healthy watch is not moved.
	if n := dialer.dials.Load(); n < 2 {
		t.Fatalf("%d watch clients dialled, want a new one after the cut", n)
	}
	if !strings.Contains(logs.String(), cutOffLog) || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no warning about the silent watch in the log:\n%s", logs)
	}
	select {
	case <-reg.Done():
		t.Fatalf("the registration was lost (%s): the lease's connection must be left alone", reg.LostReason())
	default:
	}
}

// TestRegistrationNoticesKeyDeletedOverABlackholedWatch: the registration
// watches its own key so that a deletion is noticed although the lease
// still lives; over a blackholed watch connection it is noticed after the
// watch timeout rather than never.
func TestRegistrationNoticesKeyDeletedOverABlackholedWatch(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, _, _ := bridgedWatchStore(t, srv, br, time.Second)
	direct := srv.Client(t)

	reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: 2, Address: "127.0.0.1:1"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	time.Sleep(500 * time.Millisecond) // the key watch is set up
	br.Blackhole()
	if _, err := direct.Delete(ctx, "/tidemark/brokers/ids/2"); err != nil {
		t.Fatal(err)
	}
	timeout := s.watchTimeout()
	waitClosed(t, reg.Done(), timeout+timeout/4+3*time.Second, "Done after the registration key was deleted")
}

// TestStandbyNoticesControllerGoneOverABlackholedWatch: a candidate waits
// for the controller key to go; over a blackholed watch connection it
// campaigns after the watch timeout rather than never.
func TestStandbyNoticesControllerGoneOverABlackholedWatch(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, _, _ := bridgedWatchStore(t, srv, br, 2*time.Second)
	first := elect(t, ctx, newStore(t, srv.Client(t)), 1, longTTL)

	won := make(chan *Session, 1)
	go func() {
		sess, err := s.Campaign(ctx, 2, "127.0.0.1:9002", longTTL)
		if err == nil {
			won <- sess
		}
	}()
	time.Sleep(500 * time.Millisecond) // the candidate watches the controller key
	br.Blackhole()
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	timeout := s.watchTimeout()
	select {
	case sess := <-won:
		defer sess.Resign(context.Background())
	case <-time.After(timeout + timeout/4 + 3*time.Second):
		t.Fatalf("the standby did not win within %s of the controller resigning", timeout+timeout/4+3*time.Second)
	}
}

// TestWatchRidesOutSilenceShorterThanItsTimeout: a healthy watch is never
// given up. Not in a quiet cluster (no write at all for longer than the
// timeout: etcd answers a progress request only once its revision reached
// the watch's start, and a watch from a read starts one past it), not after
// its connection was reset, and not over a stall shorter than the timeout,
// whose changes arrive once it ends.
func TestWatchRidesOutSilenceShorterThanItsTimeout(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, dialer, logs := bridgedWatchStore(t, srv, br, 2*time.Second)
	direct := srv.Client(t)
	timeout := s.watchTimeout()

	resp, err := direct.Get(ctx, "/tidemark/controller")
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, resp.Header.Revision+1)
	time.Sleep(timeout + timeout/2) // quiet
	br.DropConnections()
	time.Sleep(timeout + timeout/2) // quiet after a reconnect

	br.Pause()
	var want []int64
	for i := range 3 {
		want = append(want, putRev(t, ctx, direct, "/tidemark/config/brokers/1", `{"n":"`+string(rune('0'+i))+`"}`))
	}
	time.Sleep(timeout / 2)
	br.Resume()
	receiveRevs(t, ch, want, 5*time.Second)
	receiveRevs(t, ch, []int64{putRev(t, ctx, direct, "/tidemark/config/brokers/2", `{"n":"x"}`)}, 5*time.Second)

	if n := dialer.dials.Load(); n != 1 {
		t.Fatalf("%d watch clients dialled, want 1: the watch was given up", n)
	}
	if strings.Contains(logs.String(), cutOffLog) {
		t.Fatalf("a healthy watch was given up:\n%s", logs)
	}
}

// TestWatchFromTheCompactionRevision: a watch starts one revision early
// (for progress answers) and skips it, but a watch from exactly the
// compaction revision, whose revision before is gone, still works; one
// from before it still fails with ErrCompacted.
func TestWatchFromTheCompactionRevision(t *testing.T) {
	ctx := testCtx(t)
	srv, s := startStore(t)
	direct := srv.Client(t)
	var revs []int64
	for i := range 3 {
		revs = append(revs, putRev(t, ctx, direct, "/tidemark/config/brokers/1", `{"n":"`+string(rune('0'+i))+`"}`))
	}
	if _, err := direct.Compact(ctx, revs[1]); err != nil {
		t.Fatal(err)
	}
	receiveRevs(t, s.Watch(ctx, revs[1]), revs[1:], 5*time.Second)

	select {
	case wr := <-s.Watch(ctx, revs[0]):
		if !errors.Is(wr.Err, ErrCompacted) {
			t.Fatalf("watch from a compacted revision: %+v, want ErrCompacted", wr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch from a compacted revision did not fail")
	}
}
