package partition

import "testing"

// A leader is vouched for only while every other member of its maximal
// ISR keeps fetching from it; a sole ISR member has nobody to vouch.
func TestInSyncFollowersFetchedSince(t *testing.T) {
	p := New(Config{LocalID: 1}, LogState{LogEndOffset: 6})
	if _, err := p.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, 6, timeAt(1000)); err != nil {
		t.Fatal(err)
	}
	fetch := func(id int32, ms int64) {
		t.Helper()
		if _, err := p.UpdateFollowerFetch(FollowerFetch{ReplicaID: id, BrokerEpoch: NoEpoch, FetchOffset: 6, LogStartOffset: 0, LeaderLEO: 6}, timeAt(ms)); err != nil {
			t.Fatal(err)
		}
	}
	fetch(2, 2000)
	fetch(3, 2500)
	if !p.InSyncFollowersFetchedSince(2000) {
		t.Error("both followers fetched since 2000, yet not vouched")
	}
	if p.InSyncFollowersFetchedSince(2100) {
		t.Error("follower 2 last fetched at 2000, yet vouched since 2100")
	}
	fetch(2, 3000)
	if !p.InSyncFollowersFetchedSince(2500) {
		t.Error("both followers fetched since 2500, yet not vouched")
	}

	// Only the leader in the ISR: nobody vouches.
	q := New(Config{LocalID: 1}, LogState{LogEndOffset: 6})
	if _, err := q.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1}}, 6, timeAt(1000)); err != nil {
		t.Fatal(err)
	}
	if q.InSyncFollowersFetchedSince(0) {
		t.Error("a sole ISR member vouched for")
	}
	// A follower is not vouched for.
	f := New(Config{LocalID: 2}, LogState{LogEndOffset: 6})
	if _, err := f.MakeFollower(LeaderAndISR{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, 6, timeAt(1000)); err != nil {
		t.Fatal(err)
	}
	if f.InSyncFollowersFetchedSince(0) {
		t.Error("a follower vouched for as leader")
	}
}
