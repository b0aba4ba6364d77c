package kafkaapi

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// handleFetch serves consumers through the gRPC Fetch handler, partition by
// partition, returning the stored batches as they are (compressed ones
// included). Fetch sessions (KIP-227) are answered sessionless: session id
// 0 tells the client to send full requests.
//
// Long poll: a first pass reads every partition without waiting; if it
// found fewer than min_bytes and max_wait allows, every partition that
// answered without error parks (the fetch purgatory, one goroutine each)
// until one of them has data or max_wait ends, and a second pass builds the
// answer.
func (s *Server) handleFetch(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.SessionID != 0 || req.SessionEpoch > 0 {
		resp.ErrorCode = int16(kerr.FetchSessionIDNotFound) // no sessions are kept: start again sessionless
		return resp
	}
	maxWait := time.Duration(min(max(req.MaxWaitMillis, 0), 60000)) * time.Millisecond // the gRPC fetch's bound
	total := s.fetchPass(ctx, req, resp)
	if total >= max(int(req.MinBytes), 1) || maxWait <= 0 || ctx.Err() != nil {
		return resp
	}
	if !s.waitForData(ctx, req, resp, maxWait) {
		return resp
	}
	resp.Topics = nil
	s.fetchPass(ctx, req, resp)
	return resp
}

// fetchRequest is the gRPC Fetch a Kafka partition fetch stands for.
func fetchRequest(req *kmsg.FetchRequest, topic string, p kmsg.FetchRequestTopicPartition, maxBytes int32, wait time.Duration) *brokerv1.FetchRequest {
	out := &brokerv1.FetchRequest{Topic: topic, Partition: p.Partition, Offset: p.FetchOffset, MaxBytes: maxBytes,
		MaxWaitMs: int32(wait / time.Millisecond), MinBytes: 1, RackId: req.Rack, CurrentLeaderEpoch: p.CurrentLeaderEpoch, RawBatches: true}
	if req.Version >= 12 && p.LastFetchedEpoch >= 0 {
		// KIP-320 on fetch (v12): the consumer learns of a truncation
		// under its position from the answer's DivergingEpoch.
		out.LastFetchedEpoch = &p.LastFetchedEpoch
	}
	return out
}

// fetchPass reads every partition once without waiting, within the
// request's max_bytes (the first partition with data always gets its first
// batch, as in Kafka), and returns the bytes read.
func (s *Server) fetchPass(ctx context.Context, req *kmsg.FetchRequest, resp *kmsg.FetchResponse) int {
	budget := int(req.MaxBytes)
	if req.Version < 3 || budget <= 0 {
		budget = 1 << 30
	}
	total := 0
	var throttle int32
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			rp.RecordBatches = []byte{} // empty, not null: librdkafka refuses a null record set
			pmax := p.PartitionMaxBytes
			if remaining := budget - total; remaining < int(pmax) {
				pmax = int32(max(remaining, 1))
			}
			greq := fetchRequest(req, t.Topic, p, pmax, 0)
			var gresp *brokerv1.FetchResponse
			err := s.authorize(ctx, brokerv1.BrokerService_Fetch_FullMethodName, greq)
			if err == nil {
				gresp, err = s.opts.Broker.FetchAtEpoch(ctx, greq, p.CurrentLeaderEpoch)
			}
			if err != nil {
				rp.ErrorCode = code(err)
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			} else {
				rp.HighWatermark = gresp.GetHighWatermark()
				rp.LastStableOffset = gresp.GetHighWatermark() // no transactions: the LSO is the HW
				rp.LogStartOffset = gresp.GetLogStartOffset()
				rp.PreferredReadReplica = gresp.GetPreferredReadReplica()
				if req.Version < 11 && rp.PreferredReadReplica >= 0 {
					rp.PreferredReadReplica = -1
				}
				if d := gresp.GetDivergingEpoch(); d != nil {
					rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = d.GetEpoch(), d.GetEndOffset()
				}
				if recs := gresp.GetRecordBatches(); len(recs) > 0 && (total < budget || total == 0) {
					rp.RecordBatches = recs
					total += len(recs)
				}
				throttle = max(throttle, gresp.GetThrottleTimeMs())
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.ThrottleMillis = throttle
	return total
}

// waitForData parks every partition that answered cleanly until one has
// records or maxWait ends. It reports whether the answer should be read
// again.
func (s *Server) waitForData(ctx context.Context, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, maxWait time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	woke := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if resp.Topics[i].Partitions[j].ErrorCode != 0 || resp.Topics[i].Partitions[j].PreferredReadReplica >= 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				gresp, err := s.opts.Broker.FetchAtEpoch(wctx, fetchRequest(req, t.Topic, p, 1, maxWait), p.CurrentLeaderEpoch)
				if err != nil || len(gresp.GetRecordBatches()) > 0 || gresp.GetPreferredReadReplica() >= 0 || gresp.GetDivergingEpoch() != nil {
					select {
					case woke <- struct{}{}:
					default:
					}
				}
			}()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-woke:
	case <-done:
	case <-wctx.Done():
	}
	cancel()
	<-done
	return ctx.Err() == nil
}
