package client

import (
	"testing"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
)

// The cache keeps the newer of two leader epochs for a partition (a lagging
// broker cannot undo a hint), but only within one incarnation of a topic: a
// new topic id means the topic was created again, and its epochs began anew.
func TestMetadataDropsATopicCreatedAgain(t *testing.T) {
	m := newMetadata(nil)
	answer := func(id string, leader, epoch int32) *brokerv1.MetadataResponse {
		return &brokerv1.MetadataResponse{Topics: []*brokerv1.TopicMetadata{{Name: "t", TopicId: id,
			Partitions: []*brokerv1.PartitionMetadata{{Partition: 0, Leader: leader, LeaderEpoch: epoch}}}}}
	}
	m.applyLocked(answer("id-1", 3, 7), nil)
	m.applyLocked(answer("id-1", 1, 5), nil) // a lagging broker
	if p := m.topics["t"][0]; p.leader != 3 || p.leaderEpoch != 7 {
		t.Fatalf("a lagging broker's answer replaced a newer one: %+v", p)
	}
	m.applyLocked(answer("id-2", 1, 0), nil) // created again
	if p := m.topics["t"][0]; p.leader != 1 || p.leaderEpoch != 0 {
		t.Fatalf("the topic created again is still routed to the old one's leader: %+v", p)
	}
	m.applyLocked(&brokerv1.MetadataResponse{Topics: []*brokerv1.TopicMetadata{{Name: "t", ErrorCode: commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}}}, nil)
	if _, ok := m.topicIDs["t"]; ok {
		t.Fatal("a topic gone kept its id")
	}
}
