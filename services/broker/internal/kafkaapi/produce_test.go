package kafkaapi

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func oneRecordBatch() []byte { return recordBatchOf("v") }

func recordBatchOf(value string) []byte {
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: 1, Value: []byte(value)})
	return b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
}

// An acks=all Produce naming more partitions than produceWorkers is served
// by at most produceWorkers goroutines, within the request's one timeout,
// and answered entry by entry in request order. Before, every entry parked
// a goroutine of its own until the timeout.
func TestProduceBoundsTheEntriesServedAtOnce(t *testing.T) {
	const hosted, entries, timeout = 2 * produceWorkers, 3 * produceWorkers, 400
	s := withLeaderOf(t, hosted)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, timeout
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for i := range entries {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = int32(i) // from hosted on, not hosted here: refused at once
		p.Records = oneRecordBatch()
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)

	base := runtime.NumGoroutine()
	rc := &reqCtx{turn: make(chan struct{})}
	answered := make(chan *kmsg.ProduceResponse, 1)
	start := time.Now()
	go func() { answered <- s.handleProduce(context.Background(), rc, req).(*kmsg.ProduceResponse) }()
	peak := 0
	var resp *kmsg.ProduceResponse
	for resp == nil {
		peak = max(peak, runtime.NumGoroutine()-base)
		select {
		case resp = <-answered:
		case <-time.After(2 * time.Millisecond):
		}
	}
	took := time.Since(start)
	if peak > produceWorkers+32 {
		t.Errorf("%d goroutines more while the request was served, want at most about %d", peak, produceWorkers)
	}
	if took > 3*timeout*time.Millisecond {
		t.Errorf("answered after %v, want about the request's timeout (%d ms)", took, timeout)
	}
	select {
	case <-rc.turn:
	default:
		t.Error("the connection's next request was never let start")
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != entries {
		t.Fatalf("answered %d topics, want 1 with %d entries", len(resp.Topics), entries)
	}
	for i, p := range resp.Topics[0].Partitions {
		wantCode := kerr.RequestTimedOut // broker 2 never fetches
		if i >= hosted {
			wantCode = kerr.UnknownTopicOrPartition
		}
		if p.Partition != int32(i) || kerr.Code(p.ErrorCode) != wantCode {
			t.Errorf("entry %d: partition %d %s, want partition %d %s", i, p.Partition, kerr.Code(p.ErrorCode), i, wantCode)
		}
	}
}

// A Produce naming a partition twice appends only its last entry and
// answers the partition once, under its topic's first entry, as Kafka's
// handleProduceRequest (a map of topic-partition to records) does. Both
// entries were appended and answered.
func TestProduceKeepsTheLastEntryOfAPartitionNamedTwice(t *testing.T) {
	s := withLeader(t)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 1000
	for _, entries := range [][]struct {
		partition int32
		value     string
	}{{{0, "first"}}, {{0, "last"}, {7, "x"}}} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		for _, e := range entries {
			p := kmsg.NewProduceRequestTopicPartition()
			p.Partition, p.Records = e.partition, recordBatchOf(e.value)
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = append(req.Topics, rt)
	}
	rc := &reqCtx{turn: make(chan struct{})}
	resp := s.handleProduce(context.Background(), rc, req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "t" || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("answered %+v, want topic t once with partitions 0 and 7", resp.Topics)
	}
	p0, p7 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.Partition != 0 || p0.ErrorCode != 0 || p0.BaseOffset != 0 {
		t.Errorf("partition 0 answered %d %s at offset %d, want partition 0 appended at 0", p0.Partition, kerr.Code(p0.ErrorCode), p0.BaseOffset)
	}
	if p7.Partition != 7 || kerr.Code(p7.ErrorCode) != kerr.UnknownTopicOrPartition {
		t.Errorf("second answer: partition %d %s, want partition 7 UNKNOWN_TOPIC_OR_PARTITION", p7.Partition, kerr.Code(p7.ErrorCode))
	}
	r, _ := s.opts.RM.Replica(replica.TP{Topic: "t", Partition: 0})
	read, err := r.Log().Read(0, 1<<20, r.Log().LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if leo := r.Log().LogEndOffset(); leo != 1 || !bytes.Contains(read.Records, []byte("last")) {
		t.Fatalf("log end %d holding %q, want the last entry's one record", leo, read.Records)
	}
}

// A Produce naming a partition twice, one copy a batch of magic 1, is read
// as Kafka's handleProduceRequest reads it: the valid copy goes into the
// map of records to append and the invalid one into the map of refusals,
// so the valid copy is appended, whichever came last, and the answer is
// the refusal, which Kafka puts over the append's result. An unknown
// partition is UNKNOWN_TOPIC_OR_PARTITION whatever its batch, as Kafka
// looks for it before validating. Before, only the last copy counted: a
// valid first copy was dropped and an invalid first copy ignored.
func TestProduceOfAPartitionNamedTwiceWithAnInvalidCopy(t *testing.T) {
	magic1 := func(value string) []byte {
		b := recordBatchOf(value)
		b[16] = 1
		return b
	}
	for _, c := range []struct {
		name         string
		first, last  []byte
		wantAppended string
	}{
		{"valid then invalid", recordBatchOf("valid-first"), magic1("bad"), "valid-first"},
		{"invalid then valid", magic1("bad"), recordBatchOf("valid-last"), "valid-last"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := withLeader(t)
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(9)
			req.Acks, req.TimeoutMillis = 1, 1000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "t"
			for _, records := range [][]byte{c.first, c.last} {
				p := kmsg.NewProduceRequestTopicPartition()
				p.Records = records
				rt.Partitions = append(rt.Partitions, p)
			}
			unknown := kmsg.NewProduceRequestTopic()
			unknown.Topic = "nope"
			p := kmsg.NewProduceRequestTopicPartition()
			p.Records = magic1("x")
			unknown.Partitions = append(unknown.Partitions, p)
			req.Topics = append(req.Topics, rt, unknown)
			resp := s.handleProduce(context.Background(), &reqCtx{turn: make(chan struct{})}, req).(*kmsg.ProduceResponse)
			if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 1 || len(resp.Topics[1].Partitions) != 1 {
				t.Fatalf("answered %+v, want t-0 once and nope-0", resp.Topics)
			}
			if p := resp.Topics[0].Partitions[0]; kerr.Code(p.ErrorCode) != kerr.InvalidRecord || p.BaseOffset != -1 {
				t.Errorf("t-0 answered %s at %d, want the invalid copy's INVALID_RECORD at -1", kerr.Code(p.ErrorCode), p.BaseOffset)
			}
			if p := resp.Topics[1].Partitions[0]; kerr.Code(p.ErrorCode) != kerr.UnknownTopicOrPartition {
				t.Errorf("nope-0 answered %s, want UNKNOWN_TOPIC_OR_PARTITION", kerr.Code(p.ErrorCode))
			}
			r, _ := s.opts.RM.Replica(replica.TP{Topic: "t", Partition: 0})
			read, err := r.Log().Read(0, 1<<20, r.Log().LogEndOffset())
			if err != nil {
				t.Fatal(err)
			}
			if leo := r.Log().LogEndOffset(); leo != 1 || !bytes.Contains(read.Records, []byte(c.wantAppended)) {
				t.Fatalf("log end %d holding %q, want the valid copy %q appended", leo, read.Records, c.wantAppended)
			}
		})
	}
}

// A write refused while the leadership moves answers, as other
// NOT_LEADER_OR_FOLLOWER answers do (KIP-951, Produce v10+), the leader to
// go to and its endpoint: the broker the controller means to elect, and,
// once the election is in this broker's metadata, that leader at its new
// epoch, which a client taking only newer epochs acts on.
func TestProduceToAYieldedLeaderNamesTheNextLeader(t *testing.T) {
	s := withLeader(t)
	endpoints := map[int32]map[string]string{1: {"kafka": "kafka1:19092"}, 2: {"kafka": "kafka2:19092"}}
	registerEndpoints(t, s, endpoints)
	yr, err := s.opts.RM.YieldLeadership(&controlv1.YieldLeadershipRequest{ControllerId: 100, ControllerEpoch: 1,
		Partitions: []*controlv1.YieldPartition{{Topic: "t", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 1, NextLeader: 2}}})
	if err != nil || kerr.Code(yr.GetPartitions()[0].GetErrorCode()) != kerr.None {
		t.Fatalf("yield: %v %v", yr, err)
	}
	produce := func(what string, wantEpoch int32) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(10)
		req.Acks, req.TimeoutMillis = 1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = oneRecordBatch()
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		resp := s.handleProduce(context.Background(), &reqCtx{turn: make(chan struct{})}, req).(*kmsg.ProduceResponse)
		rp := resp.Topics[0].Partitions[0]
		if kerr.Code(rp.ErrorCode) != kerr.NotLeaderOrFollower || rp.CurrentLeader.LeaderID != 2 || rp.CurrentLeader.LeaderEpoch != wantEpoch {
			t.Fatalf("%s: %s, current leader %d at epoch %d, want NOT_LEADER_OR_FOLLOWER naming broker 2 at epoch %d",
				what, kerr.Code(rp.ErrorCode), rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch, wantEpoch)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Host != "kafka2" || resp.Brokers[0].Port != 19092 {
			t.Fatalf("%s: leader endpoints %+v, want broker 2's", what, resp.Brokers)
		}
	}
	produce("while yielded", 1)
	um := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: 1, ClusterId: "c",
		Partitions: []*commonv1.PartitionState{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 1,
			Replicas: []int32{1, 2}, Isr: []int32{1, 2}}}}
	for id, eps := range endpoints {
		um.Brokers = append(um.Brokers, &controlv1.BrokerRegistration{Node: &commonv1.Node{Id: id, Address: "b"}, Endpoints: eps})
	}
	if err := s.opts.RM.UpdateMetadata(um); err != nil {
		t.Fatal(err)
	}
	produce("once the election is in the metadata", 2)
}
