package client

import (
	"fmt"
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
	m.applyLocked(answer("id-1", 3, 7), nil, 1)
	m.applyLocked(answer("id-1", 1, 5), nil, 1) // a lagging broker
	if p := m.topics["t"][0]; p.leader != 3 || p.leaderEpoch != 7 {
		t.Fatalf("a lagging broker's answer replaced a newer one: %+v", p)
	}
	m.applyLocked(answer("id-2", 1, 0), nil, 1) // created again
	if p := m.topics["t"][0]; p.leader != 1 || p.leaderEpoch != 0 {
		t.Fatalf("the topic created again is still routed to the old one's leader: %+v", p)
	}
	m.applyLocked(&brokerv1.MetadataResponse{Topics: []*brokerv1.TopicMetadata{{Name: "t", ErrorCode: commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}}}, nil, 1)
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
	m.applyLocked(answer("id-1", 2, 4), nil, 1) // the first answer is taken
	m.applyLocked(&brokerv1.MetadataResponse{}, nil, 1)
	if _, ok := m.topics["t"]; ok {
		t.Fatal("a topic missing from an answer for every topic is still cached")
	}
	m.applyLocked(answer("id-2", 1, 0), nil, 1) // created again
	m.applyLocked(answer("id-1", 2, 4), nil, 1) // a lagging broker
	if id, p := m.topicIDs["t"], m.topics["t"][0]; id != "id-2" || p.leader != 1 || p.leaderEpoch != 0 {
		t.Fatalf("a lagging broker's answer naming the replaced id was taken: id %s, %+v", id, p)
	}
	m.applyLocked(answer("id-2", 3, 1), nil, 1)
	if p := m.topics["t"][0]; p.leader != 3 || p.leaderEpoch != 1 {
		t.Fatalf("an answer naming the current id was not taken: %+v", p)
	}
	m.applyLocked(answer("id-3", 1, 0), nil, 1) // created once more
	if id := m.topicIDs["t"]; id != "id-3" {
		t.Fatalf("a new id was not taken: %s", id)
	}
}

// idAnswer is an answer naming topic t with id, from a cluster of the
// given brokers (at addresses b1, b2, ...).
func idAnswer(id string, brokers ...int32) *brokerv1.MetadataResponse {
	resp := &brokerv1.MetadataResponse{Topics: []*brokerv1.TopicMetadata{{Name: "t", TopicId: id,
		Partitions: []*brokerv1.PartitionMetadata{{Partition: 0, Leader: 1}}}}}
	for _, b := range brokers {
		resp.Brokers = append(resp.Brokers, &commonv1.Node{Id: b, Address: fmt.Sprintf("b%d", b)})
	}
	return resp
}

// One broker whose metadata lags never sends the cache back to a replaced
// id, however many answers in a row it gives (it may be the only one
// asked: the others refuse, or are out of reach), nor do answers whose
// broker is not known. Before, three in a row took the old id back.
func TestMetadataNeverTakesAReplacedTopicIDOneBrokerNames(t *testing.T) {
	m := newMetadata(nil)
	m.applyLocked(idAnswer("old", 1, 2), nil, 1)
	m.applyLocked(idAnswer("new", 1, 2), nil, 1) // created again
	for range 20 {
		m.applyLocked(idAnswer("old", 1, 2), nil, 2) // lagging
		m.applyLocked(idAnswer("old", 1, 2), nil, noBroker)
	}
	if id := m.topicIDs["t"]; id != "new" {
		t.Fatalf("one lagging broker's answers sent the cache back to the replaced id: %s", id)
	}
	if n := len(m.replacedIDNames["t"]); n != 1 || len(m.replacedIDNames["t"][0].brokers) != 1 {
		t.Fatalf("brokers that named the replaced id: %+v", m.replacedIDNames["t"])
	}
}

