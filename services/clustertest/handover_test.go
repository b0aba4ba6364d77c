package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// Leadership handed round the replicas by preferred elections while four
// producers write with acks=1: a yielding leader answers only once the new
// leader has every record it took, so no acknowledged write is lost, acks=1
// included (DESIGN.md, "Voluntary moves").
func TestPreferredElectionsLoseNoAcks1Write(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	c.CreateTopic("handover", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("handover", 0).GetIsr()) == 3 })

	w := startAcks1Writers(c, "handover", 4)
	c.WaitFor(10*time.Second, "writes", func() bool { return w.count() >= 100 })

	const moves = 12
	for k := range moves {
		reps := c.Partition("handover", 0).GetReplicas()
		next := append(slices.Clone(reps[1:]), reps[0])
		Reassign(t, c, "handover", map[int32][]int32{0: next})
		c.WaitFor(10*time.Second, "the new replica order", func() bool {
			return slices.Equal(c.Partition("handover", 0).GetReplicas(), next)
		})
		resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{
			ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
			Partitions:   []*commonv1.TopicPartition{{Topic: "handover", Partition: 0}}})
		if err != nil {
			t.Fatalf("move %d: %v", k, err)
		}
		if code := kerr.Code(resp.GetResults()[0].GetErrorCode()); code != kerr.None {
			t.Fatalf("move %d: preferred election %v %s", k, code, resp.GetResults()[0].GetErrorMessage())
		}
		n := w.count()
		c.WaitFor(10*time.Second, "writes on the new leader", func() bool { return w.count() >= n+50 })
	}
	w.stopAndCheck(t, c, fmt.Sprintf("%d preferred elections", moves))
}

// acks1Writers are n goroutines writing distinct records to partition 0 of
// a topic with acks=1, through whichever broker leads it, each going on
// with its next record at once when one is refused.
type acks1Writers struct {
	topic   string
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	acked   []string
	refused int
}

func startAcks1Writers(c *Cluster, topic string, n int) *acks1Writers {
	w := &acks1Writers{topic: topic, stop: make(chan struct{})}
	for g := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := c.Produce(ctx, topic, 0, 1, v)
				cancel()
				w.mu.Lock()
				if err == nil {
					w.acked = append(w.acked, v)
				} else {
					w.refused++
				}
				w.mu.Unlock()
			}
		}()
	}
	return w
}

func (w *acks1Writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// stopAndCheck stops the writers, waits for HW = LEO on the replicas
// (brokers 1-3 when none are named) and fails the test for every
// acknowledged record their logs lack.
func (w *acks1Writers) stopAndCheck(t *testing.T, c *Cluster, what string, replicas ...int32) {
	t.Helper()
	close(w.stop)
	w.wg.Wait()

	if len(replicas) == 0 {
		replicas = []int32{1, 2, 3}
	}
	c.WaitHWAtLEO(w.topic, 0, replicas...)
	final := c.SameLogs(w.topic, 0, replicas...)
	have := make(map[string]bool, len(final))
	for _, v := range final {
		have[v] = true
	}
	lost := 0
	for _, v := range w.acked {
		if !have[v] {
			lost++
		}
	}
	t.Logf("%s: %d acks=1 writes acknowledged, %d attempts refused (each writer goes on with its next record at once), %d records in every replica, %d acknowledged lost",
		what, len(w.acked), w.refused, len(final), lost)
	if lost > 0 {
		t.Errorf("%d acknowledged acks=1 writes lost across %s", lost, what)
	}
}

// A rolling restart (each broker stopped with a controlled shutdown and
// started again) under four acks=1 writers: the stopping broker yields its
// leaderships once their next leaders have every record it took, so no
// acknowledged write is lost, acks=1 included (Kafka loses those the new
// leader had not fetched).
func TestRollingRestartLosesNoAcks1Write(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	c.CreateTopic("rolling", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("rolling", 0).GetIsr()) == 3 })
	w := startAcks1Writers(c, "rolling", 4)
	c.WaitFor(10*time.Second, "writes", func() bool { return w.count() >= 100 })
	for round := range 2 {
		for id := int32(1); id <= 3; id++ {
			if err := c.StopBroker(id); err != nil {
				t.Fatalf("stop broker %d: %v", id, err)
			}
			if l := c.Partition("rolling", 0).GetLeader(); l == id {
				t.Fatalf("round %d: broker %d still leads after its controlled shutdown", round, id)
			}
			n := w.count()
			c.WaitFor(10*time.Second, "writes while a broker is down", func() bool { return w.count() >= n+50 })
			c.StartBroker(id)
			c.WaitFor(20*time.Second, fmt.Sprintf("broker %d back in the ISR", id), func() bool {
				return len(c.Partition("rolling", 0).GetIsr()) == 3
			})
		}
	}
	w.stopAndCheck(t, c, "two rolling restarts")
}

// A reassignment that moves a partition off its leader's broker, under
// four acks=1 writers: the leader yields once the new leader has every
// record it took, so no acknowledged write is lost.
func TestReassignmentOffTheLeaderLosesNoAcks1Write(t *testing.T) {
	c := Start(t, Options{Brokers: 4})
	c.CreateTopic("moving-off", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("moving-off", 0).GetIsr()) == 3 })
	w := startAcks1Writers(c, "moving-off", 4)
	c.WaitFor(10*time.Second, "writes", func() bool { return w.count() >= 100 })
	const moves = 8
	for k := range moves {
		p := c.Partition("moving-off", 0)
		leader := p.GetLeader()
		var target []int32
		for id := int32(1); id <= 4; id++ {
			if id != leader {
				target = append(target, id)
			}
		}
		Reassign(t, c, "moving-off", map[int32][]int32{0: target})
		c.WaitFor(20*time.Second, fmt.Sprintf("move %d: off broker %d", k, leader), func() bool {
			p := c.Partition("moving-off", 0)
			return slices.Equal(p.GetReplicas(), target) && p.GetLeader() != leader && p.GetLeader() > 0
		})
		n := w.count()
		c.WaitFor(10*time.Second, "writes on the new leader", func() bool { return w.count() >= n+50 })
	}
	w.stopAndCheck(t, c, fmt.Sprintf("%d reassignments off the leader", moves), c.Partition("moving-off", 0).GetReplicas()...)
}
