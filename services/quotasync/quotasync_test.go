package quotasync

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/etcdconn"
)

// logBuffer keeps what is logged.
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

type target struct {
	mu sync.Mutex
	es Entities
}

func (t *target) SetEntities(es Entities) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.es = es
}

// waitFor waits until the target holds exactly want (bounded).
func waitFor(t *testing.T, tg *target, want Entities) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		tg.mu.Lock()
		got := maps.Clone(tg.es)
		tg.mu.Unlock()
		if len(got) == len(want) && (len(want) == 0 || reflect.DeepEqual(got, want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("entities in force %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var (
	alice   = metastore.QuotaEntity{User: "ops/alice"} // a '/' must not make a deeper key
	app     = metastore.QuotaEntity{ClientID: "app"}
	aliceDC = metastore.QuotaEntity{User: "ops/alice", DefaultClientID: true}
	literal = metastore.QuotaEntity{User: metastore.QuotaDefault} // a user named "<default>"
	defUser = metastore.QuotaEntity{DefaultUser: true}
)

// The controller writes entities fenced by its term; a follower loads
// them, then sees every change; a value that does not decode limits
// nobody and does not stop the others; after a watch that failed
// (history compacted while it was cut off) it loads everything again.
func TestFollowerLoadsFollowsAndReloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	store, err := metastore.New(cli, metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := store.Campaign(ctx, 1, "127.0.0.1:9001", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	put := func(qs ...metastore.StoredClientQuota) {
		t.Helper()
		if err := sess.PutClientQuotas(ctx, qs); err != nil {
			t.Fatal(err)
		}
	}
	put(metastore.StoredClientQuota{Entity: alice, Values: metastore.ClientQuotaValues{"producer_byte_rate": 1024}})

	// The follower reads straight from etcd; its watches go through a
	// bridge that can cut them off.
	bridge := srv.NewBridge(t)
	dial := func(ctx context.Context) (*clientv3.Client, error) {
		o := etcdconn.Defaults()
		o.Endpoints = []string{bridge.Endpoint()}
		return o.Client(ctx)
	}
	logs := &logBuffer{}
	followed, err := metastore.New(srv.Client(t), metastore.Options{WatchClient: dial, WatchTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{}
	loaded := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, followed, tg, nil, slog.New(slog.NewTextHandler(logs, nil)), func() { close(loaded) })
	}()
	select {
	case <-loaded:
	case <-ctx.Done():
		t.Fatal("never loaded")
	}
	tg.mu.Lock()
	first := maps.Clone(tg.es)
	tg.mu.Unlock()
	if want := (Entities{alice: {"producer_byte_rate": 1024}}); !reflect.DeepEqual(first, want) {
		t.Fatalf("at the first load: %v, want %v", first, want)
	}

	put(metastore.StoredClientQuota{Entity: app, Values: metastore.ClientQuotaValues{"consumer_byte_rate": 2048}},
		metastore.StoredClientQuota{Entity: aliceDC, Values: metastore.ClientQuotaValues{"producer_byte_rate": 10}},
		metastore.StoredClientQuota{Entity: literal, Values: metastore.ClientQuotaValues{"producer_byte_rate": 7}})
	// Written behind tidemark's back: limits nobody.
	if _, err := cli.Put(ctx, store.ClientQuotasPrefix()+"clients/bad", "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, store.ClientQuotasPrefix()+"nobody/x", "{}"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tg, Entities{alice: {"producer_byte_rate": 1024}, app: {"consumer_byte_rate": 2048},
		aliceDC: {"producer_byte_rate": 10}, literal: {"producer_byte_rate": 7}})
	put(metastore.StoredClientQuota{Entity: alice}) // no values: removed
	waitFor(t, tg, Entities{app: {"consumer_byte_rate": 2048}, aliceDC: {"producer_byte_rate": 10}, literal: {"producer_byte_rate": 7}})

	// Cut off while entities change and the history is compacted: the
	// watch cannot resume where it was, and a full load brings the
	// follower level.
	bridge.Blackhole()
	put(metastore.StoredClientQuota{Entity: app}, metastore.StoredClientQuota{Entity: defUser, Values: metastore.ClientQuotaValues{"producer_byte_rate": 5}})
	resp, err := cli.Put(ctx, "/elsewhere", "x") // compacted past the entities' change
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tg, Entities{aliceDC: {"producer_byte_rate": 10}, literal: {"producer_byte_rate": 7}, defUser: {"producer_byte_rate": 5}})
	if !strings.Contains(logs.String(), "following etcd failed; loading again") {
		t.Fatalf("the entities came back without a reload:\n%s", logs.String())
	}

	// A term that has ended writes nothing.
	if err := sess.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.PutClientQuotas(ctx, []metastore.StoredClientQuota{{Entity: app, Values: metastore.ClientQuotaValues{"producer_byte_rate": 1}}}); !errors.Is(err, metastore.ErrControllerMoved) {
		t.Fatalf("a resigned controller's write: %v, want ErrControllerMoved", err)
	}
	cancel()
	<-done
}
