package replica

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
)

var tp1 = TP{Topic: "t", Partition: 1}

// tapNet is the env's network seen by one follower: it records every fetch
// request the follower sends and can hold an answer after the leader gave
// it, before the follower reads it (an answer already on the wire when the
// follower cuts the round trip short).
type tapNet struct {
	net *memNet

	mu   sync.Mutex
	reqs []*replicationv1.ReplicaFetchRequest
	// hold picks the answer to hold (once); held is signalled when it is
	// held, release lets it go.
	hold    func(*replicationv1.ReplicaFetchResponse) bool
	held    chan struct{}
	release chan struct{}
}

func newTapNet(net *memNet) *tapNet {
	return &tapNet{net: net, held: make(chan struct{}, 1), release: make(chan struct{})}
}

func (n *tapNet) Replication(addr string) (replicationv1.ReplicationServiceClient, error) {
	c, err := n.net.Replication(addr)
	if err != nil {
		return nil, err
	}
	return tapClient{ReplicationServiceClient: c, n: n}, nil
}

func (n *tapNet) AlterPartition(ctx context.Context, addr string, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	return n.net.AlterPartition(ctx, addr, req)
}

// requests returns the fetch requests sent so far.
func (n *tapNet) requests() []*replicationv1.ReplicaFetchRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*replicationv1.ReplicaFetchRequest(nil), n.reqs...)
}

// fetchOffsets maps each partition of req to its fetch offset.
func fetchOffsets(req *replicationv1.ReplicaFetchRequest) map[TP]int64 {
	m := map[TP]int64{}
	for _, p := range req.GetPartitions() {
		m[TP{Topic: p.GetTopic(), Partition: p.GetPartition()}] = p.GetFetchOffset()
	}
	return m
}

// waitRequest waits for a fetch request after the first `after` ones that
// satisfies ok and returns its index.
func (n *tapNet) waitRequest(t *testing.T, what string, after int, ok func(*replicationv1.ReplicaFetchRequest) bool) int {
	t.Helper()
	found := -1
	waitFor(t, what, func() bool {
		reqs := n.requests()
		for i := after; i < len(reqs); i++ {
			if ok(reqs[i]) {
				found = i
				return true
			}
		}
		return false
	})
	return found
}

type tapClient struct {
	replicationv1.ReplicationServiceClient
	n *tapNet
}

