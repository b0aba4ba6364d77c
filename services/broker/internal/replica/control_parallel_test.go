package replica

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/platform/kerr"
)

// meetingStore holds each log creation until another one is under way at
// the same time (or a second has passed, after which it stops waiting):
// it tells creations made side by side from creations made one at a time.
type meetingStore struct {
	LogStore
	mu      sync.Mutex
	inside  int
	most    int
	met     chan struct{}
	gaveUp  bool
	metOnce sync.Once
}

func (s *meetingStore) GetOrCreate(tp TP, cfg logstore.Config) (Log, error) {
	s.mu.Lock()
	s.inside++
	s.most = max(s.most, s.inside)
	if s.inside >= 2 {
		s.metOnce.Do(func() { close(s.met) })
	}
	wait := !s.gaveUp
	s.mu.Unlock()
	if wait {
		select {
		case <-s.met:
		case <-time.After(time.Second):
			s.mu.Lock()
			s.gaveUp = true
			s.mu.Unlock()
		}
	}
	defer func() {
		s.mu.Lock()
		s.inside--
		s.mu.Unlock()
	}()
	return s.LogStore.GetOrCreate(tp, cfg)
}

// A LeaderAndIsr creates the logs of its partitions side by side: each
// creation waits for fsyncs, and one at a time the thousand leaderships a
// dead broker leaves, or a topic of 2,000 partitions, took seconds to tens
// of seconds. Every partition is still applied, and answered in request
// order.
func TestLeaderAndIsrCreatesLogsSideBySide(t *testing.T) {
	e := newEnv(t)
	store := &meetingStore{met: make(chan struct{})}
	m, _ := e.newManagerWith(2, func(s LogStore) LogStore { store.LogStore = s; return store })
	e.updateMetadataOn(m)
	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[2]}
	const n = 8
	for p := range int32(n) {
		req.Partitions = append(req.Partitions, partitionState(TP{Topic: "t", Partition: p}, 2, 1, 1, []int32{1, 2, 3}))
	}
	resp, err := m.LeaderAndIsr(req)
	if err != nil {
		t.Fatal(err)
	}
	if store.most < 2 {
		t.Errorf("at most %d log creations under way at once: the partitions were applied one at a time", store.most)
	}
	if len(resp.GetPartitions()) != n {
		t.Fatalf("%d results for %d partitions", len(resp.GetPartitions()), n)
	}
	for i, res := range resp.GetPartitions() {
		if res.GetPartition() != int32(i) || kerr.Code(res.GetErrorCode()) != kerr.None {
			t.Errorf("result %d: partition %d, %v %s", i, res.GetPartition(), res.GetErrorCode(), res.GetErrorMessage())
		}
		r, ok := m.Replica(TP{Topic: "t", Partition: int32(i)})
		if !ok || r.log.LatestEpoch() != 1 {
			t.Errorf("partition %d: hosted %v, not leading at epoch 1", i, ok)
		}
	}
}

// Two states of one partition in one request are applied in request order
// (on one goroutine): the later, newer epoch is the one in force.
func TestLeaderAndIsrAppliesOnePartitionsStatesInOrder(t *testing.T) {
	var order []int
	var mu sync.Mutex
	states := []*commonv1.PartitionState{
		partitionState(TP{Topic: "t", Partition: 0}, 1, 1, 1, nil),
		partitionState(TP{Topic: "t", Partition: 1}, 1, 1, 1, nil),
		partitionState(TP{Topic: "t", Partition: 0}, 1, 2, 2, nil),
	}
	eachPartitionState(states, 4, func(i int) {
		if i == 0 {
			time.Sleep(50 * time.Millisecond) // the later state must still wait for it
		}
		if states[i].GetPartition() == 0 {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}
	})
	if len(order) != 2 || order[0] != 0 || order[1] != 2 {
		t.Fatalf("partition 0's states applied in order %v, want [0 2]", order)
	}
}

// gatedStore counts log creations and holds the first until released.
type gatedStore struct {
	LogStore
	created  atomic.Int32
	entered  chan struct{}
	release  chan struct{}
	gateOnce sync.Once
}

func (s *gatedStore) GetOrCreate(tp TP, cfg logstore.Config) (Log, error) {
	s.created.Add(1)
	first := false
	s.gateOnce.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.release
	}
	return s.LogStore.GetOrCreate(tp, cfg)
}

