package devcluster

import (
	"context"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/services/platform/loopback"
)

// The embedded etcd is a node of the control API: `tidemark dev stop etcd`
// takes it down as SIGTERM takes an etcd process down (its port refuses),
// `start` brings it back on the same data, and a kill or pause is refused
// with the actions it does take.
func TestEtcdNodeStopsAndStartsOnItsData(t *testing.T) {
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{DataDir: t.TempDir(), EtcdClient: addr, PlaintextEtcd: true, Brokers: 1, Controllers: 1}
	ctx := t.Context()
	etcd, err := o.startEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{opts: o, etcd: etcd}
	t.Cleanup(func() { _ = c.StopEtcd() })
	svc := &controlService{c: c}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/kept", "yes"); err != nil {
		t.Fatal(err)
	}
	state := func() devclusterv1.NodeState {
		t.Helper()
		l, err := svc.ListNodes(ctx, &devclusterv1.ListNodesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range l.GetNodes() {
			if n.GetName() == EtcdNode {
				if n.GetKind() != "etcd" || n.GetAddress() != addr {
					t.Errorf("etcd listed as %v", n)
				}
				return n.GetState()
			}
		}
		t.Fatal("etcd is not listed")
		return 0
	}
	act := func(a devclusterv1.Action) error {
		_, err := svc.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: EtcdNode, Action: a})
		return err
	}
	if s := state(); s != devclusterv1.NodeState_NODE_STATE_RUNNING {
		t.Fatalf("etcd listed %v, want RUNNING", s)
	}
	for _, a := range []devclusterv1.Action{devclusterv1.Action_ACTION_PAUSE, devclusterv1.Action_ACTION_KILL} {
		if err := act(a); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v etcd: %v, want InvalidArgument", a, err)
		}
	}
	if _, err := svc.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: EtcdNode, Action: devclusterv1.Action_ACTION_RESTART,
		ExtraArgs: []string{"--x"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("restart etcd with extra args: %v, want InvalidArgument", err)
	}
	if err := act(devclusterv1.Action_ACTION_START); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("start a running etcd: %v, want FailedPrecondition", err)
	}

	if err := act(devclusterv1.Action_ACTION_STOP); err != nil {
		t.Fatalf("stop etcd: %v", err)
	}
	if s := state(); s != devclusterv1.NodeState_NODE_STATE_STOPPED {
		t.Fatalf("etcd listed %v after a stop, want STOPPED", s)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("a stopped etcd's port %s still takes connections", addr)
	}
	if err := act(devclusterv1.Action_ACTION_STOP); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("stop a stopped etcd: %v, want FailedPrecondition", err)
	}

	if err := act(devclusterv1.Action_ACTION_START); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	if err := act(devclusterv1.Action_ACTION_RESTART); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	if s := state(); s != devclusterv1.NodeState_NODE_STATE_RUNNING {
		t.Fatalf("etcd listed %v after a restart, want RUNNING", s)
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(gctx, "/kept")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "yes" {
		t.Fatalf("the key written before the stop: %v %v", resp, err)
	}
}
