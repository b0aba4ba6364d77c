package partition

import (
	"testing"

	"tidemark.io/services/platform/kerr"
)

// deleteLeader is broker 1 leading replicas 1, 2, 3 at HW = LEO = 10.
func deleteLeader(t *testing.T) *Partition {
	t.Helper()
	p := New(Config{LocalID: 1}, LogState{LogEndOffset: 10, HighWatermark: 10})
	if _, err := p.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, 10, timeAt(0)); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDeleteRecordsOffset(t *testing.T) {
	p := deleteLeader(t)
	for _, c := range []struct {
		offset, want int64
		code         kerr.Code
	}{
		{offset: -1, want: 10},
		{offset: 0, want: 0},
		{offset: 7, want: 7},
		{offset: 10, want: 10},
		{offset: 11, code: kerr.OffsetOutOfRange},
		{offset: -2, code: kerr.OffsetOutOfRange},
	} {
		got, err := p.DeleteRecordsOffset(c.offset)
		if kerr.CodeOf(err) != c.code || (err == nil && got != c.want) {
			t.Errorf("offset %d: got %d, %v; want %d, code %v", c.offset, got, err, c.want, c.code)
		}
	}
	f := New(Config{LocalID: 2}, LogState{LogEndOffset: 10})
	if _, err := f.MakeFollower(LeaderAndISR{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, 10, timeAt(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DeleteRecordsOffset(5); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if _, err := f.LowWatermark(nil); kerr.CodeOf(err) != kerr.NotLeaderOrFollower {
		t.Fatalf("follower low watermark: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}

// TestLowWatermarkFollowsTheSlowestLiveReplica: the low watermark is the
// least log start of the leader and its live followers; one that has not
// fetched holds it at -1, and a dead broker's replica does not count.
func TestLowWatermarkFollowsTheSlowestLiveReplica(t *testing.T) {
	p := deleteLeader(t)
	p.SetLogStartOffset(6)
	alive := map[int32]bool{2: true, 3: true}
	isAlive := func(id int32) bool { return alive[id] }
	low := func() int64 {
		t.Helper()
		lw, err := p.LowWatermark(isAlive)
		if err != nil {
			t.Fatal(err)
		}
		return lw
	}
	if got := low(); got != UndefinedOffset {
		t.Fatalf("before any fetch: %d, want %d", got, UndefinedOffset)
	}
	fetch := func(id int32, logStart int64) FetchOutcome {
		t.Helper()
		out, err := p.UpdateFollowerFetch(FollowerFetch{ReplicaID: id, BrokerEpoch: NoEpoch, FetchOffset: 10, LogStartOffset: logStart, LeaderLEO: 10}, timeAt(1))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if !fetch(2, 6).LogStartMoved {
		t.Fatal("a follower's first log start is a move")
	}
	fetch(3, 2)
	if got := low(); got != 2 {
		t.Fatalf("low watermark %d, want 2", got)
	}
	if fetch(3, 2).LogStartMoved {
		t.Fatal("the same log start again is no move")
	}
	if !fetch(3, 6).LogStartMoved {
		t.Fatal("a raised log start is a move")
	}
	if got := low(); got != 6 {
		t.Fatalf("low watermark %d, want 6", got)
	}
	fetch(3, 4) // a follower that restarted from an older checkpoint
	alive[3] = false
	if got := low(); got != 6 {
		t.Fatalf("with broker 3 dead: %d, want 6", got)
	}
}
