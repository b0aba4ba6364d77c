package kafkaapi

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
)

// produceValues appends one record per value to t-0 with acks=1.
func produceValues(t *testing.T, s *Server, values ...string) {
	t.Helper()
	for _, v := range values {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = 1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = recordBatchOf(v)
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		resp := s.handleProduce(context.Background(), &reqCtx{turn: make(chan struct{})}, req).(*kmsg.ProduceResponse)
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("produce %q: %s", v, kerr.Code(c))
		}
	}
}

// A Fetch naming a partition twice reads it once, from its last entry's
// offset, and answers it once, as Kafka's FetchRequest.fetchData (a map
// of topic-partition to fetch position) does. Each entry was read and
// answered, the records of both in one answer.
func TestFetchReadsAPartitionNamedTwiceOnceFromItsLastEntry(t *testing.T) {
	s := withLeaderOf(t, 2)
	produceValues(t, s, "first", "second")
	// Broker 2 never fetches: leave the ISR to the leader, whose HW then
	// covers the records, so a consumer reads them.
	ps := &commonv1.PartitionState{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2,
		Replicas: []int32{1, 2}, Isr: []int32{1}}
	if _, err := s.opts.RM.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1,
		Partitions: []*commonv1.PartitionState{ps}, TopicConfigs: []*controlv1.TopicConfig{{Topic: "t", TopicId: testTopicID}}}); err != nil {
		t.Fatal(err)
	}
	if hw, _ := s.opts.RM.HighWatermark(replica.TP{Topic: "t", Partition: 0}); hw != 2 {
		t.Fatalf("HW %d, want 2", hw)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 1, 0
	for _, entries := range [][][2]int64{{{0, 0}, {1, 0}}, {{0, 1}}} {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		for _, e := range entries {
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition, p.FetchOffset, p.PartitionMaxBytes = int32(e[0]), e[1], 1<<20
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := s.handleFetch(context.Background(), nil, req).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("answered %d topics (%+v), want topic t once with partitions 0 and 1", len(resp.Topics), resp.Topics)
	}
	p0 := resp.Topics[0].Partitions[0]
	if p0.Partition != 0 || p0.ErrorCode != 0 || bytes.Contains(p0.RecordBatches, []byte("first")) ||
		!bytes.Contains(p0.RecordBatches, []byte("second")) {
		t.Fatalf("partition %d %s with %q, want partition 0 read from offset 1 (the record \"second\" only)",
			p0.Partition, kerr.Code(p0.ErrorCode), p0.RecordBatches)
	}
	if p1 := resp.Topics[0].Partitions[1]; p1.Partition != 1 || p1.ErrorCode != 0 {
		t.Fatalf("second answer: partition %d %s, want partition 1", p1.Partition, kerr.Code(p1.ErrorCode))
	}
}

// A ListOffsets naming a partition twice is INVALID_REQUEST for that
// partition, answered once and not looked up, as Kafka's
// ReplicaManager.fetchOffset answers it; the others are answered as ever.
// Each entry was looked up and answered.
func TestListOffsetsRefusesAPartitionNamedTwice(t *testing.T) {
	s := withLeaderOf(t, 2)
	produceValues(t, s, "a")
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(6)
	req.ReplicaID = -1
	for _, parts := range [][]int32{{0, 1}, {0}} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		for _, p := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, listEarliest
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := s.handleListOffsets(context.Background(), nil, req).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("answered %+v, want topic t once with partitions 0 and 1", resp.Topics)
	}
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.Partition != 0 || kerr.Code(p0.ErrorCode) != kerr.InvalidRequest || p0.Offset != -1 {
		t.Errorf("partition %d %s offset %d, want partition 0 INVALID_REQUEST offset -1", p0.Partition, kerr.Code(p0.ErrorCode), p0.Offset)
	}
	if p1.Partition != 1 || p1.ErrorCode != 0 || p1.Offset != 0 {
		t.Errorf("partition %d %s offset %d, want partition 1 at offset 0", p1.Partition, kerr.Code(p1.ErrorCode), p1.Offset)
	}
}

func TestRepeatedKeys(t *testing.T) {
	names := []string{"a", "b", "a", "c", "a"}
	got := repeatedKeys(names, func(s *string) string { return *s })
	if want := []bool{true, false, true, false, true}; !slices.Equal(got, want) {
		t.Fatalf("repeatedKeys(%v) = %v, want %v", names, got, want)
	}
	if got := repeatedKeys([]string(nil), func(s *string) string { return *s }); len(got) != 0 {
		t.Fatalf("no items: %v", got)
	}
}
