package metastore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/platform/etcdconn"
)

// compactingClient dials srv with a client that, once armed, compacts
// etcd's history past the revision of the first page of a paged read as
// soon as that page is answered: the compaction a busy etcd compacting by
// revision can run between two pages.
func compactingClient(t *testing.T, srv *etcdtest.Server, armed *atomic.Bool) *clientv3.Client {
	t.Helper()
	direct := srv.Client(t)
	compactAfterPage := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := reply.(*pb.RangeResponse); ok && err == nil && r.More && armed.CompareAndSwap(true, false) {
			rev := putRev(t, ctx, direct, "/unrelated", "x")
			if _, err := direct.Compact(ctx, rev); err != nil {
				t.Error(err)
			}
		}
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), DialOptions: append(etcdconn.DialOptions(), grpc.WithChainUnaryInterceptor(compactAfterPage))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestAPagedReadCompactedBetweenPagesReadsAgain: a read of more than one
// page whose revision etcd compacts away before the next page starts again
// at the newest revision, for a whole-cluster load (a new controller's) and
// for a followed prefix, instead of failing (the controller then lost its
// term, and the next one's load could fail the same way).
func TestAPagedReadCompactedBetweenPagesReadsAgain(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.Start(t)
	var armed atomic.Bool
	logs := &logBuffer{}
	s, err := New(compactingClient(t, srv, &armed), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	direct := srv.Client(t)
	const n = scanPage + scanPage/2
	for i := range n {
		putRev(t, ctx, direct, fmt.Sprintf("%s%04d", s.ACLsPrefix(), i), "x")
	}

	armed.Store(true)
	kvs, _, err := s.ReadPrefix(ctx, s.ACLsPrefix())
	if err != nil {
		t.Fatalf("a read compacted between its pages failed: %v", err)
	}
	if len(kvs) != n {
		t.Fatalf("read %d keys, want %d", len(kvs), n)
	}
	if armed.Load() {
		t.Fatal("no compaction between the pages: the test proves nothing")
	}

	armed.Store(true)
	if _, err := s.LoadCluster(ctx); err != nil {
		t.Fatalf("a load compacted between its pages failed: %v", err)
	}
	if armed.Load() {
		t.Fatal("no compaction between the load's pages: the test proves nothing")
	}
	if !strings.Contains(logs.String(), "reading again at the newest") {
		t.Fatalf("the read again is not logged:\n%s", logs)
	}
}
