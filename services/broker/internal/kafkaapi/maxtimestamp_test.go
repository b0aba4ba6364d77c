package kafkaapi

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func produceAt(t *testing.T, s *Server, tss ...int64) {
	t.Helper()
	var b recordbatch.Builder
	for _, ts := range tss {
		b.Append(recordbatch.Record{Timestamp: ts, Value: []byte("v")})
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	resp := s.handleProduce(context.Background(), &reqCtx{turn: make(chan struct{})}, req).(*kmsg.ProduceResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce: %s", kerr.Code(c))
	}
}

func listOffsetsAt(t *testing.T, s *Server, version int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	return listOffsetsAs(t, s, -1, version, ts)
}

func listOffsetsAs(t *testing.T, s *Server, replicaID int32, version int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(version)
	req.ReplicaID = replicaID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := s.handleListOffsets(context.Background(), nil, req).(*kmsg.ListOffsetsResponse)
	return resp.Topics[0].Partitions[0]
}

// ListOffsets v7's -3 (KIP-734) answers the first record carrying the
// partition's largest timestamp, with its batch's leader epoch, once the HW
// covers it (-1 before, as Kafka); v8's -4 is the log start and -5 offset
// -1, as Kafka's without tiered storage.
func TestListOffsetsMaxTimestamp(t *testing.T) {
	s := withLeaderOf(t, 1)
	if got := s.apis()[int16(kmsg.ListOffsets)].versions; got.Max < 8 {
		t.Fatalf("ListOffsets advertised up to v%d, want v8", got.Max)
	}
	if p := listOffsetsAt(t, s, 7, listMaxTimestamp); p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
		t.Fatalf("empty partition: %s offset %d timestamp %d, want offset -1", kerr.Code(p.ErrorCode), p.Offset, p.Timestamp)
	}
	produceAt(t, s, 1000, 5000, 2000) // offsets 0-2: the maximum inside the batch
	produceAt(t, s, 5000, 3000)       // 3-4: a tie, later
	produceAt(t, s, 4000)             // 5
	// Broker 2 never fetches: the HW is still 0, below the maximum.
	if p := listOffsetsAt(t, s, 7, listMaxTimestamp); p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 || p.LeaderEpoch != -1 {
		t.Fatalf("maximum above the HW: %s offset %d timestamp %d epoch %d, want -1", kerr.Code(p.ErrorCode), p.Offset, p.Timestamp, p.LeaderEpoch)
	}
	ps := &commonv1.PartitionState{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2,
		Replicas: []int32{1, 2}, Isr: []int32{1}}
	if _, err := s.opts.RM.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1,
		Partitions: []*commonv1.PartitionState{ps}, TopicConfigs: []*controlv1.TopicConfig{{Topic: "t", TopicId: testTopicID}}}); err != nil {
		t.Fatal(err)
	}
	if hw, _ := s.opts.RM.HighWatermark(replica.TP{Topic: "t", Partition: 0}); hw != 6 {
		t.Fatalf("HW %d, want 6", hw)
	}
	for _, v := range []int16{7, 8} {
		if p := listOffsetsAt(t, s, v, listMaxTimestamp); p.ErrorCode != 0 || p.Offset != 1 || p.Timestamp != 5000 || p.LeaderEpoch != 1 {
			t.Fatalf("v%d max timestamp: %s offset %d timestamp %d epoch %d, want offset 1 timestamp 5000 epoch 1",
				v, kerr.Code(p.ErrorCode), p.Offset, p.Timestamp, p.LeaderEpoch)
		}
	}
	if p := listOffsetsAt(t, s, 8, listEarliestLocal); p.ErrorCode != 0 || p.Offset != 0 || p.Timestamp != -1 || p.LeaderEpoch != 1 {
		t.Fatalf("earliest local: %s offset %d timestamp %d epoch %d, want offset 0 epoch 1", kerr.Code(p.ErrorCode), p.Offset, p.Timestamp, p.LeaderEpoch)
	}
	if p := listOffsetsAt(t, s, 8, listLatestTiered); p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 || p.LeaderEpoch != -1 {
		t.Fatalf("latest tiered: %s offset %d timestamp %d epoch %d, want offset -1", kerr.Code(p.ErrorCode), p.Offset, p.Timestamp, p.LeaderEpoch)
	}
	if p := listOffsetsAt(t, s, 8, -6); kerr.Code(p.ErrorCode) != kerr.InvalidRequest {
		t.Fatalf("-6: %s, want INVALID_REQUEST", kerr.Code(p.ErrorCode))
	}
}

// As Kafka, a ListOffsets from a client (replica id -1, what kcat and
// franz-go send) is bounded by the HW; from a broker (its id) or a
// debugging tool (-2) it sees the log up to its end.
func TestListOffsetsBoundByReplicaID(t *testing.T) {
	s := withLeaderOf(t, 1)
	produceAt(t, s, 1000, 5000, 2000) // offsets 0-2
	produceAt(t, s, 4000)             // 3
	// Broker 2 never fetches: the HW is still 0, the LEO 4.
	if hw, _ := s.opts.RM.HighWatermark(replica.TP{Topic: "t", Partition: 0}); hw != 0 {
		t.Fatalf("HW %d, want 0", hw)
	}
	type answer struct{ offset, timestamp int64 }
	for _, c := range []struct {
		replicaID             int32
		latest, maxTS, at3000 answer
	}{
		{-1, answer{0, -1}, answer{-1, -1}, answer{-1, -1}},
		{-2, answer{4, -1}, answer{1, 5000}, answer{1, 5000}},
		{2, answer{4, -1}, answer{1, 5000}, answer{1, 5000}},
	} {
		for _, q := range []struct {
			ts   int64
			want answer
		}{{listLatest, c.latest}, {listMaxTimestamp, c.maxTS}, {3000, c.at3000}} {
			p := listOffsetsAs(t, s, c.replicaID, 8, q.ts)
			if got := (answer{p.Offset, p.Timestamp}); p.ErrorCode != 0 || got != q.want {
				t.Fatalf("replica id %d, timestamp %d: %s %+v, want %+v", c.replicaID, q.ts, kerr.Code(p.ErrorCode), got, q.want)
			}
		}
	}
}
