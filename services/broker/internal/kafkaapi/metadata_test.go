package kafkaapi

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

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
