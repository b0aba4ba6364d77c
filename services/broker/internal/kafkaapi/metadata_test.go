package kafkaapi

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// Metadata v12 by topic id: a known id is answered with its topic, an
// unknown one (the zero UUID included) UNKNOWN_TOPIC_ID with the id, as
// Kafka does. Before, an unknown id was UNKNOWN_TOPIC_OR_PARTITION.
func TestMetadataByTopicID(t *testing.T) {
	s := withLeader(t)
	known := topicUUID(testTopicID)
	unknown := [16]byte{0xff, 1, 2, 3}
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, id := range [][16]byte{unknown, known, {}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	resp := s.handleMetadata(context.Background(), &reqCtx{}, req).(*kmsg.MetadataResponse)
	got := map[[16]byte]kmsg.MetadataResponseTopic{}
	for _, rt := range resp.Topics {
		got[rt.TopicID] = rt
	}
	if len(resp.Topics) != 3 || len(got) != 3 {
		t.Fatalf("answered %+v, want one topic per id", resp.Topics)
	}
	if rt := got[known]; rt.ErrorCode != 0 || rt.Topic == nil || *rt.Topic != "t" || len(rt.Partitions) != 1 {
		t.Errorf("known id: %s %v %d partitions, want t with its partition", kerr.Code(rt.ErrorCode), rt.Topic, len(rt.Partitions))
	}
	for _, id := range [][16]byte{unknown, {}} {
		if rt := got[id]; kerr.Code(rt.ErrorCode) != kerr.UnknownTopicID || rt.Topic != nil {
			t.Errorf("id %x: %s, topic %v; want UNKNOWN_TOPIC_ID and no name", id, kerr.Code(rt.ErrorCode), rt.Topic)
		}
	}
}

// The broker's gRPC Metadata (which the gateway's /v1/metadata relays)
// answers a topic name Kafka's rule forbids INVALID_TOPIC_EXCEPTION, saying
// which rule broke, as Kafka does: such a topic can never exist. It was
// UNKNOWN_TOPIC_OR_PARTITION, as for a legal name not created yet.
func TestGRPCMetadataOfAForbiddenTopicName(t *testing.T) {
	s := withLeader(t)
	long := strings.Repeat("a", 250)
	want := map[string]commonv1.ErrorCode{
		"bad name!": commonv1.ErrorCode_ERROR_CODE_INVALID_TOPIC_EXCEPTION,
		"..":        commonv1.ErrorCode_ERROR_CODE_INVALID_TOPIC_EXCEPTION,
		long:        commonv1.ErrorCode_ERROR_CODE_INVALID_TOPIC_EXCEPTION,
		"nope":      commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
		"t":         commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED,
	}
	req := &brokerv1.MetadataRequest{}
	for name := range want {
		req.Topics = append(req.Topics, name)
	}
	resp, err := s.opts.Broker.Metadata(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetTopics()) != len(want) {
		t.Fatalf("answered %v, want one entry per topic asked", resp.GetTopics())
	}
	for _, tm := range resp.GetTopics() {
		name := tm.GetName()
		if tm.GetErrorCode() != want[name] {
			t.Errorf("topic %.20q: %s, want %s", name, tm.GetErrorCode(), want[name])
		}
		forbidden := want[name] == commonv1.ErrorCode_ERROR_CODE_INVALID_TOPIC_EXCEPTION
		if forbidden && tm.GetErrorMessage() == "" {
			t.Errorf("topic %.20q: no message saying which rule broke", name)
		}
	}
}

// Metadata v10 and v11 carry a topic id and a nullable name, but Kafka
// looks topics up by id from v12 only: a request naming one by id, or with
// a null name, is refused INVALID_REQUEST for every topic it names, as
// Kafka does. They were resolved, as in v12.
func TestMetadataByTopicIDBeforeV12IsRefused(t *testing.T) {
	s := withLeader(t)
	known := topicUUID(testTopicID)
	for _, version := range []int16{10, 11} {
		for what, topics := range map[string][]kmsg.MetadataRequestTopic{
			"by id":          {{Topic: kmsg.StringPtr("t")}, {TopicID: known}},
			"by id and name": {{Topic: kmsg.StringPtr("t"), TopicID: known}},
			"null name":      {{}},
		} {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(version)
			req.Topics = topics
			resp := s.handleMetadata(context.Background(), &reqCtx{}, req).(*kmsg.MetadataResponse)
			if len(resp.Topics) != len(topics) {
				t.Fatalf("v%d %s: answered %+v, want one topic per topic asked", version, what, resp.Topics)
			}
			for i, rt := range resp.Topics {
				if kerr.Code(rt.ErrorCode) != kerr.InvalidRequest || len(rt.Partitions) != 0 || rt.Topic == nil {
					t.Errorf("v%d %s: topic %d answered %s, %d partitions, name %v; want INVALID_REQUEST, none, a name",
						version, what, i, kerr.Code(rt.ErrorCode), len(rt.Partitions), rt.Topic)
				}
			}
		}
	}
	// Named by name alone, v11 is answered.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(11)
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	resp := s.handleMetadata(context.Background(), &reqCtx{}, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 {
		t.Errorf("v11 by name: %+v, want t with its partition", resp.Topics)
	}
}
