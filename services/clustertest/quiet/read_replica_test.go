package quiet

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/testenv"
)

// A rack-aware consumer's read replica (KIP-392) cut off from it while it
// stays in the ISR, so the leader keeps naming it: the consumer reads on
// from the leader and tries the replica again only after a pause that grows
// with each failure. It went straight back to the replica after every
// answer from the leader, which names the replica without records: failed
// fetches one after the other, without a pause, and nothing read until the
// replica answered again. Once the link is healed it reads from the replica
// again.
func TestFailingReadReplicaIsAvoidedForAWhile(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: cuts a read replica off")
	}
	c := clustertest.Start(t, clustertest.Options{Racks: []string{"a", "b", "c"}})
	const topic, replica = "rr-avoided", int32(3)
	clustertest.CreateAssigned(t, c, topic, [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	replicaAddr := c.BrokerConfig(replica).Listen
	var replicaFetches atomic.Int64
	countReplicaFetches := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/Fetch") && strings.HasSuffix(cc.Target(), replicaAddr) {
			replicaFetches.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	o := client.Options{RequestTimeout: 3 * time.Second, RetryBackoffMax: 500 * time.Millisecond, Dialer: c.Net.Dialer(quietClientApp)}
	p, err := client.NewProducer(c.ClientWith(o), client.ProducerOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	o.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(countReplicaFetches)}
	// A short MaxWait: the leader answers at once, as it does while the
	// consumer is behind.
	cs, err := client.NewConsumer(c.ClientWith(o), client.ConsumerOptions{Topic: topic, Rack: "c", MaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	read := 0
	writeAndRead := func() {
		t.Helper()
		v := fmt.Sprintf("v%d", len(written))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := p.Produce(ctx, client.Record{Topic: topic, Partition: 0, ManualPartition: true, Value: []byte(v)})
		cancel()
		if err != nil {
			t.Fatalf("write %s: %v", v, err)
		}
		written = append(written, v)
		deadline := time.Now().Add(15 * time.Second)
		for read < len(written) {
			if time.Now().After(deadline) {
				t.Fatalf("consumer read %d of %d records within 15s (reading from broker %d)", read, len(written), cs.ReadReplica())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			recs, err := cs.Poll(ctx)
			cancel()
			if err != nil {
				t.Logf("poll: %v", err)
			}
			for _, r := range recs {
				if r.Offset != int64(read) || string(r.Value) != written[read] {
					t.Fatalf("consumer read %q at offset %d, want %q at %d", r.Value, r.Offset, written[read], read)
				}
				read++
			}
		}
	}
	readsFromReplica := func(within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for cs.ReadReplica() != replica {
			if time.Now().After(deadline) {
				t.Fatalf("the consumer in rack c reads from broker %d after %v, want its replica %d", cs.ReadReplica(), within, replica)
			}
			writeAndRead()
		}
	}
	readsFromReplica(15 * time.Second)

	c.Net.Cut(quietClientApp, clustertest.BrokerName(replica))
	replicaFetches.Store(0)
	const period = 3 * time.Second
	start, polls := time.Now(), 0
	for time.Since(start) < period {
		writeAndRead()
		polls++
	}
	// Pauses of 0.5, 1, 2 and 4 s (retry.backoff.max.ms doubling, ±20%)
	// allow four tries in the first three seconds, and a fifth only after
	// six: five leaves room for a slow last round.
	if n := replicaFetches.Load(); n > 5 {
		t.Fatalf("%d fetches to the cut-off read replica in %v (%d records written and read from the leader), want at most 5", n, period, polls)
	} else {
		t.Logf("%d fetches to the cut-off read replica in %v, %d records read from the leader", n, period, polls)
	}

	c.Net.Heal(quietClientApp, clustertest.BrokerName(replica))
	readsFromReplica(30 * time.Second)
	writeAndRead()
}
