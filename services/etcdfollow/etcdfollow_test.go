package etcdfollow

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/etcdconn"
)

// target holds the sets a follower handed over.
type target struct {
	mu   sync.Mutex
	last map[string]string
	sets int
}

func (t *target) set(m map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last, t.sets = m, t.sets+1
}

func (t *target) held() (map[string]string, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last, t.sets
}

// waitHeld waits until the target holds exactly want (bounded).
func waitHeld(t *testing.T, tg *target, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, _ := tg.held()
		if got != nil && maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the target holds %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// follower is a Prefix of plain strings under store's ACL prefix: a key
// names its suffix, and the value "bad" does not decode.
func follower(store *metastore.Store, tg *target, m *Metrics) Prefix[string, string] {
	return Prefix[string, string]{
		What:   "test entries",
		Prefix: store.ACLsPrefix(),
		Key: func(key string) (string, bool) {
			name := strings.TrimPrefix(key, store.ACLsPrefix())
			return name, name != "ignored"
		},
		Value:   func(_ string, raw []byte) (string, bool) { return string(raw), string(raw) != "bad" },
		Set:     tg.set,
		State:   "acls",
		Metrics: m,
	}
}

// run starts Run and returns what ends it and waits for it to return.
func run(t *testing.T, store *metastore.Store, p Prefix[string, string], log *slog.Logger, loaded func()) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, store, p, log, loaded) }()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
}

func put(t *testing.T, cli *clientv3.Client, store *metastore.Store, name, value string) {
	t.Helper()
	if _, err := cli.Put(t.Context(), store.ACLsPrefix()+name, value); err != nil {
		t.Fatal(err)
	}
}

func del(t *testing.T, cli *clientv3.Client, store *metastore.Store, name string) {
	t.Helper()
	if _, err := cli.Delete(t.Context(), store.ACLsPrefix()+name); err != nil {
		t.Fatal(err)
	}
}

// The first load is handed over, then reported; each put and delete hands
// over the new whole set, and the metrics say how much is held and when
// it was last applied.
func TestHandsOverTheWholeSetAfterTheLoadAndEachChange(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	store, err := metastore.New(cli, metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, cli, store, "a", "1")
	put(t, cli, store, "b", "2")
	put(t, cli, store, "c", "bad")
	put(t, cli, store, "ignored", "x")
	if _, err := cli.Put(t.Context(), "/not-followed/a", "9"); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	tg := &target{}
	loaded := make(chan map[string]string, 2)
	before := time.Now().Unix()
	stop := run(t, store, follower(store, tg, m), slog.Default(), func() {
		got, _ := tg.held()
		loaded <- got
	})
	var first map[string]string
	select {
	case first = <-loaded:
	case <-time.After(15 * time.Second):
		t.Fatal("the first load was never reported")
	}
	if want := map[string]string{"a": "1", "b": "2"}; !maps.Equal(first, want) {
		t.Fatalf("at the load's report the target holds %v, want %v", first, want)
	}
	if v := testutil.ToFloat64(m.entries.WithLabelValues("acls")); v != 2 {
		t.Fatalf("entries %v after loading 2", v)
	}
	if v := testutil.ToFloat64(m.lastApplied.WithLabelValues("acls")); v < float64(before) {
		t.Fatalf("last applied %v, before the load began (%d)", v, before)
	}

	put(t, cli, store, "c", "3")
	waitHeld(t, tg, map[string]string{"a": "1", "b": "2", "c": "3"})
	del(t, cli, store, "a")
	waitHeld(t, tg, map[string]string{"b": "2", "c": "3"})
	// A value that no longer decodes takes its key's entry away.
	put(t, cli, store, "b", "bad")
	waitHeld(t, tg, map[string]string{"c": "3"})
	if v := testutil.ToFloat64(m.entries.WithLabelValues("acls")); v != 1 {
		t.Fatalf("entries %v holding 1", v)
	}
	if v := testutil.ToFloat64(m.reloads.WithLabelValues("acls")); v != 0 {
		t.Fatalf("%v reloads with nothing failed", v)
	}
	if n := len(loaded); n != 0 {
		t.Fatalf("the first load reported %d more times", n)
	}
	// Each set handed over is the target's own: later changes leave it be.
	if want := map[string]string{"a": "1", "b": "2"}; !maps.Equal(first, want) {
		t.Fatalf("the first set handed over became %v", first)
	}
	stop()
}

