package client_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
)

// Once a metadata answer no longer lists a broker (it left the cluster),
// refreshes stop asking it; the bootstrap address stays.
func TestMetadataForgetsBrokersThatLeft(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 3})
	var mu sync.Mutex
	asked := map[string]int{}
	o := testOptions()
	o.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == brokerv1.BrokerService_Metadata_FullMethodName {
				mu.Lock()
				asked[strings.TrimPrefix(cc.Target(), "passthrough:///")]++
				mu.Unlock()
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})}
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t, 10*time.Second)
	if resp, err := c.Metadata(ctx); err != nil || len(resp.GetBrokers()) != 3 {
		t.Fatalf("metadata: %v, %v", resp, err)
	}
	left := fc.BrokerAddrs()[1:]
	fc.StopBroker(2)
	fc.StopBroker(3)
	// This refresh may still try them: the answer says they left.
	if resp, err := c.Metadata(ctx); err != nil || len(resp.GetBrokers()) != 1 {
		t.Fatalf("metadata after brokers 2 and 3 left: %v, %v", resp, err)
	}
	mu.Lock()
	clear(asked)
	mu.Unlock()
	const n = 20
	for range n {
		if _, err := c.Metadata(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range left {
		if asked[a] > 0 {
			t.Errorf("a broker that left (%s) was asked for metadata %d times", a, asked[a])
		}
	}
	if got := asked[fc.BrokerAddr(1)]; got != n {
		t.Errorf("broker 1 was asked %d times, want %d", got, n)
	}
}

// Metadata for one topic refreshes that topic only: another topic's entry,
// older than metadata.max.age, is still looked up again before it is used,
// rather than sending its next request to a leader that has moved.
func TestMetadataOfOneTopicLeavesOthersAging(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	fc.CreateTopic("a", 1)
	fc.CreateTopic("b", 1, 1, 2)
	fc.SetLeaderHints(false)
	o := testOptions()
	o.MetadataMaxAge = 300 * time.Millisecond
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.ListOffsets(ctx, "b", 0, client.Latest()); err != nil {
		t.Fatal(err)
	}
	fc.MoveLeader("b", 0, 2)
	time.Sleep(2 * o.MetadataMaxAge)
	if _, err := c.Metadata(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	before := fc.NodeCalls(1, "ListOffsets")
	if _, err := c.ListOffsets(ctx, "b", 0, client.Latest()); err != nil {
		t.Fatal(err)
	}
	if n := fc.NodeCalls(1, "ListOffsets") - before; n != 0 {
		t.Fatalf("ListOffsets of b went %d times to its old leader after a refresh of a alone", n)
	}
}

// A topic the metadata answer refuses (TOPIC_AUTHORIZATION_FAILED: the
// caller may not Describe it) fails a lookup at once with that code and
// the broker's message naming the principal, which no retry cures; before,
// it was cached as a topic with no partitions and retried as unknown until
// the deadline.
func TestMetadataRefusalFailsLookupsAtOnce(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 1})
	fc.CreateTopic("secret", 1)
	o := testOptions()
	o.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if r, ok := reply.(*brokerv1.MetadataResponse); ok && err == nil {
				for i, tm := range r.Topics {
					if tm.GetName() == "secret" { // as the broker answers a caller without Describe
						r.Topics[i] = &brokerv1.TopicMetadata{Name: "secret", ErrorCode: commonv1.ErrorCode(kerr.TopicAuthorizationFailed),
							ErrorMessage: "User:eve is not allowed Describe on Topic:secret"}
					}
				}
			}
			return err
		})}
	c, err := client.New(fc.BrokerAddrs(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t, 10*time.Second)
	_, err = c.ListOffsets(ctx, "secret", 0, client.Latest())
	if kerr.CodeOf(err) != kerr.TopicAuthorizationFailed || !strings.Contains(err.Error(), "User:eve is not allowed Describe") {
		t.Fatalf("ListOffsets on a refused topic: %v, want TOPIC_AUTHORIZATION_FAILED with the broker's message", err)
	}
}
