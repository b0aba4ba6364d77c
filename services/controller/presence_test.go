package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