func (c tapClient) ReplicaFetch(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[replicationv1.ReplicaFetchRequest, replicationv1.ReplicaFetchResponse], error) {
	s, err := c.ReplicationServiceClient.ReplicaFetch(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &tapStream{BidiStreamingClient: s, n: c.n}, nil
}

type tapStream struct {
	grpc.BidiStreamingClient[replicationv1.ReplicaFetchRequest, replicationv1.ReplicaFetchResponse]
	n *tapNet
}

func (s *tapStream) Send(req *replicationv1.ReplicaFetchRequest) error {
	s.n.mu.Lock()
	s.n.reqs = append(s.n.reqs, req)
	s.n.mu.Unlock()
	return s.BidiStreamingClient.Send(req)
}

func (s *tapStream) Recv() (*replicationv1.ReplicaFetchResponse, error) {
	resp, err := s.BidiStreamingClient.Recv()
	if err != nil {
		return resp, err
	}
	s.n.mu.Lock()
	hold := s.n.hold != nil && s.n.hold(resp)
	if hold {
		s.n.hold = nil
	}
	s.n.mu.Unlock()
	if hold {
		s.n.held <- struct{}{}
		<-s.n.release
	}
	return resp, nil
}

// followerOver starts broker 2 reaching its peers through n.
func (e *env) followerOver(n *tapNet) *Manager {
	e.t.Helper()
	m2, _ := e.newManagerOver(2, nil, n)
	e.updateMetadataOn(m2)
	return m2
}

// maxWait is replica.fetch.wait.max.ms of the tests' brokers.
func (e *env) maxWait() time.Duration {
	return time.Duration(e.m.BrokerConfig().ReplicaFetchWaitMaxMs) * time.Millisecond
}

// A partition handed to a fetcher whose round trip is parked on the leader
// (nothing new for its partitions: the leader holds it for its max wait,
// which only the test's clock can end) is fetched at once: the parked round
// trip is cut short and the next request carries the new partition. Its
// acks=all write commits (the follower fetched the record, then asked past
// it) with the clock not moved at all. Without the cut the new partition
// would wait for the parked round trip's max wait; without fetching a
// partition in the round its truncation settles, for the next one's.
func TestFetcherFetchesAnAddedPartitionWithoutWaitingOutTheLongPoll(t *testing.T) {
	e := newEnv(t)
	n := newTapNet(e.net)
	m2 := e.followerOver(n)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOf(tp1, 1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	e.clock.WaitTimer(t, e.maxWait(), 1) // broker 2's fetch of t-0, parked on the leader

	before := e.clock.pending(produceTimeout)
	out := make(chan produceOutcome, 1)
	go func() {
		res, err := e.m.Produce(context.Background(), tp1, -1, batch("a"), produceTimeout)
		out <- produceOutcome{res, err}
	}()
	e.clock.WaitTimer(t, produceTimeout, before+1) // waiting for broker 2
	start := e.clock.Now()

	e.stateOn(m2, tp1, 1, 1, 1, []int32{1, 2}, nil)
	if o := e.result(out); o.err != nil || o.res.BaseOffset != 0 {
		t.Fatalf("acks=all produce to t-1: %+v %v", o.res, o.err)
	}
	if now := e.clock.Now(); !now.Equal(start) {
		t.Fatalf("the clock moved by %s", now.Sub(start))
	}
	r2, _ := m2.Replica(tp1)
	if leo := r2.Log().LogEndOffset(); leo != 1 {
		t.Fatalf("follower LEO of t-1 %d, want 1", leo)
	}
	if got := testutil.ToFloat64(m2.metrics.fetchInterrupts); got != 1 {
		t.Fatalf("fetch interrupts %v, want 1 (one cut for the new partition)", got)
	}
	// The round trip built after the cut carried both partitions.
	reqs := n.requests()
	both := false
	for _, r := range reqs {
		o := fetchOffsets(r)
		_, has0 := o[tp0]
		_, has1 := o[tp1]
		both = both || has0 && has1
	}
	if !both {
		t.Fatalf("no request carried t-0 and t-1 together: %d requests", len(reqs))
	}
}

// The answer of a round trip cut short is discarded whole, even one that
// had arrived when the cut came: no record of it is appended and no offset
// moves, so the next request asks again from the same offset, and the
// record is appended once, from that request's answer.
func TestFetcherDiscardsTheAnswerOfAnInterruptedRoundTrip(t *testing.T) {
	e := newEnv(t)
	n := newTapNet(e.net)
	n.hold = func(resp *replicationv1.ReplicaFetchResponse) bool {
		for _, p := range resp.GetPartitions() {
			if p.GetTopic() == tp0.Topic && p.GetPartition() == tp0.Partition && len(p.GetRecords()) > 0 {
				return true
			}
		}
		return false
	}
	m2 := e.followerOver(n)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOf(tp1, 1, 1, 1, []int32{1, 2}, nil)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), produceTimeout); err != nil {
		t.Fatal(err)
	}
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	select {
	case <-n.held: // the answer with "a" is in, not yet read by the fetcher
	case <-time.After(10 * time.Second):
		t.Fatal("no answer with t-0's record")
	}
	sent := len(n.requests())
	e.stateOn(m2, tp1, 1, 1, 1, []int32{1, 2}, nil) // cuts the round trip short
	close(n.release)

	i := n.waitRequest(t, "the request after the cut", sent, func(r *replicationv1.ReplicaFetchRequest) bool {
		_, ok := fetchOffsets(r)[tp1]
		return ok
	})
	if off, ok := fetchOffsets(n.requests()[i])[tp0]; !ok || off != 0 {
		t.Fatalf("t-0 in the request after the cut: offset %d (present %v), want 0: the discarded answer moved it", off, ok)
	}
	if got := testutil.ToFloat64(m2.metrics.fetchInterrupts); got != 1 {
		t.Fatalf("fetch interrupts %v, want 1", got)
	}
	r2, _ := m2.Replica(tp0)
	waitFor(t, "the follower to fetch t-0's record again", func() bool { return r2.Log().LogEndOffset() == 1 })
	// Asked past it: it is there once.
	n.waitRequest(t, "a fetch of t-0 at 1", i, func(r *replicationv1.ReplicaFetchRequest) bool {
		return fetchOffsets(r)[tp0] == 1
	})
	if leo := r2.Log().LogEndOffset(); leo != 1 {
		t.Fatalf("follower LEO of t-0 %d, want 1", leo)
	}
}

// Removing a partition from a fetcher parked on the leader cuts the round
// trip short too: the next request, without it, goes out at once (clock not
// moved), so the leader does not keep a parked request for a partition the
// follower no longer fetches from it.
func TestFetcherDropsARemovedPartitionWithoutWaitingOutTheLongPoll(t *testing.T) {
	e := newEnv(t)
	n := newTapNet(e.net)
	m2 := e.followerOver(n)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOf(tp1, 1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp1, 1, 1, 1, []int32{1, 2}, nil)
	// Parked with both partitions.
	waitFor(t, "a parked fetch of both partitions", func() bool {
		reqs := n.requests()
		if len(reqs) == 0 || e.clock.pending(e.maxWait()) == 0 {
			return false
		}
		o := fetchOffsets(reqs[len(reqs)-1])
		_, has0 := o[tp0]
		_, has1 := o[tp1]
		return has0 && has1
	})
	start, sent := e.clock.Now(), len(n.requests())
	cuts := testutil.ToFloat64(m2.metrics.fetchInterrupts)

	e.stateOn(m2, tp1, 2, 2, 2, []int32{2}, nil) // broker 2 leads t-1 now
	i := n.waitRequest(t, "a request without t-1", sent, func(r *replicationv1.ReplicaFetchRequest) bool {
		_, ok := fetchOffsets(r)[tp1]
		return !ok
	})
	if _, ok := fetchOffsets(n.requests()[i])[tp0]; !ok {
		t.Fatal("t-0 left out of the request after the cut")
	}
	if now := e.clock.Now(); !now.Equal(start) {
		t.Fatalf("the clock moved by %s", now.Sub(start))
	}
	if got := testutil.ToFloat64(m2.metrics.fetchInterrupts); got != cuts+1 {
		t.Fatalf("fetch interrupts %v, want %v", got, cuts+1)
	}
}

