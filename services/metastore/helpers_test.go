package metastore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/kerr"
)

// Lease TTLs used by the tests; etcdtest's server allows 1 s.
const (
	shortTTL = time.Second
	longTTL  = 2 * time.Second
)

// testCtx bounds every test so a hang fails instead of stalling the run.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newStore(t *testing.T, cli *clientv3.Client) *Store {
	t.Helper()
	s, err := New(cli, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startStore starts a server and returns a store on it.
func startStore(t *testing.T) (*etcdtest.Server, *Store) {
	t.Helper()
	srv := etcdtest.Start(t)
	return srv, newStore(t, srv.Client(t))
}

// elect campaigns and fails the test if it does not win within 5 s.
func elect(t *testing.T, ctx context.Context, s *Store, id int32, ttl time.Duration) *Session {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := s.Campaign(cctx, id, fmt.Sprintf("127.0.0.1:%d", 9000+id), ttl)
	if err != nil {
		t.Fatalf("controller %d campaign: %v", id, err)
	}
	t.Cleanup(func() {
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = sess.Resign(rctx)
	})
	return sess
}

func wantCode(t *testing.T, err error, want kerr.Code) {
	t.Helper()
	if got := kerr.CodeOf(err); got != want {
		t.Fatalf("error = %v (code %v), want code %v", err, got, want)
	}
}

func wantMoved(t *testing.T, err error) *ControllerMovedError {
	t.Helper()
	var moved *ControllerMovedError
	if !errors.Is(err, ErrControllerMoved) || !errors.As(err, &moved) {
		t.Fatalf("error = %v, want ErrControllerMoved", err)
	}
	wantCode(t, err, kerr.NotController)
	return moved
}

// waitClosed fails the test unless ch closes within d.
func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s did not happen within %s", what, d)
	}
}

// simpleTopic builds a topic of n partitions over brokers 1..3, led by the
// first replica with the full ISR.
func simpleTopic(name string, n int) NewTopic {
	t := NewTopic{Name: name, Replicas: map[int32][]int32{}, States: map[int32]PartitionState{}}
	for p := range int32(n) {
		reps := []int32{1 + p%3, 1 + (p+1)%3, 1 + (p+2)%3}
		t.Replicas[p] = reps
		t.States[p] = PartitionState{Leader: reps[0], ISR: reps}
	}
	return t
}

// newClientOn dials like the services do (etcdconn.Options.Client).
func newClientOn(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	o := etcdconn.Defaults()
	o.Endpoints = []string{endpoint}
	cli, err := o.Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// waitUntil polls cond every 10 ms, failing the test unless it holds
// within d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
