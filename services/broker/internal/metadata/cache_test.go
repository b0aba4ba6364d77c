package metadata

import (
	"testing"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

func TestStaleControllerEpochIsFenced(t *testing.T) {
	c := New()
	if err := c.CheckControllerEpoch(3); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckControllerEpoch(2); kerr.CodeOf(err) != kerr.StaleControllerEpoch {
		t.Fatalf("epoch 2 after 3: %v", err)
	}
	if err := c.CheckControllerEpoch(3); err != nil {
		t.Fatalf("same epoch again must pass: %v", err)
	}
	if err := c.CheckControllerEpoch(4); err != nil || c.ControllerEpoch() != 4 {
		t.Fatalf("newer epoch: %v %d", err, c.ControllerEpoch())
	}
}

// An update admitted at one controller epoch and applied after a newer
// epoch was admitted leaves the cache as the newer controller made it.
func TestAnUpdateOfASucceededControllerIsNotApplied(t *testing.T) {
	c := New()
	if err := c.CheckControllerEpoch(4); err != nil {
		t.Fatal(err)
	}
	newer := &controlv1.UpdateMetadataRequest{ControllerEpoch: 4, Controller: &commonv1.Node{Id: 4}}
	if err := c.ApplyUpdateOfNewest(newer); err != nil {
		t.Fatal(err)
	}
	older := &controlv1.UpdateMetadataRequest{ControllerEpoch: 3, Controller: &commonv1.Node{Id: 3}}
	if err := c.ApplyUpdateOfNewest(older); kerr.CodeOf(err) != kerr.StaleControllerEpoch {
		t.Fatalf("the older controller's update: %v, want STALE_CONTROLLER_EPOCH", err)
	}
	if got := c.Controller().GetId(); got != 4 {
		t.Fatalf("controller %d in the cache, want 4", got)
	}
}

func ps(topic string, p, leader, epoch, pe int32) *commonv1.PartitionState {
	return &commonv1.PartitionState{Topic: topic, Partition: p, Leader: leader, LeaderEpoch: epoch, PartitionEpoch: pe, Isr: []int32{leader}}
}

func TestOlderPartitionStateIsIgnored(t *testing.T) {
	c := New()
	c.PutPartitions([]*commonv1.PartitionState{ps("t", 0, 1, 5, 7)})
	c.PutPartitions([]*commonv1.PartitionState{ps("t", 0, 2, 4, 9)}) // older leader epoch
	c.PutPartitions([]*commonv1.PartitionState{ps("t", 0, 3, 5, 6)}) // same epoch, older partition epoch
	got, _ := c.Partition(TP{"t", 0})
	if got.GetLeader() != 1 {
		t.Fatalf("leader %d, want 1 (older states must not win)", got.GetLeader())
	}
	c.PutPartitions([]*commonv1.PartitionState{ps("t", 0, 2, 6, 8)})
	if got, _ := c.Partition(TP{"t", 0}); got.GetLeader() != 2 {
		t.Fatalf("newer epoch not applied: %v", got)
	}
}

func TestUpdateMetadataFullAndDeletes(t *testing.T) {
	c := New()
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{
		Full:       true,
		Controller: &commonv1.Node{Id: 1, Address: "c1"},
		Brokers: []*controlv1.BrokerRegistration{
			{Node: &commonv1.Node{Id: 2, Address: "b2", Rack: "r2"}, BrokerEpoch: 20, ShuttingDown: true},
			{Node: &commonv1.Node{Id: 1, Address: "b1"}, BrokerEpoch: 10},
		},
		Partitions:   []*commonv1.PartitionState{ps("a", 0, 1, 1, 1), ps("a", 1, 2, 1, 1), ps("b", 0, 2, 1, 1)},
		TopicConfigs: []*controlv1.TopicConfig{{Topic: "a", Configs: map[string]string{"min.insync.replicas": "2"}}},
	})
	if bs := c.Brokers(); len(bs) != 2 || bs[0].ID != 1 || bs[1].Rack != "r2" || bs[1].Epoch != 20 || bs[0].ShuttingDown || !bs[1].ShuttingDown {
		t.Fatalf("brokers %+v", bs)
	}
	if h := c.LeaderHint(TP{"a", 1}); h == nil || h.ID != 2 || h.Address != "b2" {
		t.Fatalf("hint %+v", h)
	}
	if c.TopicConfig("a")["min.insync.replicas"] != "2" {
		t.Fatal("topic config lost")
	}
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{DeletedTopics: []string{"a"}})
	if ts := c.Topics(); len(ts) != 1 || ts[0] != "b" {
		t.Fatalf("topics after delete %v", ts)
	}
	if len(c.Brokers()) != 2 {
		t.Fatal("a delta without brokers must keep the broker list")
	}
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{Full: true})
	if len(c.Topics()) != 0 || len(c.Brokers()) != 0 {
		t.Fatal("a full update replaces everything")
	}
}

