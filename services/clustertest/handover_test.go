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

	stop := make(chan struct{})
	var mu sync.Mutex
	var acked []string
	refused := 0
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := c.Produce(ctx, "handover", 0, 1, v)
				cancel()
				mu.Lock()
				if err == nil {
					acked = append(acked, v)
				} else {
					refused++
				}
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	c.WaitFor(10*time.Second, "writes", func() bool { return count() >= 100 })

	const moves = 12
	for k := range moves {
		reps := c.Partition("handover", 0).GetReplicas()
		next := append(slices.Clone(reps[1:]), reps[0])
		reassign(t, c, "handover", map[int32][]int32{0: next})
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
		n := count()
		c.WaitFor(10*time.Second, "writes on the new leader", func() bool { return count() >= n+50 })
	}
	close(stop)
	wg.Wait()

	var leo int64
	c.WaitFor(15*time.Second, "HW = LEO on every replica", func() bool {
		for id := int32(1); id <= 3; id++ {
			hw, end, ok := c.Broker(id).ReplicaOffsets("handover", 0)
			if !ok || hw != end || (id > 1 && end != leo) {
				return false
			}
			leo = end
		}
		return true
	})
	final := c.SameLogs("handover", 0, 1, 2, 3)
	have := make(map[string]bool, len(final))
	for _, v := range final {
		have[v] = true
	}
	lost := 0
	for _, v := range acked {
		if !have[v] {
			lost++
		}
	}
	t.Logf("%d moves: %d acks=1 writes acknowledged, %d attempts refused (each writer goes on with its next record at once), %d records in every replica, %d acknowledged lost",
		moves, len(acked), refused, len(final), lost)
	if lost > 0 {
		t.Errorf("%d acknowledged acks=1 writes lost across %d preferred elections", lost, moves)
	}
}
