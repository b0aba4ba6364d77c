package replica

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
)

// stallEpochNet is a network whose OffsetForLeaderEpoch answers only when
// the caller gives up: asked is signalled when a call arrives.
type stallEpochNet struct {
	net   *memNet
	asked chan struct{}
}

func (n *stallEpochNet) Replication(addr string) (replicationv1.ReplicationServiceClient, error) {
	c, err := n.net.Replication(addr)
	if err != nil {
		return nil, err
	}
	return stallEpochClient{ReplicationServiceClient: c, n: n}, nil
}

func (n *stallEpochNet) AlterPartition(ctx context.Context, addr string, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	return n.net.AlterPartition(ctx, addr, req)
}

type stallEpochClient struct {
	replicationv1.ReplicationServiceClient
	n *stallEpochNet
}

func (c stallEpochClient) OffsetForLeaderEpoch(ctx context.Context, _ *replicationv1.OffsetForLeaderEpochRequest, _ ...grpc.CallOption) (*replicationv1.OffsetForLeaderEpochResponse, error) {
	select {
	case c.n.asked <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// lockedBuffer is a log sink safe for the fetchers' goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A broker that stops while a follower's OffsetForLeaderEpoch is in flight
// cancels the call itself: nothing failed, so nothing is warned about. It
// used to warn "OffsetForLeaderEpoch failed" with UNKNOWN_SERVER_ERROR:
// context canceled on every controlled shutdown that caught a truncation,
// as the fetch path never did.
func TestStoppingDuringALeaderEpochLookupWarnsOfNothing(t *testing.T) {
	e := newEnv(t)
	logs := &lockedBuffer{}
	e.logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n := &stallEpochNet{net: e.net, asked: make(chan struct{}, 1)}
	m2, _ := e.newManagerOver(2, nil, n)
	e.updateMetadataOn(m2)
	// Broker 2 leads at epoch 1 and writes, so that as a follower it has
	// an epoch to ask its new leader about.
	e.stateOn(m2, tp0, 2, 1, 1, []int32{2}, nil)
	if _, err := m2.Produce(context.Background(), tp0, 1, batch("a"), produceTimeout); err != nil {
		t.Fatal(err)
	}
	e.stateOn(m2, tp0, 1, 2, 2, []int32{1, 2}, nil)
	select {
	case <-n.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower never asked its leader where its epoch ends")
	}
	m2.Close()
	if out := logs.String(); strings.Contains(out, "OffsetForLeaderEpoch failed") {
		t.Fatalf("stopping the broker was logged as a failure:\n%s", out)
	}
}

// onlyFetcher returns m's one fetcher.
func onlyFetcher(t *testing.T, m *Manager) *fetcher {
	t.Helper()
	m.fetchers.mu.Lock()
	defer m.fetchers.mu.Unlock()
	if len(m.fetchers.fetchers) != 1 {
		t.Fatalf("%d fetchers, want 1", len(m.fetchers.fetchers))
	}
	for _, f := range m.fetchers.fetchers {
		return f
	}
	return nil
}

// A fetcher left with no partitions goes: its goroutine ends, closing its
// stream, and the fetcher manager forgets it. Idle fetchers used to stay
// for good, one per leader and fetcher index ever followed, piling up over
// reassignments and elections. A partition handed back to the same leader
// gets a new fetcher and replicates.
func TestAFetcherLeftWithoutPartitionsGoes(t *testing.T) {
	e := newEnv(t)
	m2, _ := e.newManager(2)
	e.updateMetadataOn(m2)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	if _, err := e.m.Produce(t.Context(), tp0, -1, batch("a"), produceTimeout); err != nil {
		t.Fatalf("acks=all produce: %v", err)
	}
	first := onlyFetcher(t, m2)

	// Broker 2 leads now: it follows nothing of broker 1's.
	e.state(2, 2, 2, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 2, 2, 2, []int32{1, 2}, nil)
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetcher left without partitions is still running")
	}
	if n := m2.fetchers.count(); n != 0 {
		t.Fatalf("%d fetchers on the leader of every partition, want 0", n)
	}

	// Broker 1 leads again: broker 2 follows it with a new fetcher, and
	// broker 1's fetcher of broker 2 goes in turn.
	e.state(1, 3, 3, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 3, 3, []int32{1, 2}, nil)
	if _, err := e.m.Produce(t.Context(), tp0, -1, batch("b"), produceTimeout); err != nil {
		t.Fatalf("acks=all produce with the partition handed back: %v", err)
	}
	if f := onlyFetcher(t, m2); f == first {
		t.Fatal("the partition went back to the fetcher that had gone")
	}
	waitFor(t, "broker 1's idle fetcher to go", func() bool { return e.m.fetchers.count() == 0 })
}

// stalledFollower starts broker 2 following broker 1's tp0 with its fetches
// of tp0 stalled by fault injection: its fetcher has nothing to send and
// idles a max wait on the test's clock, which only the test moves. It
// returns once the fetcher idles.
func stalledFollower(t *testing.T, e *env) *Manager {
	t.Helper()
	e.faults = NewFaults(true)
	if _, err := e.faults.Set(Fault{Topic: tp0.Topic, Partition: tp0.Partition, Stall: true}); err != nil {
		t.Fatal(err)
	}
	m2, _ := e.newManager(2)
	e.faults = nil
	e.updateMetadataOn(m2)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	before := e.clock.pending(e.maxWait())
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	e.clock.WaitTimer(t, e.maxWait(), before+1)
	return m2
}

// A fetcher idling with nothing to send (its partitions stalled, or no
// longer followed while the leadership change reaches the fetcher manager)
// goes as soon as its last partition does, not after its wait. It used to
// wait the whole max wait first, deaf to the change, so its goroutine and
// stream outlived the partition by up to that long (and a fetcher caught
// idling by TestAFetcherLeftWithoutPartitionsGoes never went on its clock).
func TestAnIdlingFetcherGoesWithItsLastPartition(t *testing.T) {
	e := newEnv(t)
	m2 := stalledFollower(t, e)
	f := onlyFetcher(t, m2)

	e.stateOn(m2, tp0, 2, 2, 2, []int32{1, 2}, nil) // broker 2 leads
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the idling fetcher outlived its last partition")
	}
	if n := m2.fetchers.count(); n != 0 {
		t.Fatalf("%d fetchers, want 0", n)
	}
}

// A partition handed to a fetcher idling with nothing to send is fetched at
// once: an acks=all write to it commits with the test's clock standing
// still.
func TestAPartitionAddedToAnIdlingFetcherIsFetchedAtOnce(t *testing.T) {
	e := newEnv(t)
	m2 := stalledFollower(t, e)
	tp1 := TP{Topic: tp0.Topic, Partition: 1}
	e.stateOf(tp1, 1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp1, 1, 1, 1, []int32{1, 2}, nil)
	if f := onlyFetcher(t, m2); f.empty() {
		t.Fatal("broker 2's fetcher of broker 1 has no partitions")
	}

	done := make(chan error, 1)
	go func() {
		_, err := e.m.Produce(context.Background(), tp1, -1, batch("a"), produceTimeout)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("acks=all produce to the added partition: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the added partition waited out the idling fetcher's wait")
	}
}
