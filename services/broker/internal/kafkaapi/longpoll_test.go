package kafkaapi

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/broker/internal/replica"
)

// A long poll that has what it waited for must return, and leave none of
// its goroutines behind, even when a parked partition still brings bytes
// (an append right as the wait ends). Each partition's goroutine handed its
// bytes over with a plain channel send, one slot per partition: with the
// wait no longer reading, the goroutine blocked for ever on a full slot,
// and the fetch waited for it for ever, its connection stuck. On one P the
// woken wait runs only once the goroutine blocks, which makes it certain.
func TestLongPollEndsWhileAParkedPartitionStillBringsBytes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := New(Options{})
	s.parkedFetch = func(ctx context.Context, f replica.ConsumerFetch) (replica.ConsumerFetchResult, error) {
		if ctx.Err() != nil {
			return replica.ConsumerFetchResult{NextOffset: f.Offset, PreferredReadReplica: -1}, nil
		}
		return replica.ConsumerFetchResult{Records: []byte{1}, NextOffset: f.Offset + 1, PreferredReadReplica: -1}, nil
	}
	req := kmsg.NewPtrFetchRequest()
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	answered := kmsg.NewFetchResponseTopic()
	for p := range int32(2) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		ap := kmsg.NewFetchResponseTopicPartition()
		ap.Partition, ap.PreferredReadReplica = p, -1
		answered.Partitions = append(answered.Partitions, ap)
	}
	req.Topics = append(req.Topics, rt)
	resp.Topics = append(resp.Topics, answered)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.waitForBytes(context.Background(), req, resp, 1, 1<<20, time.Minute) // the first byte is enough
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not return once it had its byte: a parked partition's goroutine is stuck handing over more")
	}
}
