package client_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
)

// MetadataPage serves all topics a page at a time, and the cache keeps
// what it knew of the topics a page does not hold (a page is not the whole
// list). A page every broker would refuse (a negative size, a token no
// list gave) is refused before any is asked: each broker was asked in
// turn, then the ones the controller names.
func TestMetadataPageKeepsTheTopicsOutsideThePage(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	for _, name := range []string{"c", "a", "b"} {
		fc.CreateTopic(name, 1)
	}
	var asked atomic.Int32
	o := testOptions()
	o.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == brokerv1.BrokerService_Metadata_FullMethodName {
				asked.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})}
	c, err := client.New(fc.BrokerAddrs(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.Metadata(ctx); err != nil {
		t.Fatal(err)
	}

	var pages [][]string
	token := ""
	for len(pages) < 5 {
		resp, err := c.MetadataPage(ctx, 2, token)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tm := range resp.GetTopics() {
			names = append(names, tm.GetName())
		}
		pages = append(pages, names)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if want := [][]string{{"a", "b"}, {"c"}}; !slices.EqualFunc(pages, want, slices.Equal) {
		t.Fatalf("pages of 2: %v, want %v", pages, want)
	}
	// A page past the last topic holds none, and forgets none.
	if resp, err := c.MetadataPage(ctx, 2, paging.Token("c")); err != nil || len(resp.GetTopics()) != 0 {
		t.Fatalf("the page after c: %v, %v", resp.GetTopics(), err)
	}
	asked.Store(0)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := c.Leader(ctx, name, 0); err != nil {
			t.Fatalf("leader of %s-0: %v", name, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the leaders of topics the cache held were looked up again (%d metadata requests) after pages without them", n)
	}

	for _, bad := range []struct {
		size  int32
		token string
		field string
	}{{-1, "", "page_size"}, {2, "not-a-token", "page_token"}} {
		asked.Store(0)
		_, err := c.MetadataPage(ctx, bad.size, bad.token)
		if ke := kerr.As(err); ke == nil || ke.Code != kerr.InvalidRequest || ke.Field != bad.field {
			t.Errorf("MetadataPage(%d, %q): %v, want INVALID_REQUEST naming %s", bad.size, bad.token, err, bad.field)
		}
		if n := asked.Load(); n != 0 {
			t.Errorf("MetadataPage(%d, %q) asked %d brokers, each refusing it", bad.size, bad.token, n)
		}
	}
}
