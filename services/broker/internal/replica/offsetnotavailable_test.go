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
	if off, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1, ConsumerReplicaID); err != nil || off != 0 {
		t.Fatalf("latest before any follower fetch: %d, %v; want the HW 0", off, err)
	}
	// Leadership goes to 2 and back: epoch 3 starts at 3, the HW is still 0.
	e.state(2, 2, 2, []int32{1, 2}, nil)
	e.state(1, 3, 3, []int32{1, 2}, nil)
	if _, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1, ConsumerReplicaID); kerr.CodeOf(err) != kerr.OffsetNotAvailable {
		t.Fatalf("latest with the HW behind the epoch start: %v, want OFFSET_NOT_AVAILABLE", err)
	}
	if _, _, _, err := e.m.ListOffsets(tp0, OffsetTimestamp, 1<<50, -1, ConsumerReplicaID); kerr.CodeOf(err) != kerr.OffsetNotAvailable {
		t.Fatalf("a timestamp past the HW with the HW behind the epoch start: %v, want OFFSET_NOT_AVAILABLE", err)
	}
	if off, _, _, err := e.m.ListOffsets(tp0, OffsetEarliest, 0, -1, ConsumerReplicaID); err != nil || off != 0 {
		t.Fatalf("earliest: %d, %v", off, err)
	}
	a := e.m.ReplicaFetch(context.Background(), FollowerFetch{ReplicaID: 2, BrokerEpoch: brokerEpochs[2],
		Partitions: []FollowerFetchPartition{{TP: tp0, FetchOffset: 3, CurrentLeaderEpoch: 3, LastFetchedEpoch: 1}}})
	if a[0].Err != nil {
		t.Fatal(a[0].Err)
	}
	if off, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1, ConsumerReplicaID); err != nil || off != 3 {
		t.Fatalf("latest once the follower caught up: %d, %v; want 3", off, err)
	}
}

// As Kafka's fetchOffset, only a client's ListOffsets (replica id -1) is
// bounded by the HW and waits for a lagging one: a broker's (its id) or a
// debugging tool's (-2) sees the log up to its end, and -2 is answered by a
// follower too.
func TestListOffsetsBoundDependsOnReplicaID(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	if _, err := e.m.Produce(context.Background(), tp0, 1, batch("a", "b", "c"), 0); err != nil {
		t.Fatal(err)
	}
	// Timestamps are 1: the lookup for 1 finds offset 0, the maximum too.
	for _, c := range []struct {
		replicaID    int32
		latest, at1  int64
		maxTimestamp int64
	}{{ConsumerReplicaID, 0, -1, -1}, {2, 3, 0, 0}, {DebuggingReplicaID, 3, 0, 0}} {
		if off, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1, c.replicaID); err != nil || off != c.latest {
			t.Fatalf("replica %d latest: %d, %v; want %d", c.replicaID, off, err, c.latest)
		}
		if off, _, _, err := e.m.ListOffsets(tp0, OffsetTimestamp, 1, -1, c.replicaID); err != nil || off != c.at1 {
			t.Fatalf("replica %d timestamp 1: %d, %v; want %d", c.replicaID, off, err, c.at1)
		}
		if off, _, _, err := e.m.ListOffsets(tp0, OffsetMaxTimestamp, 0, -1, c.replicaID); err != nil || off != c.maxTimestamp {
			t.Fatalf("replica %d max timestamp: %d, %v; want %d", c.replicaID, off, err, c.maxTimestamp)
		}
	}
	// Leadership goes to 2 and back: the HW lags the epoch start, which
	// holds back only a client's lookup.
	e.state(2, 2, 2, []int32{1, 2}, nil)
	if off, _, _, err := e.m.ListOffsets(tp0, OffsetEarliest, 0, -1, DebuggingReplicaID); err != nil || off != 0 {
		t.Fatalf("debugging earliest on a follower: %d, %v; want 0", off, err)
	}
	if _, _, _, err := e.m.ListOffsets(tp0, OffsetEarliest, 0, -1, 2); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("a broker's lookup on a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	e.state(1, 3, 3, []int32{1, 2}, nil)
	if _, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1, ConsumerReplicaID); kerr.CodeOf(err) != kerr.OffsetNotAvailable {
		t.Fatalf("client latest with a lagging HW: %v, want OFFSET_NOT_AVAILABLE", err)
	}
	if off, _, _, err := e.m.ListOffsets(tp0, OffsetLatest, 0, -1, 2); err != nil || off != 3 {
		t.Fatalf("broker latest with a lagging HW: %d, %v; want the LEO 3", off, err)
	}
}
