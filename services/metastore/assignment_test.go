package metastore

import (
	"slices"
	"testing"

	"tidemark.io/services/platform/kerr"
)

// A reassignment step writes the assignment and a state together; a stale
// read of either writes nothing, and a superseded controller is fenced.
func TestUpdateAssignmentIsOneFencedCompareAndSet(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	created, err := sess.CreateTopic(ctx, simpleTopic("mv", 1))
	if err != nil {
		t.Fatal(err)
	}
	asg := created.Assignment
	asg.Partitions = map[int32][]int32{0: {2, 3, 4, 1}}
	asg.AddingReplicas = map[int32][]int32{0: {4}}
	asg.RemovingReplicas = map[int32][]int32{0: {1}}
	cur := created.Partitions[0]
	next := cur.State
	next.LeaderEpoch++
	res, err := sess.UpdateAssignment(ctx, AssignmentUpdate{Topic: "mv", ModRevision: created.ModRevision, Assignment: asg,
		States: []PartitionUpdate{{Current: cur, Next: next}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Topic(ctx, "mv")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Assignment.AddingReplicas[0], []int32{4}) || !slices.Equal(got.Assignment.Partitions[0], []int32{2, 3, 4, 1}) ||
		got.ModRevision != res.ModRevision || got.Partitions[0].State.LeaderEpoch != next.LeaderEpoch ||
		got.Partitions[0].State.PartitionEpoch != cur.State.PartitionEpoch+1 || got.Assignment.TopicID != created.Assignment.TopicID {
		t.Fatalf("read back %+v", got)
	}

	// The same update again names revisions that moved on.
	_, err = sess.UpdateAssignment(ctx, AssignmentUpdate{Topic: "mv", ModRevision: created.ModRevision, Assignment: asg})
	wantCode(t, err, kerr.InvalidUpdateVersion)
	_, err = sess.UpdateAssignment(ctx, AssignmentUpdate{Topic: "mv", ModRevision: res.ModRevision, Assignment: asg,
		States: []PartitionUpdate{{Current: cur, Next: next}}})
	wantCode(t, err, kerr.InvalidUpdateVersion)
	if again, _ := s.Topic(ctx, "mv"); again.ModRevision != res.ModRevision {
		t.Fatalf("a refused update wrote: %+v", again)
	}

	// A new controller fences the old one's writes.
	if err := sess.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	sess2 := elect(t, ctx, s, 2, longTTL)
	_, err = sess.UpdateAssignment(ctx, AssignmentUpdate{Topic: "mv", ModRevision: res.ModRevision, Assignment: created.Assignment})
	wantMoved(t, err)
	if _, err := sess2.UpdateAssignment(ctx, AssignmentUpdate{Topic: "mv", ModRevision: res.ModRevision, Assignment: created.Assignment}); err != nil {
		t.Fatal(err)
	}
}
