package metastore

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/kerr"
)

// clientBeforeRevoke dials endpoint and runs before once, just ahead of the
// client's first call that would remove a broker registration (a lease
// revoke, or a transaction that deletes a key): the moment between a
// controller deciding on a revoke and the revoke taking effect.
func clientBeforeRevoke(t *testing.T, endpoint string, before func()) *clientv3.Client {
	t.Helper()
	var once sync.Once
	hook := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		removes := method == "/etcdserverpb.Lease/LeaseRevoke"
		if txn, ok := req.(*pb.TxnRequest); ok {
			for _, op := range txn.GetSuccess() {
				removes = removes || op.GetRequestDeleteRange() != nil
			}
		}
		if removes {
			once.Do(before)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: append(etcdconn.DialOptions(), grpc.WithChainUnaryInterceptor(hook)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// A controller deposed after it decided to revoke a broker must not revoke
// it: the revoke is fenced in the same transaction that removes the
// registration. A fenced read followed by a plain lease revoke let a
// deposed controller declare a live broker dead.
func TestRevokeBrokerByADeposedControllerIsRefused(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	direct := srv.Client(t)
	var sess *Session
	ctrl := newStore(t, clientBeforeRevoke(t, srv.Endpoint(), func() {
		// The controller's lease ends: it is no longer the controller.
		if _, err := direct.Revoke(ctx, sess.Lease()); err != nil {
			t.Error(err)
		}
	}))
	sess = elect(t, ctx, ctrl, 1, longTTL)
	reg, err := newStore(t, direct).RegisterBroker(ctx, BrokerInfo{ID: 2, Address: "127.0.0.1:9102"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())

	wantMoved(t, sess.RevokeBroker(ctx, 2, reg.Epoch()))
	resp, err := direct.Get(ctx, ctrl.k.broker(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != reg.Epoch() {
		t.Fatalf("registration after a deposed controller's revoke: %v, want epoch %d kept", resp.Kvs, reg.Epoch())
	}
	select {
	case <-reg.Done():
		t.Fatalf("the broker lost its registration: %s", reg.LostReason())
	case <-time.After(200 * time.Millisecond):
	}
}

// A broker that registered again between the controller's decision and the
// revoke keeps its new registration, and the controller hears that the
// incarnation it meant is gone (STALE_BROKER_EPOCH), not that it revoked it.
func TestRevokeBrokerSparesARegistrationMadeMeanwhile(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testCtx(t)
	direct := srv.Client(t)
	brokerSide := newStore(t, direct)
	old, err := brokerSide.RegisterBroker(ctx, BrokerInfo{ID: 2, Address: "127.0.0.1:9102"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	var fresh *Registration
	ctrl := newStore(t, clientBeforeRevoke(t, srv.Endpoint(), func() {
		// The old incarnation's lease ends and the broker registers anew.
		if _, err := direct.Revoke(ctx, old.Lease()); err != nil {
			t.Error(err)
			return
		}
		if fresh, err = brokerSide.RegisterBroker(ctx, BrokerInfo{ID: 2, Address: "127.0.0.1:9102"}, longTTL, WaitForExpiry()); err != nil {
			t.Error(err)
		}
	}))
	sess := elect(t, ctx, ctrl, 1, longTTL)

	wantCode(t, sess.RevokeBroker(ctx, 2, old.Epoch()), kerr.StaleBrokerEpoch)
	if fresh == nil {
		t.Fatal("the broker did not register again")
	}
	defer fresh.Close(context.Background())
	resp, err := direct.Get(ctx, ctrl.k.broker(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != fresh.Epoch() || resp.Kvs[0].Lease != int64(fresh.Lease()) {
		t.Fatalf("registration after revoking epoch %d: %v, want the new one (epoch %d) kept", old.Epoch(), resp.Kvs, fresh.Epoch())
	}
	select {
	case <-fresh.Done():
		t.Fatalf("the new registration was lost: %s", fresh.LostReason())
	case <-time.After(200 * time.Millisecond):
	}
}
