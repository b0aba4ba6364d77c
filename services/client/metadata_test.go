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

// Topic ids are never used again: once the cache has seen a topic's id
// replaced by a newer one, an answer naming the old id comes from a broker
// whose metadata lags and is ignored for that topic, also after the topic
// was forgotten in between; before, the cache took the old id and its
// leaders back, and its users took that for the topic created once more.
func TestMetadataIgnoresAReplacedTopicID(t *testing.T) {
	m := newMetadata(nil)
	answer := func(id string, leader, epoch int32) *brokerv1.MetadataResponse {
		return &brokerv1.MetadataResponse{Topics: []*brokerv1.TopicMetadata{{Name: "t", TopicId: id,
			Partitions: []*brokerv1.PartitionMetadata{{Partition: 0, Leader: leader, LeaderEpoch: epoch}}}}}
	}
	m.applyLocked(answer("id-1", 2, 4), nil) // the first answer is taken
	m.applyLocked(&brokerv1.MetadataResponse{}, nil)
	if _, ok := m.topics["t"]; ok {
		t.Fatal("a topic missing from an answer for every topic is still cached")
	}
	m.applyLocked(answer("id-2", 1, 0), nil) // created again
	m.applyLocked(answer("id-1", 2, 4), nil) // a lagging broker
	if id, p := m.topicIDs["t"], m.topics["t"][0]; id != "id-2" || p.leader != 1 || p.leaderEpoch != 0 {
		t.Fatalf("a lagging broker's answer naming the replaced id was taken: id %s, %+v", id, p)
	}
	m.applyLocked(answer("id-2", 3, 1), nil)
	if p := m.topics["t"][0]; p.leader != 3 || p.leaderEpoch != 1 {
		t.Fatalf("an answer naming the current id was not taken: %+v", p)
	}
	m.applyLocked(answer("id-3", 1, 0), nil) // created once more
	if id := m.topicIDs["t"]; id != "id-3" {
		t.Fatalf("a new id was not taken: %s", id)
	}
}

// A client whose first answer came from a broker that knew the newer
// topic, and whose second from one that lagged, took the older id for the
// newer. Answers that keep naming the id it holds as replaced, none naming
// the one it took, are taken after staleIDAnswersToTrust in a row, so the
// cache does not stay on the old topic for good.
func TestMetadataTakesAReplacedTopicIDEveryAnswerNames(t *testing.T) {
	m := newMetadata(nil)
	answer := func(id string) *brokerv1.MetadataResponse {
		return &brokerv1.MetadataResponse{Topics: []*brokerv1.TopicMetadata{{Name: "t", TopicId: id,
			Partitions: []*brokerv1.PartitionMetadata{{Partition: 0, Leader: 1}}}}}
	}
	m.applyLocked(answer("new"), nil)
	m.applyLocked(answer("old"), nil) // lagging, but not known to be
	for i := 1; i < staleIDAnswersToTrust; i++ {
		m.applyLocked(answer("new"), nil)
		if id := m.topicIDs["t"]; id != "old" {
			t.Fatalf("answer %d naming the replaced id was taken: %s", i, id)
		}
	}
	m.applyLocked(answer("old"), nil) // ends the run
	for range staleIDAnswersToTrust - 1 {
		m.applyLocked(answer("new"), nil)
	}
	if id := m.topicIDs["t"]; id != "old" {
		t.Fatalf("answers not in a row were taken: %s", id)
	}
	m.applyLocked(answer("new"), nil)
	if id := m.topicIDs["t"]; id != "new" {
		t.Fatalf("%d answers in a row naming the id were not taken: %s", staleIDAnswersToTrust, id)
	}
	m.applyLocked(answer("old"), nil) // now known stale
	if id := m.topicIDs["t"]; id != "new" {
		t.Fatalf("the id taken back was replaced again by a lagging answer: %s", id)
	}
}
