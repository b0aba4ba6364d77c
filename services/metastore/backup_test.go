package metastore

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestBackupRestoreIntoAnEmptyPrefix: a backup holds the durable keys
// (not the lease-bound registrations); restored under an empty prefix it
// loads as the same cluster with every epoch raised by the bump and the
// producer id block moved on; a second restore onto the now full prefix is
// refused and writes nothing.
func TestBackupRestoreIntoAnEmptyPrefix(t *testing.T) {
	ctx := testCtx(t)
	srv, s := startStore(t)
	id, err := s.EnsureClusterID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sess := elect(t, ctx, s, 1, longTTL)
	if _, err := sess.CreateTopic(ctx, simpleTopic("orders", 3)); err != nil {
		t.Fatal(err)
	}
	if err := sess.PutTopicConfig(ctx, "orders", map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AllocateProducerIDBlock(ctx); err != nil {
		t.Fatal(err)
	}
	reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: 1, Address: "127.0.0.1:9092"}, longTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	before, err := s.LoadCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}

	b, err := s.Backup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range b.Entries {
		kinds = append(kinds, e.Kind)
		if e.Kind == KindBroker.String() || e.Kind == KindController.String() || e.Kind == KindControllerNode.String() {
			t.Errorf("the backup holds the lease-bound key %s", e.Key)
		}
	}
	for _, want := range []string{"cluster_id", "controller_epoch", "topic", "partition_state", "topic_config", "producer_id_block"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("the backup has no %s key (kinds %v)", want, kinds)
		}
	}
	// Through JSON, as the CLI writes it.
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var read Backup
	if err := json.Unmarshal(raw, &read); err != nil {
		t.Fatal(err)
	}

	restored, err := New(srv.Client(t), Options{Prefix: "/restored"})
	if err != nil {
		t.Fatal(err)
	}
	const bump = 1000
	n, err := restored.Restore(ctx, read, bump)
	if err != nil || n != len(b.Entries) {
		t.Fatalf("restore wrote %d of %d keys: %v", n, len(b.Entries), err)
	}
	after, err := restored.LoadCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.ClusterID != id || after.ControllerEpoch != before.ControllerEpoch+bump {
		t.Fatalf("restored cluster id %q epoch %d; want %q and %d", after.ClusterID, after.ControllerEpoch, id, before.ControllerEpoch+bump)
	}
	if after.NextProducerID != before.NextProducerID+bump*ProducerIDBlockSize {
		t.Fatalf("restored next producer id %d, want %d", after.NextProducerID, before.NextProducerID+bump*ProducerIDBlockSize)
	}
	if len(after.Brokers) != 0 || after.Controller != nil {
		t.Fatalf("restore brought back registrations: brokers %v, controller %v", after.Brokers, after.Controller)
	}
	bt, at := before.Topics["orders"], after.Topics["orders"]
	if at == nil || at.Assignment.TopicID != bt.Assignment.TopicID || at.Config["min.insync.replicas"] != "2" {
		t.Fatalf("restored topic %+v, want %+v", at, bt)
	}
	for p, rec := range bt.Partitions {
		got, want := at.Partitions[p].State, rec.State
		want.LeaderEpoch += bump
		want.PartitionEpoch += bump
		want.ControllerEpoch += bump
		if got.Leader != want.Leader || !slices.Equal(got.ISR, want.ISR) || got.LeaderEpoch != want.LeaderEpoch ||
			got.PartitionEpoch != want.PartitionEpoch || got.ControllerEpoch != want.ControllerEpoch {
			t.Errorf("partition %d restored as %+v, want %+v", p, got, want)
		}
	}

	if _, err := restored.Restore(ctx, read, bump); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("a second restore onto the full prefix: %v, want a refusal", err)
	}
	if _, err := restored.Restore(ctx, Backup{Format: "something else", Version: 1}, 0); err == nil {
		t.Fatal("restoring a file that is not a backup succeeded")
	}
}

// A backup taken before the first producer id block has no block key; the
// restored cluster must still start past the blocks the bump covers, or the
// ids handed out after the backup come again.
func TestRestoreWithoutProducerIDBlockBumpsFromZero(t *testing.T) {
	ctx := testCtx(t)
	srv, s := startStore(t)
	if _, err := s.EnsureClusterID(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := s.Backup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := s.AllocateProducerIDBlock(ctx) // after the backup
	if err != nil {
		t.Fatal(err)
	}
	restored, err := New(srv.Client(t), Options{Prefix: "/restored"})
	if err != nil {
		t.Fatal(err)
	}
	const bump = 1000
	if _, err := restored.Restore(ctx, b, bump); err != nil {
		t.Fatal(err)
	}
	again, _, err := restored.AllocateProducerIDBlock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again <= first || again != bump*ProducerIDBlockSize {
		t.Fatalf("restored cluster hands out block %d (first after the backup %d), want %d", again, first, bump*ProducerIDBlockSize)
	}
}
