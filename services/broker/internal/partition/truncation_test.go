package partition

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func timeAt(ms int64) time.Time { return time.UnixMilli(ms) }

// TestTruncationFor is one step of F12's decision (getOffsetTruncationState).
func TestTruncationFor(t *testing.T) {
	tests := []struct {
		name     string
		follower string // epoch cache
		leo, hw  int64
		leader   EpochEndOffset
		want     Truncation
	}{
		{"leader end unknown: fall back to HW", "0@0,1@5", 8, 4,
			EpochEndOffset{Epoch: 1, EndOffset: UndefinedOffset}, Truncation{Offset: 4, Done: true}},
		{"leader sent no epoch (pre-KIP-279)", "0@0,1@5", 8, 4,
			EpochEndOffset{Epoch: UndefinedEpoch, EndOffset: 6}, Truncation{Offset: 6, Done: true}},
		{"leader sent no epoch, end past LEO", "0@0,1@5", 8, 4,
			EpochEndOffset{Epoch: UndefinedEpoch, EndOffset: 12}, Truncation{Offset: 8, Done: true}},
		{"same epoch, leader ends earlier", "0@0,1@5", 8, 4,
			EpochEndOffset{Epoch: 1, EndOffset: 7}, Truncation{Offset: 7, Done: true}},
		{"same epoch, follower ends earlier", "0@0,1@5,3@7", 9, 4,
			EpochEndOffset{Epoch: 1, EndOffset: 8}, Truncation{Offset: 7, Done: true}},
		{"same epoch, nothing to cut", "0@0,1@5", 8, 4,
			EpochEndOffset{Epoch: 1, EndOffset: 20}, Truncation{Offset: 8, Done: true}},
		{"leader epoch unknown here: cut to our older epoch's end and ask again", "0@0,2@5", 8, 4,
			EpochEndOffset{Epoch: 1, EndOffset: 6}, Truncation{Offset: 5, Done: false}},
		// endOffsetFor answers (epoch, start of our first epoch) for an epoch
		// older than the whole cache: nothing before 5 is known to differ.
		{"leader's epoch older than our whole cache", "3@5", 8, 4,
			EpochEndOffset{Epoch: 2, EndOffset: 6}, Truncation{Offset: 5, Done: true}},
		{"empty local cache", "", 8, 4,
			EpochEndOffset{Epoch: 2, EndOffset: 6}, Truncation{Offset: 6, Done: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TruncationFor(tt.leader, newTestEpochs(tt.leo, tt.follower), tt.leo, tt.hw)
			if got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestKIP279TruncationLoop runs the follower/leader exchange to the end:
// the follower asks with its latest epoch, the leader answers from its cache
// (endOffsetFor), and the follower truncates until the logs agree. It covers
// fast back-to-back leader changes (KAFKA-6361) where the follower holds
// epochs the leader never saw.
func TestKIP279TruncationLoop(t *testing.T) {
	tests := []struct {
		name           string
		leader         string
		leaderLEO      int64
		follower       string
		followerLEO    int64
		followerHW     int64
		wantTruncateTo []int64
		wantLEO        int64
	}{
		{
			name:   "logs agree",
			leader: "0@0,1@5", leaderLEO: 10,
			follower: "0@0,1@5", followerLEO: 8, followerHW: 4,
			wantTruncateTo: []int64{8}, wantLEO: 8,
		},
		{
			// The follower led epoch 1 alone and wrote 3..5; the leader
			// started epoch 2 at 3.
			name:   "follower has an epoch the leader never saw",
			leader: "0@0,2@3", leaderLEO: 9,
			follower: "0@0,1@3", followerLEO: 6, followerHW: 2,
			wantTruncateTo: []int64{3}, wantLEO: 3,
		},
		{
			// Follower epochs 0@0, 2@10 (LEO 20); the leader has 0@0, 1@8,
			// 3@15. Asking for 2, the leader answers (1, 15): epoch 1 is
			// unknown to the follower, whose epoch 0 ends at 10; truncate
			// to 10 and ask for 0; the leader's epoch 0 ends at 8.
			name:   "leader answers with an epoch the follower lacks (two rounds)",
			leader: "0@0,1@8,3@15", leaderLEO: 30,
			follower: "0@0,2@10", followerLEO: 20, followerHW: 5,
			wantTruncateTo: []int64{10, 8}, wantLEO: 8,
		},
		{
			// A leader's latest epoch is never older than a follower's: it
			// records its own epoch at election (KAFKA-7415).
			name:   "four rounds down an interleaved history",
			leader: "0@0,1@4,3@8,5@12,7@16", leaderLEO: 20,
			follower: "0@0,2@6,4@10,6@14", followerLEO: 18, followerHW: 3,
			wantTruncateTo: []int64{14, 10, 6, 4}, wantLEO: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leader := newTestEpochs(tt.leaderLEO, tt.leader)
			leo := tt.followerLEO
			follower := &testEpochs{leo: func() int64 { return leo }}
			if err := follower.set(tt.follower); err != nil {
				t.Fatal(err)
			}
			var cuts []int64
			for round := 0; ; round++ {
				if round == 10 {
					t.Fatalf("no agreement after %d rounds: %v", round, cuts)
				}
				e, end := leader.EndOffsetFor(follower.LatestEpoch())
				tr := TruncationFor(EpochEndOffset{Epoch: e, EndOffset: end}, follower, leo, tt.followerHW)
				cuts = append(cuts, tr.Offset)
				leo = min(leo, tr.Offset)
				follower.truncateFromEnd(leo)
				if tr.Done {
					break
				}
			}
			if !slices.Equal(cuts, tt.wantTruncateTo) || leo != tt.wantLEO {
				t.Fatalf("truncations %v to LEO %d, want %v to %d", cuts, leo, tt.wantTruncateTo, tt.wantLEO)
			}
			// The logs now agree: the leader sees no divergence.
			_, diverging, err := DivergingEpoch(follower.LatestEpoch(), leo, 0, leader)
			if err != nil || diverging {
				t.Fatalf("after truncation: diverging %t, err %v", diverging, err)
			}
		})
	}
}

// TestOutOfRange is F14.
func TestOutOfRange(t *testing.T) {
	tests := []struct {
		followerLEO, leaderLEO, leaderStart int64
		want                                OutOfRangeAction
	}{
		// An unclean leader with a shorter log.
		{followerLEO: 10, leaderLEO: 7, leaderStart: 0, want: OutOfRangeAction{TruncateToLeaderEnd, 7}},
		{followerLEO: 10, leaderLEO: 7, leaderStart: 8, want: OutOfRangeAction{TruncateToLeaderEnd, 7}},
		// Retention moved the leader's start past our end.
		{followerLEO: 10, leaderLEO: 50, leaderStart: 20, want: OutOfRangeAction{TruncateFully, 20}},
		// Otherwise keep the log and fetch from max(leader start, our LEO).
		{followerLEO: 10, leaderLEO: 50, leaderStart: 10, want: OutOfRangeAction{ResumeAt, 10}},
		{followerLEO: 10, leaderLEO: 50, leaderStart: 3, want: OutOfRangeAction{ResumeAt, 10}},
		{followerLEO: 10, leaderLEO: 10, leaderStart: 0, want: OutOfRangeAction{ResumeAt, 10}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("follower %d leader %d start %d", tt.followerLEO, tt.leaderLEO, tt.leaderStart), func(t *testing.T) {
			if got := OutOfRange(tt.followerLEO, tt.leaderLEO, tt.leaderStart); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestISRChangeLine(t *testing.T) {
	if got := ISRChangeLine(ShrinkISR, []int32{1, 2, 3}, []int32{1, 2}); got != "Shrinking ISR from 1,2,3 to 1,2" {
		t.Fatal(got)
	}
	if got := ISRChangeLine(ExpandISR, []int32{1, 2}, []int32{1, 2, 3}); got != "Expanding ISR from 1,2 to 1,2,3" {
		t.Fatal(got)
	}
}