// A watch cut off while the prefix changes and its history is compacted
// cannot resume: the follower loads again, sees what changed meanwhile,
// counts the reload, reports no second first load, and follows on.
func TestReloadsAfterACompactedWatch(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	bridge := srv.NewBridge(t)
	dial := func(ctx context.Context) (*clientv3.Client, error) {
		o := etcdconn.Defaults()
		o.Endpoints = []string{bridge.Endpoint()}
		return o.Client(ctx)
	}
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	store, err := metastore.New(cli, metastore.Options{WatchClient: dial, WatchTimeout: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	put(t, cli, store, "a", "1")
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	tg := &target{}
	var loads atomic.Int32
	stop := run(t, store, follower(store, tg, m), log, func() { loads.Add(1) })
	waitHeld(t, tg, map[string]string{"a": "1"})
	put(t, cli, store, "b", "2")
	waitHeld(t, tg, map[string]string{"a": "1", "b": "2"})

	bridge.Blackhole()
	del(t, cli, store, "a")
	put(t, cli, store, "c", "3")
	put(t, cli, store, "d", "4")
	resp, err := cli.Put(t.Context(), "/elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(t.Context(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, tg, map[string]string{"b": "2", "c": "3", "d": "4"})
	if v := testutil.ToFloat64(m.reloads.WithLabelValues("acls")); v < 1 {
		t.Fatalf("reloads %v after a compacted watch:\n%s", v, logs.String())
	}
	if v := testutil.ToFloat64(m.entries.WithLabelValues("acls")); v != 3 {
		t.Fatalf("entries %v holding 3", v)
	}
	if !strings.Contains(logs.String(), "following etcd failed; loading again") {
		t.Fatalf("the reload is not logged:\n%s", logs.String())
	}
	// Followed on from the reload's revision.
	put(t, cli, store, "e", "5")
	waitHeld(t, tg, map[string]string{"b": "2", "c": "3", "d": "4", "e": "5"})
	if n := loads.Load(); n != 1 {
		t.Fatalf("the first load reported %d times", n)
	}
	stop()
}

// A follower that may not read its prefix (an etcd user without the role)
// keeps trying: its reloads count up while its last-applied time stays
// unset, and its context still ends it.
func TestAFollowerThatCannotLoadShowsItAndStops(t *testing.T) {
	srv := etcdtest.Start(t)
	root := srv.Client(t)
	ctx := t.Context()
	for _, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "root-secret"); return err },
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "unprivileged", "secret"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second,
		Username: "unprivileged", Password: "secret", Logger: zap.NewNop(), DialOptions: etcdconn.DialOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	store, err := metastore.New(cli, metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	tg := &target{}
	stop := run(t, store, follower(store, tg, m), slog.Default(), func() { t.Error("a load reported without read permission") })
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(m.reloads.WithLabelValues("acls")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no reloads counted without read permission")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := testutil.ToFloat64(m.lastApplied.WithLabelValues("acls")); v != 0 {
		t.Fatalf("last applied %v with nothing ever loaded", v)
	}
	if _, sets := tg.held(); sets != 0 {
		t.Fatalf("%d sets handed over with nothing loaded", sets)
	}
	stop()
}

// logBuffer is a log destination safe for concurrent writers.
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

// A follower whose etcd is away does not wait on its load for ever: each
// load fails at its bound, is logged and counted, and the follower tries
// again, so an operator sees it is not current.
func TestAFollowerWhoseEtcdIsAwayCountsItsFailedLoads(t *testing.T) {
	defer func(was time.Duration) { loadTimeout = was }(loadTimeout)
	loadTimeout = 300 * time.Millisecond
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	store, err := metastore.New(cli, metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	m := NewMetrics(prometheus.NewRegistry())
	tg := &target{}
	logs := &logBuffer{}
	stop := run(t, store, follower(store, tg, m), slog.New(slog.NewTextHandler(logs, nil)),
		func() { t.Error("a load reported with etcd away") })
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(m.reloads.WithLabelValues("acls")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no reloads counted with etcd away:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "following etcd failed") {
		t.Fatalf("the failed loads are not logged:\n%s", logs.String())
	}
	if _, sets := tg.held(); sets != 0 {
		t.Fatalf("%d sets handed over with nothing loaded", sets)
	}
	stop()
}
