package kafkaapi

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func oneRecordBatch() []byte {
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: 1, Value: []byte("v")})
	return b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
}

// An acks=all Produce naming one partition hundreds of times is served by
// at most produceWorkers goroutines, within the request's one timeout, and
// answered entry by entry in request order. Before, every entry parked a
// goroutine of its own until the timeout.
func TestProduceBoundsTheEntriesServedAtOnce(t *testing.T) {
	s := withLeader(t)
	const entries, timeout = 3 * produceWorkers, 400
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, timeout
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for i := range entries {
		p := kmsg.NewProduceRequestTopicPartition()
		if i%10 == 9 {
			p.Partition = 7 // not hosted here: refused at once
		}
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
		want, wantCode := int32(0), kerr.RequestTimedOut // broker 2 never fetches
		if i%10 == 9 {
			want, wantCode = 7, kerr.UnknownTopicOrPartition
		}
		if p.Partition != want || kerr.Code(p.ErrorCode) != wantCode {
			t.Errorf("entry %d: partition %d %s, want partition %d %s", i, p.Partition, kerr.Code(p.ErrorCode), want, wantCode)
		}
	}
}
