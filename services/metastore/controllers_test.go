package metastore

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestControllerNodesRegisterListWatchAndExpire(t *testing.T) {
	srv, s := startStore(t)
	ctx := testCtx(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := s.WatchControllers(wctx, 0)

	r1, err := s.RegisterController(ctx, ControllerNode{ID: 1, Address: "c1"}, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close(context.Background())
	// A second process with its own client, so closing that client stops
	// its keepalives without revoking (a crash).
	crashCli := srv.Client(t)
	r2, err := newStore(t, crashCli).RegisterController(ctx, ControllerNode{ID: 2, Address: "c2"}, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := s.Controllers(ctx)
	if err != nil || len(nodes) != 2 || nodes[0].ID != 1 || nodes[1].Address != "c2" || nodes[0].StartedAt.IsZero() {
		t.Fatalf("controllers = %+v, %v", nodes, err)
	}
	// Two writes may come in one response (a watch catching up does that).
	for seen := 0; seen < 2; {
		select {
		case wr := <-watch:
			if len(wr.Events) == 0 || len(wr.Events) > 2-seen {
				t.Fatalf("watch = %+v", wr)
			}
			for _, ev := range wr.Events {
				if ev.Kind != KindControllerNode || ev.ControllerNode == nil {
					t.Fatalf("watch = %+v", wr)
				}
			}
			seen += len(wr.Events)
		case <-time.After(5 * time.Second):
			t.Fatal("no watch event for a registration")
		}
	}

	// A restarted controller 1 replaces its key; the old registration sees
	// it lost the key.
	r1b, err := s.RegisterController(ctx, ControllerNode{ID: 1, Address: "c1b"}, shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer r1b.Close(context.Background())
	waitClosed(t, r1.Done(), 3*time.Second, "old registration noticing the replacement")

	_ = crashCli.Close()
	waitClosed(t, r2.Done(), 3*time.Second, "crashed registration's keepalive ending")
	deadline := time.Now().Add(5 * time.Second)
	for {
		nodes, err = s.Controllers(ctx)
		if err == nil && len(nodes) == 1 && nodes[0].Address == "c1b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("controllers after expiry = %+v, %v", nodes, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl, err := s.LoadCluster(ctx)
	if err != nil || len(cl.Controllers) != 1 || cl.Controllers[1].Address != "c1b" {
		t.Fatalf("loaded controllers = %+v, %v", cl.Controllers, err)
	}
	if err := r1b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if nodes, _ := s.Controllers(ctx); len(nodes) != 0 {
		t.Fatalf("controllers after close = %+v", nodes)
	}
}

func TestEnsureClusterIDIsStable(t *testing.T) {
	srv, s := startStore(t)
	ctx := testCtx(t)
	id, err := s.EnsureClusterID(ctx)
	if err != nil || id == "" {
		t.Fatalf("cluster id = %q, %v", id, err)
	}
	again, err := newStore(t, srv.Client(t)).EnsureClusterID(ctx)
	if err != nil || again != id {
		t.Fatalf("second cluster id = %q, %v; want %q", again, err, id)
	}
	cl, err := s.LoadCluster(ctx)
	if err != nil || cl.ClusterID != id {
		t.Fatalf("loaded cluster id = %q, %v", cl.ClusterID, err)
	}
	snap, err := s.Dump(ctx)
	if err != nil || len(snap.Entries) != 1 || snap.Entries[0].Kind != KindClusterID {
		t.Fatalf("dump = %+v, %v", snap, err)
	}
}

// A controller registration whose key went away (deleted by hand, or taken
// by another process with the same id) holds nothing, so its lease must not
// outlive it: the controller registers again with a new lease, and a lease
// renewed on and on would pile up one per lost registration.
func TestLostControllerRegistrationStopsRenewingItsLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, ctx context.Context, s *Store, direct *clientv3.Client)
	}{
		{"key deleted", func(t *testing.T, ctx context.Context, s *Store, direct *clientv3.Client) {
			if _, err := direct.Delete(ctx, s.k.controllerNode(1)); err != nil {
				t.Fatal(err)
			}
		}},
		{"key replaced", func(t *testing.T, ctx context.Context, _ *Store, direct *clientv3.Client) {
			other, err := newStore(t, direct).RegisterController(ctx, ControllerNode{ID: 1, Address: "c1-other"}, shortTTL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Close(context.Background()) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, s := startStore(t)
			ctx := testCtx(t)
			direct := srv.Client(t)
			first, err := s.RegisterController(ctx, ControllerNode{ID: 1, Address: "c1"}, shortTTL)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close(context.Background())
			tc.lose(t, ctx, s, direct)
			waitClosed(t, first.Done(), 3*time.Second, "registration noticing its key went")
			again, err := s.RegisterController(ctx, ControllerNode{ID: 1, Address: "c1"}, shortTTL)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close(context.Background())
			waitLeaseGone(t, direct, first.lease, shortTTL+5*time.Second)
		})
	}
}

// waitLeaseGone fails the test unless etcd no longer knows lease (revoked,
// or expired unrenewed) within d.
func waitLeaseGone(t *testing.T, cli *clientv3.Client, lease clientv3.LeaseID, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		resp, err := cli.TimeToLive(testCtx(t), lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL == -1) {
			return
		}
		if time.Now().After(deadline) {
			if err == nil {
				t.Fatalf("lease %x still alive %s after its registration was lost (%d s to live)", lease, d, resp.TTL)
			}
			t.Fatalf("lease %x: %v", lease, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
