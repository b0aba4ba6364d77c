package kafkaapi

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// A Fetch v13 names topics by id. A topic this broker leads from its
// LeaderAndIsr, before an UpdateMetadata announced it (which may wait
// behind a long one in the controller's queue), is served by its id: the
// ids were looked up among announced topics only, and its consumers were
// answered UNKNOWN_TOPIC_ID, which franz-go takes, after five, for a topic
// deleted for good (Kafka's KAFKA-13102). An id no topic has is still
// UNKNOWN_TOPIC_ID.
func TestFetchByIDReachesATopicNotAnnouncedYet(t *testing.T) {
	s := withLeaderOf(t, 1)
	fresh := [16]byte{'f', 'r', 'e', 's', 'h'}
	ps := &commonv1.PartitionState{Topic: "fresh", Partition: 0, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{1, 2}, Isr: []int32{1, 2}}
	resp, err := s.opts.RM.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1,
		Partitions:   []*commonv1.PartitionState{ps},
		TopicConfigs: []*controlv1.TopicConfig{{Topic: "fresh", TopicId: base64.RawURLEncoding.EncodeToString(fresh[:])}}})
	if err != nil || kerr.Code(resp.GetPartitions()[0].GetErrorCode()) != kerr.None {
		t.Fatalf("LeaderAndIsr: %v %v", resp, err)
	}
	fetch := func(id [16]byte) kerr.Code {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(13)
		req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 1, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = id
		p := kmsg.NewFetchRequestTopicPartition()
		p.PartitionMaxBytes, p.CurrentLeaderEpoch = 1<<20, -1
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		out := s.handleFetch(context.Background(), nil, req).(*kmsg.FetchResponse)
		if len(out.Topics) != 1 || len(out.Topics[0].Partitions) != 1 || out.Topics[0].TopicID != id {
			t.Fatalf("answered %+v, want the topic asked for once", out.Topics)
		}
		return kerr.Code(out.Topics[0].Partitions[0].ErrorCode)
	}
	if c := fetch(fresh); c != kerr.None {
		t.Fatalf("fetch by the id of a topic led but not announced yet: %s, want it served", c)
	}
	if c := fetch([16]byte{'g', 'o', 'n', 'e'}); c != kerr.UnknownTopicID {
		t.Fatalf("fetch by an id no topic has: %s, want UNKNOWN_TOPIC_ID", c)
	}
}
