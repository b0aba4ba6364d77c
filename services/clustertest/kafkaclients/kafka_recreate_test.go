package kafkaclients

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
)

// kafkaTopicID is a topic's id as Metadata answers it.
func kafkaTopicID(t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	resp, err := req.RequestWith(clustertest.CtxFor(t, 10*time.Second), cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of %s: %+v %v", topic, resp, err)
	}
	return resp.Topics[0].TopicID
}

// kafkaFetchByID is a Fetch v13 of partition 0 of the topic of id from
// offset, not waiting for data.
func kafkaFetchByID(t *testing.T, cl *kgo.Client, id [16]byte, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = []kmsg.FetchRequestTopicPartition{fp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	resp, err := cl.Broker(1).Request(clustertest.CtxFor(t, 10*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.Version < 13 || len(fr.Topics) != 1 || fr.Topics[0].TopicID != id || len(fr.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch v%d of topic id %x: %+v", fr.Version, id, fr)
	}
	return fr.Topics[0].Partitions[0]
}

// A franz-go consumer polling at the end of a topic that is deleted and
// created again never reads the new topic as if it went on from the old
// position: it reads it from its start or not at all (franz-go stops a
// topic whose id changed, UNKNOWN_TOPIC_ID, until it is added again).
// With Fetch up to v12, which names topics by name only, it read the new
// topic from its old offset on; v13 names the topic id, and the broker
// refuses an id that is gone.
func TestKafkaConsumerAcrossATopicCreatedAgainSkipsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("watches an idle franz-go consumer for seconds")
	}
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true})
	ctx := context.Background()
	produce := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if _, err := c.Produce(ctx, "krecreated", 0, -1, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.CreateTopic("krecreated", 1, 1, nil)
	produce("old", 4)
	cl := c.KafkaClient()
	oldID := kafkaTopicID(t, cl, "krecreated")
	if p := kafkaFetchByID(t, cl, oldID, 0); p.ErrorCode != 0 || p.HighWatermark != 4 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch v13 by the topic's id: %+v", p)
	}
	r := startIdleKafkaReader(c, "krecreated")
	old := clustertest.Values("old", 4)
	r.waitRead(c, map[int32][]string{0: old})

	resp, err := c.Admin().DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{"krecreated"}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	c.CreateTopic("krecreated", 1, 1, nil)
	produce("new", 8)
	all := append(slices.Clone(old), clustertest.Values("new", 8)...)
	// Fetch v13 by the old id is refused, never served from the new log;
	// by the new id it reads the new topic.
	if p := kafkaFetchByID(t, cl, oldID, 4); kerr.Code(p.ErrorCode) != kerr.UnknownTopicID || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch v13 by the deleted topic's id at offset 4: error %d, %d bytes; want UNKNOWN_TOPIC_ID", p.ErrorCode, len(p.RecordBatches))
	}
	if p := kafkaFetchByID(t, cl, kafkaTopicID(t, cl, "krecreated"), 0); p.ErrorCode != 0 || p.HighWatermark != 8 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch v13 by the new topic's id: %+v", p)
	}
	// franz-go refreshes metadata every 2 s here: 8 s lets it see the new
	// topic id, and read the new topic if it does.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		r.mu.Lock()
		got := slices.Clone(r.read[0])
		r.mu.Unlock()
		if len(got) > len(all) || !slices.Equal(got, all[:len(got)]) {
			t.Fatalf("the consumer read %v across the topic's re-creation; want %v or a prefix of it", got, all)
		}
	}
}