// A LeaderAndIsr sent again while the broker still applies it (the
// controller's attempt timed out) is not applied a second time: the resend
// waits for the first application and gets its answer. Once another
// control request has come, an equal LeaderAndIsr is a new request and is
// applied (here it hosts again a replica stopped in between).
func TestLeaderAndIsrResendIsNotAppliedAgain(t *testing.T) {
	e := newEnv(t)
	store := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	m, _ := e.newManagerWith(2, func(s LogStore) LogStore { store.LogStore = s; return store })
	e.updateMetadataOn(m)
	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[2]}
	const n = 4
	for p := range int32(n) {
		req.Partitions = append(req.Partitions, partitionState(TP{Topic: "t", Partition: p}, 2, 1, 1, []int32{1, 2, 3}))
	}
	type answer struct {
		resp *controlv1.LeaderAndIsrResponse
		err  error
	}
	first, resend := make(chan answer, 1), make(chan answer, 1)
	go func() {
		resp, err := m.LeaderAndIsr(req)
		first <- answer{resp, err}
	}()
	<-store.entered
	go func() {
		resp, err := m.LeaderAndIsr(proto.Clone(req).(*controlv1.LeaderAndIsrRequest))
		resend <- answer{resp, err}
	}()
	resends := func() int { return int(testutil.ToFloat64(m.metrics.leaderAndIsrResends)) }
	waitFor(t, "the resend recognised while the first is applied", func() bool { return resends() == 1 })
	close(store.release)
	a, b := <-first, <-resend
	if a.err != nil || b.err != nil {
		t.Fatalf("answers: %v, %v", a.err, b.err)
	}
	if got := store.created.Load(); got != n {
		t.Fatalf("%d log creations for %d partitions sent twice: the resend was applied again", got, n)
	}
	if !proto.Equal(a.resp, b.resp) || len(b.resp.GetPartitions()) != n {
		t.Fatalf("the resend got %v, the first %v", b.resp, a.resp)
	}
	for p := range int32(n) {
		if r, ok := m.Replica(TP{Topic: "t", Partition: p}); !ok || r.log.LatestEpoch() != 1 {
			t.Fatalf("partition %d: hosted %v, not leading at epoch 1", p, ok)
		}
	}

	stop := &controlv1.StopReplicaRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[2],
		Partitions: []*controlv1.StopReplicaPartition{{Topic: "t", Partition: 0, LeaderEpoch: 1}}}
	if _, err := m.StopReplica(stop); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Replica(TP{Topic: "t", Partition: 0}); ok {
		t.Fatal("t-0 still hosted after StopReplica")
	}
	if _, err := m.LeaderAndIsr(proto.Clone(req).(*controlv1.LeaderAndIsrRequest)); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Replica(TP{Topic: "t", Partition: 0}); !ok || resends() != 1 {
		t.Fatalf("after a StopReplica an equal LeaderAndIsr was not applied: t-0 hosted %v, resends counted %d", ok, resends())
	}
}

// heldStore holds every log creation until released, counting those
// waiting.
type heldStore struct {
	LogStore
	waiting atomic.Int32
	release chan struct{}
}

func (s *heldStore) GetOrCreate(tp TP, cfg logstore.Config) (Log, error) {
	s.waiting.Add(1)
	<-s.release
	return s.LogStore.GetOrCreate(tp, cfg)
}

// While a LeaderAndIsr creating a topic is being applied, the broker's
// metadata shows all of the topic's partitions or none: with more
// partitions than are applied side by side, and every log creation held,
// none is shown before the UpdateMetadata listing the topic (a
// LeaderAndIsr names only the partitions this broker hosts). (They used to
// be put one by one as the workers reached them, and a Kafka client
// reading Metadata meanwhile took too few partitions.)
func TestMetadataNeverShowsPartOfALeaderAndIsr(t *testing.T) {
	e := newEnv(t)
	store := &heldStore{release: make(chan struct{})}
	m, meta := e.newManagerWith(2, func(s LogStore) LogStore { store.LogStore = s; return store })
	e.updateMetadataOn(m)
	const n = 3 * controlParallelism
	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[2]}
	for p := range int32(n) {
		req.Partitions = append(req.Partitions, partitionState(TP{Topic: "wide", Partition: p}, 2, 1, 1, []int32{1, 2, 3}))
	}
	done := make(chan error, 1)
	go func() { _, err := m.LeaderAndIsr(req); done <- err }()
	waitFor(t, "every worker held in a log creation", func() bool { return store.waiting.Load() == controlParallelism })
	if got := len(meta.TopicPartitions("wide")); got != 0 && got != n {
		t.Errorf("metadata shows %d of the topic's %d partitions while its LeaderAndIsr is applied", got, n)
	}
	if _, ok := meta.Partition(metadata.TP{Topic: "wide", Partition: n - 1}); !ok {
		t.Error("a partition no worker has reached is unknown to the broker applying it")
	}
	close(store.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