// One LeaderAndIsr cuts a parked round trip short once, however many of
// the fetcher's partitions it changes: t-3 removed (broker 2 leads it now)
// and two partitions added. The next request carries the new set, with the
// clock not moved.
func TestFetcherIsCutOncePerLeaderAndIsr(t *testing.T) {
	e := newEnv(t)
	n := newTapNet(e.net)
	m2 := e.followerOver(n)
	tp2, tp3 := TP{Topic: "t", Partition: 2}, TP{Topic: "t", Partition: 3}
	for _, tp := range []TP{tp0, tp1, tp2, tp3} {
		e.stateOf(tp, 1, 1, 1, []int32{1, 2}, nil)
	}
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp3, 1, 1, 1, []int32{1, 2}, nil)
	waitFor(t, "a parked fetch of t-0 and t-3", func() bool {
		reqs := n.requests()
		return len(reqs) > 0 && len(fetchOffsets(reqs[len(reqs)-1])) == 2 && e.clock.pending(e.maxWait()) > 0
	})
	start, sent := e.clock.Now(), len(n.requests())
	cuts := testutil.ToFloat64(m2.metrics.fetchInterrupts)

	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[2],
		Partitions: []*commonv1.PartitionState{
			partitionState(tp1, 1, 1, 1, []int32{1, 2}),
			partitionState(tp3, 2, 2, 2, []int32{2}),
			partitionState(tp2, 1, 1, 1, []int32{1, 2}),
		}}
	if _, err := m2.LeaderAndIsr(req); err != nil {
		t.Fatal(err)
	}
	i := n.waitRequest(t, "a request of the new set", sent, func(r *replicationv1.ReplicaFetchRequest) bool {
		return len(fetchOffsets(r)) == 3
	})
	o := fetchOffsets(n.requests()[i])
	for _, tp := range []TP{tp0, tp1, tp2} {
		if _, ok := o[tp]; !ok {
			t.Fatalf("%v missing from the request after the cut: %v", tp, o)
		}
	}
	if now := e.clock.Now(); !now.Equal(start) {
		t.Fatalf("the clock moved by %s", now.Sub(start))
	}
	if got := testutil.ToFloat64(m2.metrics.fetchInterrupts); got != cuts+1 {
		t.Fatalf("fetch interrupts %v, want %v: one per LeaderAndIsr", got, cuts+1)
	}
}

// A partition backing off briefly (UNKNOWN_LEADER_EPOCH: the follower
// learned of the new leader epoch before the leader did) shortens the
// fetcher's next long poll to its due time: it is fetched again after its
// 50 ms, not after the max wait the leader would otherwise hold the others'
// fetch for.
func TestFetcherShortensTheLongPollToABriefBackoff(t *testing.T) {
	e := newEnv(t)
	n := newTapNet(e.net)
	m2 := e.followerOver(n)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.stateOf(tp1, 1, 1, 1, []int32{1, 2}, nil)
	e.stateOn(m2, tp0, 1, 1, 1, []int32{1, 2}, nil)
	e.clock.WaitTimer(t, e.maxWait(), 1)
	sent := len(n.requests())

	e.stateOn(m2, tp1, 1, 2, 2, []int32{1, 2}, nil) // the leader is still at epoch 1
	i := n.waitRequest(t, "the fetch of t-1 at epoch 2", sent, func(r *replicationv1.ReplicaFetchRequest) bool {
		_, ok := fetchOffsets(r)[tp1]
		return ok
	})
	j := n.waitRequest(t, "the fetch after UNKNOWN_LEADER_EPOCH", i+1, func(*replicationv1.ReplicaFetchRequest) bool { return true })
	r := n.requests()[j]
	if _, ok := fetchOffsets(r)[tp1]; ok {
		t.Fatal("t-1 fetched again at once, not backing off")
	}
	if got := time.Duration(r.GetMaxWaitMs()) * time.Millisecond; got != epochBackoff {
		t.Fatalf("max wait %s with t-1 backing off, want %s", got, epochBackoff)
	}
	e.clock.WaitTimer(t, epochBackoff, 1)       // parked on the leader for 50 ms
	e.stateOf(tp1, 1, 2, 2, []int32{1, 2}, nil) // the leader catches up
	e.clock.Advance(epochBackoff)
	n.waitRequest(t, "t-1 fetched again after its backoff", j+1, func(r *replicationv1.ReplicaFetchRequest) bool {
		_, ok := fetchOffsets(r)[tp1]
		return ok
	})
}
