package replica

import (
	"context"
	"testing"

	"tidemark.io/services/platform/kerr"
)

// A new leader whose high watermark lags behind the start of its epoch
// answers ListOffsets "latest" (and a timestamp past its HW) with
// OFFSET_NOT_AVAILABLE, as Kafka does: its HW is below what the old leader
// may already have exposed, so a consumer resetting to it would go back.
// Once a follower's fetch moves the HW to the epoch start it answers again.
func TestANewLeaderWithALaggingHighWatermarkHasNoLatestOffset(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	for _, v := range []string{"a", "b", "c"} {
		if _, err := e.m.Produce(context.Background(), tp0, 1, batch(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	if off, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1); err != nil || off != 0 {
		t.Fatalf("latest before any follower fetch: %d, %v; want the HW 0", off, err)
	}
	// Leadership goes to 2 and back: epoch 3 starts at 3, the HW is still 0.
	e.state(2, 2, 2, []int32{1, 2}, nil)
	e.state(1, 3, 3, []int32{1, 2}, nil)
	if _, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1); kerr.CodeOf(err) != kerr.OffsetNotAvailable {
		t.Fatalf("latest with the HW behind the epoch start: %v, want OFFSET_NOT_AVAILABLE", err)
	}
	if _, _, _, err := e.m.ListOffsets(tp0, OffsetTimestamp, 1<<50, -1); kerr.CodeOf(err) != kerr.OffsetNotAvailable {
		t.Fatalf("a timestamp past the HW with the HW behind the epoch start: %v, want OFFSET_NOT_AVAILABLE", err)
	}
	if off, _, _, err := e.m.ListOffsets(tp0, OffsetEarliest, 0, -1); err != nil || off != 0 {
		t.Fatalf("earliest: %d, %v", off, err)
	}
	a := e.m.ReplicaFetch(context.Background(), FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2],
		Partitions: []FollowerFetchPartition{{TP: tp0, FetchOffset: 3, CurrentLeaderEpoch: 3, LastFetchedEpoch: 1}}})
	if a[0].Err != nil {
		t.Fatal(a[0].Err)
	}
	if off, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1); err != nil || off != 3 {
		t.Fatalf("latest once the follower caught up: %d, %v; want 3", off, err)
	}
}
