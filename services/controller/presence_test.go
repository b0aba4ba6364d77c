package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
)

// A controller whose presence key is deleted (etcdctl del) registers again
// with a new lease, and the old lease, which holds nothing any more, stops
// being renewed: every deletion used to leave one lease renewed for the
// life of the process.
func TestReRegisteredControllerLeavesNoLeaseRenewed(t *testing.T) {
	srv := etcdtest.Start(t)
	direct := srv.Client(t)
	store, err := metastore.New(srv.Client(t), metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		keepRegistered(runCtx, store, metastore.ControllerNode{ID: 7, Address: "127.0.0.1:9707"}, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { stop(); <-done }()

	key := store.Prefix() + "/controllers/7"
	first := presenceLease(t, direct, key, 0)
	if _, err := direct.Delete(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	presenceLease(t, direct, key, first)

	// A second's TTL, and 5 s for etcd to expire it.
	deadline := time.Now().Add(time.Second + 5*time.Second)
	c := ctx(t)
	for {
		resp, err := direct.TimeToLive(c, first)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL == -1) {
			return
		}
		if err != nil {
			t.Fatalf("lease %x: %v", first, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted registration's lease %x is still renewed (%d s to live)", first, resp.TTL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// presenceLease waits up to 5 s for key to be held by a lease other than
// not, and returns it.
func presenceLease(t *testing.T, cli *clientv3.Client, key string, not clientv3.LeaseID) clientv3.LeaseID {
	t.Helper()
	var lease clientv3.LeaseID
	c := ctx(t)
	eventually(t, 5*time.Second, "controller registration under "+key, func() bool {
		resp, err := cli.Get(c, key)
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		lease = clientv3.LeaseID(resp.Kvs[0].Lease)
		return lease != 0 && lease != not
	})
	return lease
}

// Two processes registered under one controller id (a replacement started
// while the old process was frozen, which then resumed) take the presence
// key from each other, but each loss pauses the next attempt, doubling up
// to the TTL, and is warned about. They used to take it back as fast as
// etcd answered: some 40 writes in 2 s, for as long as both ran.
func TestTwoControllersWithOneIDDoNotFightOverItsKey(t *testing.T) {
	srv := etcdtest.Start(t)
	direct := srv.Client(t)
	logs := &logBuffer{}
	runCtx, stop := context.WithCancel(context.Background())
	var done []chan struct{}
	for i := range 2 {
		store, err := metastore.New(srv.Client(t), metastore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := make(chan struct{})
		done = append(done, d)
		log := slog.New(slog.NewTextHandler(logs, nil)).With("process", i)
		go func() {
			defer close(d)
			keepRegistered(runCtx, store, metastore.ControllerNode{ID: 7, Address: "127.0.0.1:970" + string(rune('0'+i))}, time.Second, log)
		}()
	}
	defer func() {
		stop()
		for _, d := range done {
			<-d
		}
	}()

	key := metastoreKey(t, direct, "/controllers/7")
	first := putsOf(t, direct, key)
	time.Sleep(3 * time.Second)
	// Paused 0.1, 0.2, 0.4, 0.8 and then 1 s (each ±20 %) after each loss,
	// two processes write the key at most about 12 times in 3 s.
	if n := putsOf(t, direct, key) - first; n > 16 {
		t.Fatalf("the key was written %d times in 3 s: the two processes still fight over it", n)
	}
	if !strings.Contains(logs.String(), "another process running with this controller id") {
		t.Fatalf("no warning about the contested id:\n%s", logs.String())
	}
}

// metastoreKey is the key under the test store's prefix that ends in
// suffix, once it exists.
func metastoreKey(t *testing.T, cli *clientv3.Client, suffix string) string {
	t.Helper()
	var key string
	eventually(t, 5*time.Second, "a key ending in "+suffix, func() bool {
		resp, err := cli.Get(ctx(t), "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
		if err != nil {
			return false
		}
		for _, kv := range resp.Kvs {
			if strings.HasSuffix(string(kv.Key), suffix) {
				key = string(kv.Key)
				return true
			}
		}
		return false
	})
	return key
}

// putsOf is how many times key was written since it was created (its
// version: a put over it by another lease counts, the key stays).
func putsOf(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := cli.Get(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].Version
}