// A client whose first answer came from a broker that knew the newer
// topic, and whose second from one that lagged, took the older id for the
// newer. Once two different brokers name the id it holds as replaced, with
// no answer naming the one it took in between, the cache takes it, so it
// does not stay on the old topic for good.
func TestMetadataTakesAReplacedTopicIDTwoBrokersName(t *testing.T) {
	m := newMetadata(nil)
	m.applyLocked(idAnswer("new", 1, 2, 3), nil, 1)
	m.applyLocked(idAnswer("old", 1, 2, 3), nil, 2) // lagging, but not known to be
	for range 10 {
		m.applyLocked(idAnswer("new", 1, 2, 3), nil, 1)
	}
	if id := m.topicIDs["t"]; id != "old" {
		t.Fatalf("one broker's answers naming the replaced id were taken: %s", id)
	}
	m.applyLocked(idAnswer("old", 1, 2, 3), nil, 2) // names the id held: starts again
	m.applyLocked(idAnswer("new", 1, 2, 3), nil, 3)
	if id := m.topicIDs["t"]; id != "old" {
		t.Fatalf("brokers that named the replaced id before an answer naming the one held were counted: %s", id)
	}
	m.applyLocked(idAnswer("new", 1, 2, 3), nil, 1)
	if id := m.topicIDs["t"]; id != "new" {
		t.Fatalf("two brokers named the replaced id and it was not taken: %s", id)
	}
	if _, ok := m.replacedIDNames["t"]; ok {
		t.Fatalf("the brokers that named the id taken are still kept: %+v", m.replacedIDNames["t"])
	}
	m.applyLocked(idAnswer("old", 1, 2, 3), nil, 2) // now known stale
	if id := m.topicIDs["t"]; id != "new" {
		t.Fatalf("the id taken back was replaced again by a lagging answer: %s", id)
	}
}

// In a cluster of one broker (the answer lists one) no second broker will
// confirm anything: replacedIDAnswersToTrust answers in a row naming the
// replaced id take it, whatever address the broker was reached at.
func TestMetadataTakesAReplacedTopicIDTheOnlyBrokerNames(t *testing.T) {
	m := newMetadata(nil)
	m.applyLocked(idAnswer("new", 1), nil, 1)
	m.applyLocked(idAnswer("old", 1), nil, 1) // lagging, but not known to be
	for i := 1; i < replacedIDAnswersToTrust; i++ {
		m.applyLocked(idAnswer("new", 1), nil, noBroker)
		if id := m.topicIDs["t"]; id != "old" {
			t.Fatalf("answer %d naming the replaced id was taken: %s", i, id)
		}
	}
	m.applyLocked(idAnswer("old", 1), nil, 1) // ends the run
	for range replacedIDAnswersToTrust - 1 {
		m.applyLocked(idAnswer("new", 1), nil, 1)
	}
	if id := m.topicIDs["t"]; id != "old" {
		t.Fatalf("answers not in a row were taken: %s", id)
	}
	m.applyLocked(idAnswer("new", 1), nil, 1)
	if id := m.topicIDs["t"]; id != "new" {
		t.Fatalf("%d answers in a row naming the id were not taken: %s", replacedIDAnswersToTrust, id)
	}
}

// The answering broker is named by the address it was asked at: the
// answer's broker list first, then the brokers the cache knew.
func TestMetadataNamesTheAnsweringBroker(t *testing.T) {
	m := newMetadata(nil)
	if id := m.answererLocked(idAnswer("x", 1, 2), "b2"); id != 2 {
		t.Fatalf("broker at b2 named %d", id)
	}
	m.brokers[3] = "b3"
	if id := m.answererLocked(idAnswer("x", 1, 2), "b3"); id != 3 {
		t.Fatalf("broker at b3 named %d", id)
	}
	if id := m.answererLocked(idAnswer("x", 1, 2), "bootstrap:9092"); id != noBroker {
		t.Fatalf("an address no broker is known by named %d", id)
	}
}

// A name Kafka's rule forbids is answered INVALID_TOPIC_EXCEPTION: such a
// topic does not exist, and the cache keeps no entry for it (it would hold
// a topic of no partitions).
func TestMetadataKeepsNoForbiddenTopicName(t *testing.T) {
	m := newMetadata(nil)
	m.applyLocked(&brokerv1.MetadataResponse{Topics: []*brokerv1.TopicMetadata{{Name: "bad name!",
		ErrorCode: commonv1.ErrorCode_ERROR_CODE_INVALID_TOPIC_EXCEPTION}}}, []string{"bad name!"}, 1)
	if _, ok := m.topics["bad name!"]; ok {
		t.Fatal("the cache holds a topic the broker said cannot exist")
	}
}