// Deleting the last dynamic broker key sends an empty map, which protobuf
// delivers as nil: the cache must empty, not keep the old keys (a lifted
// replication throttle stayed in force).
func TestEmptyBrokerConfigsClearTheCache(t *testing.T) {
	c := New()
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{BrokerConfigs: map[string]string{"follower.replication.throttled.rate": "200"}})
	if got := c.BrokerConfigs(); got["follower.replication.throttled.rate"] != "200" {
		t.Fatalf("configs %v", got)
	}
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{})
	if got := c.BrokerConfigs(); len(got) != 0 {
		t.Fatalf("configs after the last key was deleted: %v", got)
	}
}

// A LeaderAndIsr tells a broker only of the partitions it hosts: a topic
// known from it alone is shown nowhere until the UpdateMetadata listing all
// its partitions arrives, and partitions added to a topic stay out of it
// until then too. Before, a Metadata answer could show a new topic with
// some of its partitions (franz-go: "expected partition 0 but saw 1"), and
// the group coordinator could count __consumer_offsets' partitions short.
func TestPartitionsKnownOnlyFromLeaderAndIsrAreNotAnnounced(t *testing.T) {
	c := New()
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{Full: true})
	c.PutPartitions([]*commonv1.PartitionState{ps("t", 1, 1, 0, 0), ps("t", 2, 1, 0, 0)})
	if got := c.Topics(); len(got) != 0 {
		t.Fatalf("topics %v before the UpdateMetadata of t, want none", got)
	}
	if got := c.TopicPartitions("t"); len(got) != 0 {
		t.Fatalf("%d partitions of t before its UpdateMetadata, want none", len(got))
	}
	if _, ok := c.Partition(TP{"t", 1}); !ok {
		t.Fatal("the LeaderAndIsr's own partition is unknown to the broker acting on it")
	}
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{Partitions: []*commonv1.PartitionState{ps("t", 0, 2, 0, 0), ps("t", 1, 1, 0, 0), ps("t", 2, 1, 0, 0)}})
	if got := c.TopicPartitions("t"); len(got) != 3 {
		t.Fatalf("%d partitions of t after its UpdateMetadata, want 3", len(got))
	}
	// Two partitions added; this broker hosts the second.
	c.PutPartitions([]*commonv1.PartitionState{ps("t", 4, 1, 0, 0)})
	if got := c.TopicPartitions("t"); len(got) != 3 {
		t.Fatalf("%d partitions of t with partition 4 known from a LeaderAndIsr only, want the 3 announced", len(got))
	}
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{Partitions: []*commonv1.PartitionState{ps("t", 3, 2, 0, 0), ps("t", 4, 1, 0, 0)}})
	if got := c.TopicPartitions("t"); len(got) != 5 || c.Topics()[0] != "t" {
		t.Fatalf("%d partitions of t after the UpdateMetadata of the added ones, want 5", len(got))
	}
	c.ApplyUpdate(&controlv1.UpdateMetadataRequest{DeletedTopics: []string{"t"}})
	c.PutPartitions([]*commonv1.PartitionState{ps("t", 0, 1, 0, 0)}) // created again
	if got := c.TopicPartitions("t"); len(got) != 0 {
		t.Fatalf("%d partitions of a deleted and re-created t before its UpdateMetadata, want none", len(got))
	}
}

// TopicByID answers every id the cache holds, announced or not, and
// follows each topic's id as it is replaced or forgotten, including where
// two names were given one id (never by the controller, whose ids are
// random): forgetting one name's leaves the other's.
func TestTopicByIDFollowsTheTopicsIDs(t *testing.T) {
	c := New()
	c.PutTopicConfig("a", nil, "X")
	if got := c.TopicByID("X"); got != "a" {
		t.Fatalf("TopicByID(X) = %q, want a (known from a LeaderAndIsr only)", got)
	}
	c.PutTopicConfig("a", nil, "Y")
	if got, old := c.TopicByID("Y"), c.TopicByID("X"); got != "a" || old != "" {
		t.Fatalf("after a's id became Y: TopicByID(Y) = %q, TopicByID(X) = %q", got, old)
	}
	c.PutTopicConfig("b", nil, "Y")
	c.PutTopicConfig("a", nil, "Z")
	if got := c.TopicByID("Y"); got != "b" {
		t.Fatalf("TopicByID(Y) = %q after a moved on from the id b holds, want b", got)
	}
}
