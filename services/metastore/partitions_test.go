package metastore

import (
	"testing"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/platform/kerr"
)

func TestPartitionStateCompareAndSet(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	if _, err := sess.CreateTopic(ctx, simpleTopic("orders", 1)); err != nil {
		t.Fatal(err)
	}
	base, err := s.PartitionState(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if base.State.PartitionEpoch != 0 || base.State.ControllerEpoch != 1 {
		t.Fatalf("initial state = %+v", base.State)
	}

	// Two writers start from the same read; the first wins.
	shrink := PartitionUpdate{Current: base, Next: PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2}}}
	moveLeader := PartitionUpdate{Current: base, Next: PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}}}
	won, err := sess.UpdatePartitionState(ctx, shrink)
	if err != nil {
		t.Fatal(err)
	}
	if won.State.PartitionEpoch != 1 || won.ModRevision <= base.ModRevision {
		t.Fatalf("winning write = %+v, want partition epoch 1 and a newer revision", won)
	}
	_, err = sess.UpdatePartitionState(ctx, moveLeader)
	wantCode(t, err, kerr.InvalidUpdateVersion)

	now, err := s.PartitionState(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if now.ModRevision != won.ModRevision || now.State.Leader != 1 || len(now.State.ISR) != 2 || now.State.PartitionEpoch != 1 {
		t.Fatalf("stored state = %+v, want the winning write %+v", now, won)
	}

	// Building on the winner's record succeeds and bumps the epoch again.
	again, err := sess.UpdatePartitionState(ctx, PartitionUpdate{Current: now, Next: moveLeader.Next})
	if err != nil || again.State.PartitionEpoch != 2 {
		t.Fatalf("update from fresh read = %+v, %v", again, err)
	}
}

func TestLargeTopicAndBatchUpdatesSplitIntoTransactions(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	const n = 300 // more than two transactions' worth at 128 ops
	created, err := sess.CreateTopic(ctx, simpleTopic("wide", n))
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Partitions) != n {
		t.Fatalf("created %d partition states, want %d", len(created.Partitions), n)
	}
	topic, err := s.Topic(ctx, "wide")
	if err != nil {
		t.Fatal(err)
	}
	if len(topic.Partitions) != n || len(topic.Assignment.Partitions) != n {
		t.Fatalf("read back %d states and %d assignments", len(topic.Partitions), len(topic.Assignment.Partitions))
	}

	updates := make([]PartitionUpdate, 0, n)
	for p := range int32(n) {
		cur := topic.Partitions[p]
		updates = append(updates, PartitionUpdate{Current: cur,
			Next: PartitionState{Leader: cur.State.ISR[1], LeaderEpoch: 1, ISR: cur.State.ISR[1:]}})
	}
	// Make three of them stale: they must be reported, the rest written.
	stale := map[int32]bool{5: true, 140: true, 299: true}
	for p := range stale {
		if _, err := sess.UpdatePartitionState(ctx, updates[p]); err != nil {
			t.Fatal(err)
		}
	}
	res, err := sess.UpdatePartitionStates(ctx, updates)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Updated) != n-len(stale) || len(res.Conflicts) != len(stale) {
		t.Fatalf("updated %d, conflicts %d", len(res.Updated), len(res.Conflicts))
	}
	for _, c := range res.Conflicts {
		if !stale[c.Partition] || c.Current == nil || c.Current.State.PartitionEpoch != 1 {
			t.Errorf("unexpected conflict %+v", c)
		}
		wantCode(t, c.Err(), kerr.InvalidUpdateVersion)
	}
	after, err := s.Topic(ctx, "wide")
	if err != nil {
		t.Fatal(err)
	}
	for p, rec := range after.Partitions {
		if rec.State.PartitionEpoch != 1 || rec.State.LeaderEpoch != 1 {
			t.Fatalf("partition %d = %+v, want partition and leader epoch 1", p, rec.State)
		}
	}
}

func TestBatchRejectsDuplicatesAndInitialisesMissingStates(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	if _, err := sess.CreateTopic(ctx, simpleTopic("t", 2)); err != nil {
		t.Fatal(err)
	}
	rec, err := s.PartitionState(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	u := PartitionUpdate{Current: rec, Next: rec.State}
	_, err = sess.UpdatePartitionStates(ctx, []PartitionUpdate{u, u})
	wantCode(t, err, kerr.InvalidRequest)

	// ModRevision 0 creates a state that does not exist, and only then.
	fresh := PartitionUpdate{Current: PartitionRecord{Topic: "t", Partition: 7}, Next: PartitionState{Leader: 1, ISR: []int32{1}}}
	got, err := sess.UpdatePartitionState(ctx, fresh)
	if err != nil || got.State.PartitionEpoch != 0 {
		t.Fatalf("initialise = %+v, %v", got, err)
	}
	_, err = sess.UpdatePartitionState(ctx, fresh)
	wantCode(t, err, kerr.InvalidUpdateVersion)
}

func TestSmallMaxTxnOpsStillWorks(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.WithMaxTxnOps(16))
	s, err := New(srv.Client(t), Options{MaxTxnOps: 16})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	topic := simpleTopic("t", 40)
	topic.Config = map[string]string{"cleanup.policy": "delete"}
	if _, err := sess.CreateTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	got, err := s.Topic(ctx, "t")
	if err != nil || len(got.Partitions) != 40 || got.Config["cleanup.policy"] != "delete" {
		t.Fatalf("topic = %+v, %v", got, err)
	}
	var updates []PartitionUpdate
	for _, rec := range got.Partitions {
		updates = append(updates, PartitionUpdate{Current: rec, Next: rec.State})
	}
	res, err := sess.UpdatePartitionStates(ctx, updates)
	if err != nil || len(res.Updated) != 40 {
		t.Fatalf("batch = %d updated, %v", len(res.Updated), err)
	}
}
