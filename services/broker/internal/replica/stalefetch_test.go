package replica

import (
	"context"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/platform/kerr"
)

// blockingStore wraps every log so that, while armed, the next ReadInto
// blocks until released (the window between readForFollower's two locked
// sections).
type blockingStore struct {
	LogStore
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

type blockingLog struct {
	Log
	s *blockingStore
}

func (s *blockingStore) GetOrCreate(tp TP, cfg logstore.Config) (Log, error) {
	lg, err := s.LogStore.GetOrCreate(tp, cfg)
	if err != nil {
		return nil, err
	}
	return &blockingLog{Log: lg, s: s}, nil
}

func (l *blockingLog) ReadInto(buf []byte, offset int64, maxBytes int, upperBound int64) (logstore.ReadResult, error) {
	l.s.mu.Lock()
	armed := l.s.armed
	l.s.armed = false
	l.s.mu.Unlock()
	if armed {
		close(l.s.entered)
		<-l.s.release
	}
	return l.Log.ReadInto(buf, offset, maxBytes, upperBound)
}

// A follower fetch validated against leader epoch 1 must not be recorded in
// a later leadership of the same broker (epoch 3), entered after the
// leadership moved away and the log was truncated and rewritten: the
// follower's fetch offset says nothing about the records the leader holds
// now, and counting it lets the HW cover records the follower never had.
func TestAStaleFollowerFetchIsNotRecordedInALaterLeadership(t *testing.T) {
	e := &env{t: t, clock: newManualClock(), ctrl: newFakeController(), ctrlEpoch: 1}
	e.net = &memNet{ctrl: e.ctrl, managers: map[string]*Manager{}}
	store := &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	e.m, e.meta = e.newManagerWith(1, func(s LogStore) LogStore { store.LogStore = s; return store })
	e.updateMetadata()

	e.state(1, 1, 1, []int32{1, 2}, nil)
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		if _, err := e.m.Produce(context.Background(), tp0, 1, batch(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Follower 2 fetches at 5 in leader epoch 1; the read is held.
	store.mu.Lock()
	store.armed = true
	store.mu.Unlock()
	out := make(chan []FollowerFetchAnswer, 1)
	go func() {
		out <- e.m.ReplicaFetch(context.Background(), FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2],
			Partitions: []FollowerFetchPartition{{TP: tp0, FetchOffset: 5, CurrentLeaderEpoch: 1, LastFetchedEpoch: 1}}})
	}()
	select {
	case <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch never read")
	}

	// Meanwhile: broker 2 leads epoch 2, broker 1 follows and truncates to 3,
	// then leads again at epoch 3 and takes two new records at 3 and 4.
	e.state(2, 2, 2, []int32{1, 2}, nil)
	r := e.replica()
	r.mu.Lock()
	if _, err := r.log.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	r.state.OnTruncated(3)
	r.mu.Unlock()
	e.state(1, 3, 3, []int32{1, 2}, nil)
	for _, v := range []string{"X", "Y"} {
		if _, err := e.m.Produce(context.Background(), tp0, 1, batch(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	hwBefore := e.hw()

	close(store.release)
	a := recv(t, out)
	hw := e.hw()
	if hw != hwBefore {
		t.Fatalf("a fetch validated at leader epoch 1 moved the epoch-3 leader's HW from %d to %d (follower 2 never fetched in epoch 3; its records 3-4 are epoch 1's, not X and Y)", hwBefore, hw)
	}
	if a[0].Err == nil || kerr.CodeOf(a[0].Err) == kerr.None {
		t.Fatalf("the stale fetch was answered without error")
	}
}
