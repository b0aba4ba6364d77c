package kafkaapi

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
)

// fetchOfPartitions is a Fetch v12 of t's partitions from offset 0.
func fetchOfPartitions(maxBytes, partitionMaxBytes, minBytes, maxWait int32, partitions ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = maxBytes, minBytes, maxWait
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	for _, p := range partitions {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, partitionMaxBytes, -1
		rt.Partitions = append(rt.Partitions, fp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// produceTo appends one batch of value to t-partition with acks=1, and
// leaves the ISR to the leader so its HW covers it (broker 2 never
// fetches). It returns the batch's size as stored.
func produceTo(t *testing.T, s *Server, partition int32, value string) int {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition, p.Records = partition, recordBatchOf(value)
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	resp := s.handleProduce(context.Background(), &reqCtx{turn: make(chan struct{})}, req).(*kmsg.ProduceResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce to t-%d: %s", partition, kerr.Code(c))
	}
	ps := &commonv1.PartitionState{Topic: "t", Partition: partition, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2,
		Replicas: []int32{1, 2}, Isr: []int32{1}}
	if _, err := s.opts.RM.LeaderAndIsr(&controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1,
		Partitions: []*commonv1.PartitionState{ps}, TopicConfigs: []*controlv1.TopicConfig{{Topic: "t", TopicId: testTopicID}}}); err != nil {
		t.Fatal(err)
	}
	if hw, _ := s.opts.RM.HighWatermark(replica.TP{Topic: "t", Partition: partition}); hw != 1 {
		t.Fatalf("t-%d: HW %d, want 1", partition, hw)
	}
	return len(p.Records)
}

// consumerBytesOut is tidemark_broker_bytes_out_total{kind="consumer"}.
func consumerBytesOut(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tidemark_broker_bytes_out_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == "consumer" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A Kafka fetch reads only what its answer carries, as Kafka's
// readFromLog: once a partition brought records, a later one reads only
// batches that fit in what is left of max_bytes, and nothing once it is
// spent. Before, the later partition was read with a limit of 1 byte,
// which still read its whole first batch: counted as sent (and charged
// to the consumer's quota) and left out of the answer, or, with a few
// bytes left, put in the answer over max_bytes.
func TestKafkaFetchReadsOnlyWhatItsAnswerCarries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra int // bytes of max_bytes left after t-0's batch
	}{{"budget spent", 0}, {"a few bytes left", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			s := withLeaderRegistered(t, 2, nil, reg, "t")
			first := produceTo(t, s, 0, "first")
			produceTo(t, s, 1, "second, the larger one")
			before := consumerBytesOut(t, reg)
			req := fetchOfPartitions(int32(first+tc.extra), 1<<20, 1, 0, 0, 1)
			resp := s.handleFetch(context.Background(), nil, req).(*kmsg.FetchResponse)
			p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
			if len(p0.RecordBatches) != first || len(p1.RecordBatches) != 0 {
				t.Fatalf("answered %d and %d bytes, want t-0's batch (%d) alone", len(p0.RecordBatches), len(p1.RecordBatches), first)
			}
			if p1.ErrorCode != 0 || p1.HighWatermark != 1 || p1.LogStartOffset != 0 {
				t.Fatalf("t-1 answered %s, HW %d, log start %d: want its offsets (HW 1, log start 0)", kerr.Code(p1.ErrorCode), p1.HighWatermark, p1.LogStartOffset)
			}
			if sent := consumerBytesOut(t, reg) - before; sent != float64(first) {
				t.Fatalf("counted %v bytes sent to the consumer, want the %d answered", sent, first)
			}
		})
	}
}

// A long poll's parked reads are bounded like a pass's: by the answer's
// budget (max_bytes lowered to fetch.max.bytes), never by what was asked.
// Before, each parked partition read up to its partition_max_bytes: a
// fetch asking 2 GiB with min_bytes 2 GiB parked every partition with a
// 2 GiB limit, and each read took up to the rest of its segment.
func TestKafkaLongPollReadsAreBoundedByTheAnswersBudget(t *testing.T) {
	const fetchMax = 1 << 20
	s := withLeaderConfigured(t, 3, map[string]string{"fetch.max.bytes": "1048576"})
	var mu sync.Mutex
	var limits []int
	s.parkedFetch = func(ctx context.Context, f replica.ConsumerFetch) (replica.ConsumerFetchResult, error) {
		mu.Lock()
		defer mu.Unlock()
		limits = append(limits, f.MaxBytes)
		return replica.ConsumerFetchResult{}, errors.New("news: end the wait")
	}
	req := fetchOfPartitions(math.MaxInt32, math.MaxInt32, math.MaxInt32, 60000, 0, 1, 2)
	s.handleFetch(context.Background(), nil, req)
	mu.Lock()
	defer mu.Unlock()
	if len(limits) == 0 {
		t.Fatal("no partition parked")
	}
	for _, l := range limits {
		if l <= 0 || l > fetchMax {
			t.Fatalf("parked reads asked for %v bytes, want each within fetch.max.bytes %d", limits, fetchMax)
		}
	}
}

// A partition read after the budget is spent is still checked as Kafka's
// read of 0 bytes checks it: an offset outside its log is
// OFFSET_OUT_OF_RANGE, not an empty answer the consumer polls again.
func TestKafkaFetchPastTheBudgetStillAnswersOffsetOutOfRange(t *testing.T) {
	s := withLeaderOf(t, 2)
	first := produceTo(t, s, 0, "first")
	produceTo(t, s, 1, "second")
	req := fetchOfPartitions(int32(first), 1<<20, 1, 0, 0, 1)
	req.Topics[0].Partitions[1].FetchOffset = 5 // t-1 ends at 1
	resp := s.handleFetch(context.Background(), nil, req).(*kmsg.FetchResponse)
	if c := kerr.Code(resp.Topics[0].Partitions[1].ErrorCode); c != kerr.OffsetOutOfRange {
		t.Fatalf("t-1 at offset 5 past the budget answered %s, want OFFSET_OUT_OF_RANGE", c)
	}
}
