package metastore

import (
	"testing"
	"time"

	"tidemark.io/services/platform/kerr"
)

func TestCreateTopicTwiceAndDelete(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)

	nt := simpleTopic("orders", 3)
	nt.Config = map[string]string{"min.insync.replicas": "2"}
	created, err := sess.CreateTopic(ctx, nt)
	if err != nil {
		t.Fatal(err)
	}
	if created.Assignment.TopicID == "" || created.Assignment.Version != 1 {
		t.Fatalf("assignment = %+v", created.Assignment)
	}
	_, err = sess.CreateTopic(ctx, simpleTopic("orders", 1))
	wantCode(t, err, kerr.TopicAlreadyExists)

	got, err := s.Topic(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got.Assignment.TopicID != created.Assignment.TopicID || len(got.Partitions) != 3 ||
		got.Config["min.insync.replicas"] != "2" || got.Partitions[1].State.Leader != 2 {
		t.Fatalf("read back %+v", got)
	}

	if err := sess.MarkTopicForDeletion(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	topics, _, err := s.Topics(ctx)
	if err != nil || topics["orders"] == nil || topics["orders"].Deletion == nil {
		t.Fatalf("topics = %+v, %v", topics, err)
	}
	if err := sess.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, sess.DeleteTopic(ctx, "orders"), kerr.UnknownTopicOrPartition)
	_, err = s.Topic(ctx, "orders")
	wantCode(t, err, kerr.UnknownTopicOrPartition)
	snap, err := s.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range snap.Entries {
		if e.Kind == KindTopic || e.Kind == KindPartitionState || e.Kind == KindTopicConfig || e.Kind == KindTopicDeletion {
			t.Fatalf("left behind after delete: %s", e.Key)
		}
	}
	// The name is free again.
	if _, err := sess.CreateTopic(ctx, simpleTopic("orders", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestCreateTopicValidates(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	bad := func(mut func(*NewTopic)) error {
		nt := simpleTopic("ok", 2)
		mut(&nt)
		_, err := sess.CreateTopic(ctx, nt)
		return err
	}
	wantCode(t, bad(func(n *NewTopic) { n.Name = "a/b" }), kerr.InvalidTopicException)
	wantCode(t, bad(func(n *NewTopic) { n.Name = ".." }), kerr.InvalidTopicException)
	wantCode(t, bad(func(n *NewTopic) { n.Replicas = nil }), kerr.InvalidPartitions)
	wantCode(t, bad(func(n *NewTopic) { n.Replicas[5] = n.Replicas[1]; delete(n.Replicas, 1) }), kerr.InvalidPartitions)
	wantCode(t, bad(func(n *NewTopic) { n.Replicas[0] = []int32{1, 1} }), kerr.InvalidReplicaAssignment)
	wantCode(t, bad(func(n *NewTopic) { delete(n.States, 0) }), kerr.InvalidRequest)
	wantCode(t, bad(func(n *NewTopic) { n.States[0] = PartitionState{Leader: 9, ISR: []int32{9}} }), kerr.InvalidRequest)
	// A name that would address another key is refused everywhere.
	if _, err := sess.CreateTopic(ctx, simpleTopic("a", 1)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, sess.DeleteTopic(ctx, "a/partitions/0/state"), kerr.InvalidTopicException)
	_, err := s.PartitionState(ctx, "a/partitions", 0)
	wantCode(t, err, kerr.InvalidTopicException)
}

func TestConfigsAndConfigWatch(t *testing.T) {
	_, s := startStore(t)
	ctx := testCtx(t)
	sess := elect(t, ctx, s, 1, longTTL)
	cl, err := s.LoadCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watch := s.WatchConfigs(ctx, cl.Revision+1)

	wantCode(t, sess.PutTopicConfig(ctx, "nope", map[string]string{"a": "b"}), kerr.UnknownTopicOrPartition)
	wantCode(t, sess.PutBrokerConfig(ctx, "x", map[string]string{"a": "b"}), kerr.InvalidRequest)
	if _, err := sess.CreateTopic(ctx, simpleTopic("t", 1)); err != nil {
		t.Fatal(err)
	}
	if err := sess.PutTopicConfig(ctx, "t", map[string]string{"retention.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	if err := sess.PutBrokerConfig(ctx, DefaultBrokerEntity, map[string]string{"log.retention.hours": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := sess.PutBrokerConfig(ctx, BrokerEntity(3), map[string]string{"x": "y"}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.TopicConfig(ctx, "t"); err != nil || c["retention.ms"] != "60000" {
		t.Fatalf("topic config = %v, %v", c, err)
	}
	if c, err := s.BrokerConfig(ctx, DefaultBrokerEntity); err != nil || c["log.retention.hours"] != "1" {
		t.Fatalf("default broker config = %v, %v", c, err)
	}
	if err := sess.DeleteBrokerConfig(ctx, "3"); err != nil {
		t.Fatal(err)
	}
	if err := sess.DeleteTopicConfig(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if c, err := s.TopicConfig(ctx, "t"); err != nil || len(c) != 0 {
		t.Fatalf("deleted topic config = %v, %v", c, err)
	}

	type seen struct {
		kind   Kind
		typ    EventType
		entity string
	}
	want := []seen{{KindTopicConfig, EventPut, ""}, {KindBrokerConfig, EventPut, DefaultBrokerEntity},
		{KindBrokerConfig, EventPut, "3"}, {KindBrokerConfig, EventDelete, "3"}, {KindTopicConfig, EventDelete, ""}}
	var got []seen
	for len(got) < len(want) {
		select {
		case wr := <-watch:
			if wr.Err != nil {
				t.Fatal(wr.Err)
			}
			for _, ev := range wr.Events {
				got = append(got, seen{ev.Kind, ev.Type, ev.Entity})
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("config events = %+v", got)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("config events = %+v, want %+v", got, want)
		}
	}
}
