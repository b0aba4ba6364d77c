package metastore

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/platform/conntrack"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/testenv"
)

// TestRegisteringAgainAfterASilentLossDialsAnew: a broker's connection to
// etcd goes silent for good (its container moved to another address while
// running: packets on the old connection vanish, new connections flow).
// The lease expires; the registration's watch, on a connection of its own,
// sees the key go; registering again must work, on a new main connection,
// instead of waiting on the dead one.
func TestRegisteringAgainAfterASilentLossDialsAnew(t *testing.T) {
	testenv.SkipIfShort(t, "waits out dead etcd connections (up to a minute): the full tier runs it")
	ctx := silenceCtx(t)
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, logs, _ := storeBehind(t, ctx, br, time.Second)

	info := BrokerInfo{ID: 2, Address: "127.0.0.1:1"}
	reg, err := s.RegisterBroker(ctx, info, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the key watch is set up
	br.Blackhole()
	timeout := s.watchTimeout()
	waitClosed(t, reg.Done(), longTTL+timeout+timeout/4+3*time.Second, "Done after the lease expired")

	rctx, cancel := context.WithTimeout(ctx, silenceBound)
	defer cancel()
	again, err := s.RegisterBroker(rctx, info, longTTL, WaitForExpiry())
	if err != nil {
		t.Fatalf("registering again after the silent loss: %v\n%s", err, logs)
	}
	defer again.Close(context.Background())
	if again.Epoch() <= reg.Epoch() {
		t.Errorf("new epoch %d, want more than %d", again.Epoch(), reg.Epoch())
	}
	if !strings.Contains(logs.String(), "dialling etcd anew") {
		t.Errorf("no log of the redial:\n%s", logs)
	}
}

// TestALiveLeaseLostKeepsTheConnection: a registration revoked while its
// renewals are answered (the controller declared the broker dead) leaves
// the main connection alone.
func TestALiveLeaseLostKeepsTheConnection(t *testing.T) {
	ctx := silenceCtx(t)
	srv := etcdtest.Start(t)
	conns := conntrack.NewConns()
	o := etcdconn.Defaults()
	o.Endpoints = []string{srv.Endpoint()}
	o.Dialer = conns.Dialer(nil)
	cli, err := o.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	var redials atomic.Int32
	s, err := New(cli, Options{Redial: func() int { redials.Add(1); return conns.Close() }})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: 3, Address: "127.0.0.1:1"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the key watch is set up
	if _, err := srv.Client(t).Revoke(ctx, reg.Lease()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, reg.Done(), 5*time.Second, "Done after the revoke")
	if n := redials.Load(); n != 0 {
		t.Errorf("the connection was cut %d times for a lease lost while etcd answered", n)
	}
}

// TestCampaigningAgainAfterASilentLossDialsAnew: a controller's connection
// to etcd goes silent for good. Its session ends after a TTL without a
// keepalive answer; campaigning again must win on a new main connection
// once the old key is gone, instead of waiting on the dead one.
func TestCampaigningAgainAfterASilentLossDialsAnew(t *testing.T) {
	testenv.SkipIfShort(t, "waits out dead etcd connections (up to a minute): the full tier runs it")
	ctx := silenceCtx(t)
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, logs, _ := storeBehind(t, ctx, br, time.Second)

	first := elect(t, ctx, s, 1, longTTL)
	br.Blackhole()
	waitClosed(t, first.Done(), 2*longTTL, "the session's end after a silent TTL")

	cctx, cancel := context.WithTimeout(ctx, silenceBound)
	defer cancel()
	again, err := s.Campaign(cctx, 1, "127.0.0.1:9001", longTTL)
	if err != nil {
		t.Fatalf("campaigning again after the silent loss: %v\n%s", err, logs)
	}
	defer again.Resign(context.Background())
	if again.Info().Epoch <= first.Info().Epoch {
		t.Errorf("new controller epoch %d, want more than %d", again.Info().Epoch, first.Info().Epoch)
	}
}

// TestStandbyWinsOverADeadMainConnection: a standby's connections to etcd
// go silent for good while it waits for the controller key. Once the
// active resigns, its watch (moved to a new connection) hears it, and the
// standby must win on a new main connection instead of reading the
// controller key on the dead one.
func TestStandbyWinsOverADeadMainConnection(t *testing.T) {
	testenv.SkipIfShort(t, "waits out dead etcd connections (up to a minute): the full tier runs it")
	ctx := silenceCtx(t)
	srv := etcdtest.Start(t)
	br := srv.NewBridge(t)
	s, _, watches := storeBehind(t, ctx, br, 2*time.Second)
	first := elect(t, ctx, newStore(t, srv.Client(t)), 1, longTTL)

	won := make(chan *Session, 1)
	go func() {
		if sess, err := s.Campaign(ctx, 2, "127.0.0.1:9002", longTTL); err == nil {
			won <- sess
		}
	}()
	// The standby has read the controller key on its main connection
	// once it dials the connection its wait for the key's deletion runs
	// on: only then are its connections cut.
	waitUntil(t, silenceBound, "the standby waiting for the controller key", func() bool { return watches.dials.Load() > 0 })
	br.Blackhole()
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	bound := silenceBound
	select {
	case sess := <-won:
		defer sess.Resign(context.Background())
	case <-time.After(bound):
		t.Fatalf("the standby did not win within %s of the controller resigning", bound)
	}
}

// storeBehind is a store whose main etcd connections pass through br and
// are cut by its Redial, with its watches on connections of their own.
func storeBehind(t *testing.T, ctx context.Context, br *etcdtest.Bridge, watchTimeout time.Duration) (*Store, *logBuffer, *watchDialer) {
	t.Helper()
	conns := conntrack.NewConns()
	o := etcdconn.Defaults()
	o.Endpoints = []string{br.Endpoint()}
	o.Dialer = conns.Dialer(nil)
	cli, err := o.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	d := &watchDialer{endpoint: br.Endpoint()}
	logs := &logBuffer{}
	s, err := New(cli, Options{WatchClient: d.dial, WatchTimeout: watchTimeout, Redial: conns.Close,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, logs, d
}

// silenceBound is how long the tests here wait for the store to get past a
// dead connection: far less than TCP's 15 minutes of retransmissions the
// store waited before, and far more than the few watch timeouts it takes
// on a loaded machine.
const silenceBound = time.Minute

// silenceCtx bounds a test here beyond silenceBound.
func silenceCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), silenceBound+30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
