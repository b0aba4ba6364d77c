package partition

import (
	"testing"

	"tidemark.io/services/platform/kerr"
)

// TestDivergingEpoch is F13 on the leader: epochs 0@0, 2@10, 4@20, LEO 30.
func TestDivergingEpoch(t *testing.T) {
	leader := newTestEpochs(30, "0@0,2@10,4@20")
	tests := []struct {
		name        string
		cache       *testEpochs
		lastEpoch   int32
		fetchOffset int64
		logStart    int64
		want        EpochEndOffset
		diverging   bool
		err         kerr.Code
	}{
		{name: "no last fetched epoch sent", cache: leader, lastEpoch: NoEpoch, fetchOffset: 99},
		{name: "latest epoch, inside", cache: leader, lastEpoch: 4, fetchOffset: 25},
		{name: "latest epoch, at LEO", cache: leader, lastEpoch: 4, fetchOffset: 30},
		{name: "older epoch, inside it", cache: leader, lastEpoch: 2, fetchOffset: 15},
		{name: "older epoch, at its end", cache: leader, lastEpoch: 2, fetchOffset: 20},
		{name: "older epoch, past its end", cache: leader, lastEpoch: 2, fetchOffset: 25,
			want: EpochEndOffset{Epoch: 2, EndOffset: 20}, diverging: true},
		{name: "epoch unknown to leader, inside the floor's end", cache: leader, lastEpoch: 3, fetchOffset: 18,
			want: EpochEndOffset{Epoch: 2, EndOffset: 20}, diverging: true},
		{name: "epoch unknown to leader, first epochs", cache: leader, lastEpoch: 1, fetchOffset: 5,
			want: EpochEndOffset{Epoch: 0, EndOffset: 10}, diverging: true},
		{name: "epoch newer than the leader's", cache: leader, lastEpoch: 5, fetchOffset: 30, err: kerr.OffsetOutOfRange},
		{name: "empty cache", cache: newTestEpochs(30, ""), lastEpoch: 1, fetchOffset: 3, err: kerr.OffsetOutOfRange},
		{name: "below log start", cache: leader, lastEpoch: 4, fetchOffset: 3, logStart: 5, err: kerr.OffsetOutOfRange},
		{name: "epoch older than the cache (deleted by retention)", cache: newTestEpochs(30, "2@10,4@20"),
			lastEpoch: 1, fetchOffset: 10, logStart: 10},
		{name: "epoch older than the cache, past the first start", cache: newTestEpochs(30, "2@10,4@20"),
			lastEpoch: 1, fetchOffset: 12, logStart: 10, want: EpochEndOffset{Epoch: 1, EndOffset: 10}, diverging: true},
		// F14: the follower then truncates fully and starts at the log start.
		{name: "epoch older than the cache, fetch below the log start", cache: newTestEpochs(30, "2@10,4@20"),
			lastEpoch: 1, fetchOffset: 6, logStart: 10, err: kerr.OffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, diverging, err := DivergingEpoch(tt.lastEpoch, tt.fetchOffset, tt.logStart, tt.cache)
			if kerr.CodeOf(err) != tt.err {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if diverging != tt.diverging || got != tt.want {
				t.Fatalf("got (%v, %t), want (%v, %t)", got, diverging, tt.want, tt.diverging)
			}
		})
	}
}

// TestDivergingFetchLeavesFollowerState checks that a diverging fetch is
// not recorded: the broker skips UpdateFollowerFetch, and CheckDivergence
// itself changes nothing.
func TestDivergingFetchLeavesFollowerState(t *testing.T) {
	p := New(Config{LocalID: 1}, LogState{LogEndOffset: 6})
	if _, err := p.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, 6, timeAt(0)); err != nil {
		t.Fatal(err)
	}
	before := p.Snapshot(timeAt(0))
	_, diverging, err := p.CheckDivergence(1, 5, newTestEpochs(6, "0@0,2@3"))
	if err != nil || !diverging {
		t.Fatalf("diverging %t, err %v", diverging, err)
	}
	if after := p.Snapshot(timeAt(0)); after.Followers[0] != before.Followers[0] {
		t.Fatalf("follower state changed: %+v -> %+v", before.Followers[0], after.Followers[0])
	}
}

// A follower truncated by an unclean election to the new leader's answer
// for its latest epoch (epoch 1 unknown to the leader: epoch 0 ends at 1)
// answers a consumer that read epoch 1 with that divergence, though its
// own cache no longer knows epoch 1 and holds nothing newer; only while it
// follows in the leader epoch the answer came in.
func TestFollowerAnswersTheLeadersEpochEndForAnEpochItLost(t *testing.T) {
	p := New(Config{LocalID: 2}, LogState{LogEndOffset: 6, HighWatermark: 6})
	follow := func(epoch int32) {
		t.Helper()
		if _, err := p.MakeFollower(LeaderAndISR{Leader: 3, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: []int32{3}}, 1, timeAt(0)); err != nil {
			t.Fatal(err)
		}
	}
	follow(2)
	cut := newTestEpochs(1, "0@0") // was 0@0,1@1 up to 6
	if _, _, err := p.CheckDivergence(1, 6, cut); kerr.CodeOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("before the leader's answer: error %v, want OFFSET_OUT_OF_RANGE (epoch 1 unknown)", err)
	}
	p.OnLeaderEpochEnd(1, EpochEndOffset{Epoch: 0, EndOffset: 1})
	for _, tt := range []struct {
		epoch  int32
		offset int64
		want   EpochEndOffset
		div    bool
		err    kerr.Code
	}{
		{epoch: 1, offset: 6, want: EpochEndOffset{Epoch: 0, EndOffset: 1}, div: true},
		{epoch: 1, offset: 1, want: EpochEndOffset{Epoch: 0, EndOffset: 1}, div: true}, // read on with epoch 0
		{epoch: 0, offset: 1},
		{epoch: 2, offset: 6, err: kerr.OffsetOutOfRange}, // newer than asked: the leader did not say
	} {
		got, div, err := p.CheckDivergence(tt.epoch, tt.offset, cut)
		if kerr.CodeOf(err) != tt.err || div != tt.div || got != tt.want {
			t.Errorf("epoch %d offset %d: (%v, %t, %v), want (%v, %t, %v)", tt.epoch, tt.offset, got, div, err, tt.want, tt.div, tt.err)
		}
	}
	follow(3)
	if _, _, err := p.CheckDivergence(1, 6, cut); kerr.CodeOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("in the next leader epoch: error %v, want the answer forgotten", err)
	}
}
