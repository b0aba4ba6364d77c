package etcdauth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/metastore/etcdauth"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/scram"
)

// The roles fit what each process does through metastore, under a prefix
// of its own: a broker registers itself and finds the controller, the
// controller is elected, writes topics and revokes a broker's lease, the
// admin dumps every key; and none of them can do the others' part.
func TestRolesFitTheMetastore(t *testing.T) {
	const prefix = "/other/"
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "root"}, pki.Leaf{Name: "broker-1"}, pki.Leaf{Name: "controller-1"}, pki.Leaf{Name: "admin"}); err != nil {
		t.Fatal(err)
	}
	srv := etcdtest.Start(t, etcdtest.WithClientTLS(t, dir, true))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := func(name string) *metastore.Store {
		t.Helper()
		o := etcdconn.Defaults()
		o.Endpoints, o.Prefix = []string{srv.Endpoint()}, prefix
		o.CA, o.Cert, o.Key = pki.CAPath(dir), pki.CertPath(dir, name), pki.KeyPath(dir, name)
		cli, err := o.Client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		if name == "root" {
			if err := etcdauth.Setup(ctx, cli, etcdauth.Plan{Prefix: prefix, Brokers: []int32{1}, Controllers: []int32{1}, Admins: []string{"admin"}}); err != nil {
				t.Fatal(err)
			}
		}
		s, err := metastore.New(cli, metastore.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	store("root")
	broker, ctrl, admin := store("broker-1"), store("controller-1"), store("admin")

	// Before any controller is elected, only the controller's certificate can be.
	if _, err := broker.Campaign(ctx, 9, "127.0.0.1:1", 2*time.Second); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("broker-1 campaigns: %v, want permission denied", err)
	}
	if _, err := admin.Campaign(ctx, 9, "127.0.0.1:1", 2*time.Second); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("admin campaigns: %v, want permission denied", err)
	}
	sess, err := ctrl.Campaign(ctx, 1, "127.0.0.1:9190", 2*time.Second)
	if err != nil {
		t.Fatalf("controller campaign: %v", err)
	}
	if _, err := ctrl.EnsureClusterID(ctx); err != nil {
		t.Fatalf("controller cluster id: %v", err)
	}
	if _, _, err := ctrl.AllocateProducerIDBlock(ctx); err != nil {
		t.Fatalf("controller producer ids: %v", err)
	}
	if _, err := sess.CreateTopic(ctx, metastore.NewTopic{Name: "t", Replicas: map[int32][]int32{0: {1}},
		States: map[int32]metastore.PartitionState{0: {Leader: 1, ISR: []int32{1}}}}); err != nil {
		t.Fatalf("controller creates a topic: %v", err)
	}

	// A broker follows the state its listeners decide by.
	cred, err := scram.FromSaltedPassword(scram.SHA256, []byte("salt"), make([]byte, 32), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.PutUserCredentials(ctx, "alice", metastore.UserCredentials{scram.SHA256: cred}); err != nil {
		t.Fatalf("controller writes a user: %v", err)
	}
	for _, p := range []string{broker.ACLsPrefix(), broker.ClientQuotasPrefix(), broker.UsersPrefix()} {
		kvs, _, err := broker.ReadPrefix(ctx, p)
		if err != nil {
			t.Fatalf("broker-1 reads %s: %v", p, err)
		}
		if p == broker.UsersPrefix() && len(kvs) != 1 {
			t.Fatalf("broker-1 reads %d users, want 1", len(kvs))
		}
	}

	info, ok, err := broker.ActiveController(ctx)
	if err != nil || !ok || info.ControllerID != 1 {
		t.Fatalf("broker finds the controller: %v %v %v", info, ok, err)
	}
	reg, err := broker.RegisterBroker(ctx, metastore.BrokerInfo{ID: 1, Address: "127.0.0.1:9092"}, 2*time.Second)
	if err != nil {
		t.Fatalf("broker 1 registers: %v", err)
	}
	if _, err := broker.RegisterBroker(ctx, metastore.BrokerInfo{ID: 2, Address: "127.0.0.1:9093"}, 2*time.Second); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("broker-1 registers broker 2: %v, want permission denied", err)
	}
	snap, err := admin.Dump(ctx)
	if err != nil {
		t.Fatalf("admin dump: %v", err)
	}
	kinds := map[metastore.Kind]int{}
	for _, e := range snap.Entries {
		kinds[e.Kind]++
	}
	for _, k := range []metastore.Kind{metastore.KindController, metastore.KindControllerEpoch, metastore.KindBroker, metastore.KindTopic,
		metastore.KindPartitionState, metastore.KindClusterID, metastore.KindProducerIDBlock} {
		if kinds[k] != 1 {
			t.Fatalf("dump has %d %s keys, want 1: %v", kinds[k], k, kinds)
		}
	}
	if err := sess.RevokeBroker(ctx, 1, reg.Epoch()); err != nil {
		t.Fatalf("controller revokes broker 1: %v", err)
	}
	select {
	case <-reg.Done():
	case <-ctx.Done():
		t.Fatal("broker 1's registration outlived its revoked lease")
	}
	if err := requireAbsent(ctx, srv, dir, prefix+"brokers/ids/1"); err != nil {
		t.Fatal(err)
	}
}

// requireAbsent reads key as root and fails if it exists.
func requireAbsent(ctx context.Context, srv *etcdtest.Server, dir, key string) error {
	o := etcdconn.Defaults()
	o.Endpoints = []string{srv.Endpoint()}
	o.CA, o.Cert, o.Key = pki.CAPath(dir), pki.CertPath(dir, "root"), pki.KeyPath(dir, "root")
	cli, err := o.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, key)
	if err == nil && len(resp.Kvs) != 0 {
		err = errors.New(key + " still exists")
	}
	return err
}
