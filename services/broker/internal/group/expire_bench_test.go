package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
)

// BenchmarkExpireIdle is one coordinator tick (50 ms) of an idle
// coordinator holding 500 groups without members, 20 committed offsets
// each, none near expiry, with the default cleanup interval: the work
// expire does under the coordinator's lock while nothing happens.
func BenchmarkExpireIdle(b *testing.B) {
	h := newFakeHost(1)
	h.leads[0] = 1
	h.cleanupEvery = defaultCleanupEvery
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	c := New(Options{Host: h, Tick: time.Hour, Now: clock.Now})
	defer c.Close()
	s := &Service{C: c}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c.reconcile()
		if _, code := fetchErr(s, "g0"); code == kerr.None {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the offsets partition never loaded")
		}
		time.Sleep(time.Millisecond)
	}
	var parts []*groupv1.OffsetCommitPartition
	for p := range int32(20) {
		parts = append(parts, &groupv1.OffsetCommitPartition{Partition: p, CommittedOffset: 42})
	}
	for g := range 500 {
		if _, err := s.OffsetCommit(context.Background(), &groupv1.OffsetCommitRequest{GroupId: fmt.Sprintf("g%d", g), GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: parts}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		clock.advance(50 * time.Millisecond)
		c.expire()
	}
}
