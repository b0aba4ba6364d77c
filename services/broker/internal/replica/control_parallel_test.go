package replica

import (
	"sync"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/logstore"
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
