package kafkaapi

import (
	"context"
	"encoding/base64"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
)

// handleFetch serves consumers through the gRPC Fetch handler, partition by
// partition, returning the stored batches as they are (compressed ones
// included). Fetch sessions (KIP-227) are answered sessionless: session id
// 0 tells the client to send full requests.
//
// Long poll: a first pass reads every partition without waiting; if it
// found fewer than min_bytes and max_wait allows, each distinct partition
// that answered without error parks (the fetch purgatory, one goroutine
// per partition) until min_bytes have arrived across them, one of them
// has news (an error, a divergence, a preferred replica) or max_wait ends,
// and a second pass builds the answer. Only the two passes count against
// the consumer's byte-rate quota. min_bytes above the answer's budget is
// waited for only up to the budget: more could not be sent.
func (s *Server) handleFetch(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	// A partition named twice is read and answered once, with its last
	// entry, as Kafka's FetchRequest.fetchData map keeps it.
	req.Topics = lastOfEach(req.Topics, func(t *kmsg.FetchRequestTopic) string { return t.Topic + "\x00" + string(t.TopicID[:]) },
		func(t *kmsg.FetchRequestTopic) *[]kmsg.FetchRequestTopicPartition { return &t.Partitions },
		func(p *kmsg.FetchRequestTopicPartition) int32 { return p.Partition })
	// No fetch sessions are kept (KIP-227): every answer names session 0,
	// so clients go on with full fetches. As in Kafka's FetchManager, a
	// full fetch (epoch 0, or -1 to close) naming a session closes it, a
	// no-op here, and is answered; only an incremental fetch needs one.
	if req.SessionEpoch > 0 {
		resp.ErrorCode = int16(kerr.FetchSessionIDNotFound)
		return resp
	}
	if req.Version >= 13 {
		s.nameFetchTopics(req)
	}
	maxWait := time.Duration(min(max(req.MaxWaitMillis, 0), 60000)) * time.Millisecond // the gRPC fetch's bound
	budget := s.fetchBudget(req)
	minBytes := min(max(int(req.MinBytes), 1), max(budget, 1))
	ctx, waited := s.opts.Broker.WaitFetchThrottle(ctx)
	if req.Version < 8 {
		// From v8 on the client waits out throttle_time_ms itself after
		// the answer (KIP-219): the answer tells only what is still owed,
		// not the wait already served here, which it would wait again.
		defer func() { resp.ThrottleMillis = max(resp.ThrottleMillis, waited) }()
	}
	total := s.fetchPass(ctx, req, resp, budget)
	if total >= minBytes || maxWait <= 0 || ctx.Err() != nil || hasNews(resp) {
		return resp
	}
	// The parked reads count from the offsets asked for, as the second
	// pass reads: what the first pass found counts again there.
	if !s.waitForBytes(ctx, req, resp, minBytes, budget, maxWait) {
		return resp
	}
	resp.Topics = nil
	s.fetchPass(ctx, req, resp, budget)
	return resp
}

// fetchBudget is what a fetch's answer may carry: the request's max_bytes
// lowered to fetch.max.bytes. The smaller applies, as in Kafka: each
// partition was held to fetch.max.bytes, but a fetch of many partitions
// asking 2 GiB was answered with up to that much.
func (s *Server) fetchBudget(req *kmsg.FetchRequest) int {
	return max(int(min(req.MaxBytes, s.opts.RM.BrokerConfig().FetchMaxBytes)), 0)
}

// hasNews reports whether a first pass found something the consumer must
// hear at once, as Kafka answers without waiting then: an error, a log that
// diverged from what it read, a replica to read from instead.
func hasNews(resp *kmsg.FetchResponse) bool {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.DivergingEpoch.EndOffset >= 0 || p.PreferredReadReplica >= 0 {
				return true
			}
		}
	}
	return false
}

// nameFetchTopics gives each topic of a v13+ fetch, which names topics by
// id (KIP-516), its name; one whose id this broker does not know keeps
// none and is answered UNKNOWN_TOPIC_ID (fetchTopicID). Ids are looked up
// among every topic the cache knows, announced or not: a new topic's
// leader learns its id from its LeaderAndIsr, and its UpdateMetadata may
// wait behind a long one; fetches by id must reach it meanwhile (Kafka's
// KAFKA-13102).
func (s *Server) nameFetchTopics(req *kmsg.FetchRequest) {
	meta := s.opts.RM.Meta()
	for i := range req.Topics {
		if id := req.Topics[i].TopicID; id != ([16]byte{}) {
			req.Topics[i].Topic = meta.TopicByID(base64.RawURLEncoding.EncodeToString(id[:]))
		}
	}
}

// fetchTopicID is the topic id a fetch of topic t names, for the replica
// to check against its log's ("" before v13, which names topics only).
// A v13+ topic whose id is not the one its name has now, or is unknown,
// is refused: the topic was deleted (and perhaps created again), and
// reading the name's log would hand another topic's records.
func (s *Server) fetchTopicID(version int16, t *kmsg.FetchRequestTopic) (string, error) {
	if version < 13 {
		return "", nil
	}
	id := s.opts.RM.Meta().TopicID(t.Topic)
	if t.Topic == "" || id == "" || topicUUID(id) != t.TopicID {
		return "", kerr.New(kerr.UnknownTopicID, "topic id %s is not known", base64.RawURLEncoding.EncodeToString(t.TopicID[:]))
	}
	return id, nil
}

// fetchRequest is the gRPC Fetch a Kafka partition fetch stands for.
func fetchRequest(req *kmsg.FetchRequest, topic, topicID string, p kmsg.FetchRequestTopicPartition, maxBytes int32, wait time.Duration) *brokerv1.FetchRequest {
	out := &brokerv1.FetchRequest{Topic: topic, Partition: p.Partition, Offset: p.FetchOffset, MaxBytes: maxBytes,
		MaxWaitMs: int32(wait / time.Millisecond), MinBytes: 1, RackId: req.Rack, CurrentLeaderEpoch: p.CurrentLeaderEpoch, RawBatches: true,
		TopicId: topicID}
	if req.Version >= 12 && p.LastFetchedEpoch >= 0 {
		// KIP-320 on fetch (v12): the consumer learns of a truncation
		// under its position from the answer's DivergingEpoch.
		out.LastFetchedEpoch = &p.LastFetchedEpoch
	}
	return out
}

// fetchPass reads every partition once without waiting, within budget,
// and returns the bytes read. As Kafka's ReplicaManager.readFromLog: each
// partition reads at most its partition_max_bytes and what is left of the
// budget; until one brings records, a first batch larger than that still
// comes whole (KIP-74), after that only batches that fit are read, and
// once the budget is spent the later partitions read nothing, answered
// with their offsets only. They were read with a budget of 1 byte, which
// still read a whole first batch, charged it to the consumer's quota and
// left it out of the answer.
func (s *Server) fetchPass(ctx context.Context, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, budget int) int {
	total := 0
	var throttle int32
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		topicID, idErr := s.fetchTopicID(req.Version, &t)
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			rp.RecordBatches = []byte{} // empty, not null: librdkafka refuses a null record set
			fitOnly := total > 0
			maxBytes := max(min(int(p.PartitionMaxBytes), budget-total), 0)
			if !fitOnly {
				maxBytes = max(maxBytes, 1) // 0 would be the gRPC fetch's default
			}
			greq := fetchRequest(req, t.Topic, topicID, p, int32(maxBytes), 0)
			var gresp *brokerv1.FetchResponse
			err := idErr
			if err == nil {
				err = s.authorize(ctx, brokerv1.BrokerService_Fetch_FullMethodName, greq)
			}
			if err == nil {
				gresp, err = s.opts.Broker.FetchWithin(ctx, greq, p.CurrentLeaderEpoch, maxBytes, fitOnly)
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
				if recs := gresp.GetRecordBatches(); len(recs) > 0 {
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

// parkedReadMaxBytes bounds each read of a parked partition: it reads
// only to count what arrived, and every parked partition may read at
// once. Each read took what was left of its partition_max_bytes, up to
// the rest of a segment: k partitions parked by a fetch asking 2 GiB
// each held k such buffers at once.
const parkedReadMaxBytes = 64 << 10

// waitForBytes parks each distinct partition that answered cleanly in the
// first pass, from the offset that pass asked for, until need bytes have
// arrived across them (each counted up to its partition's max bytes and
// the budget), one of them has news, or maxWait ends. It reports whether
// the answer should be read again. A partition named many times parks
// once: one goroutine each for 20,000 copies of one partition took 150 MiB
// of stacks. Each read is bounded by what is still needed and by
// parkedReadMaxBytes (a first batch over that comes whole, as in a pass).
func (s *Server) waitForBytes(ctx context.Context, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, need, budget int, maxWait time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	type parked struct {
		tp     replica.TP
		id     string
		offset int64
		max    int
		epoch  int32
	}
	seen := map[replica.TP]bool{}
	var parts []parked
	for i, t := range req.Topics {
		id, _ := s.fetchTopicID(req.Version, &t) // refused ones answered with an error
		for j, p := range t.Partitions {
			rp := resp.Topics[i].Partitions[j]
			tp := replica.TP{Topic: t.Topic, Partition: p.Partition}
			if rp.ErrorCode != 0 || rp.PreferredReadReplica >= 0 || seen[tp] {
				continue
			}
			seen[tp] = true
			parts = append(parts, parked{tp: tp, id: id, offset: p.FetchOffset, max: max(min(int(p.PartitionMaxBytes), budget), 1), epoch: p.CurrentLeaderEpoch})
		}
	}
	fetch := s.parkedFetch
	if fetch == nil {
		fetch = s.opts.Broker.RM.Fetch
	}
	arrived := make(chan int, len(parts))
	var counted atomic.Int64 // across partitions, for the reads' bound
	news := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset, mine := p.offset, 0
			for mine < p.max && wctx.Err() == nil {
				limit := max(min(p.max-mine, need-int(counted.Load()), parkedReadMaxBytes), 1)
				res, err := fetch(wctx, replica.ConsumerFetch{TP: p.tp, Offset: offset, MaxBytes: limit,
					MinBytes: 1, MaxWait: maxWait, Rack: req.Rack, CurrentLeaderEpoch: p.epoch, TopicID: p.id})
				if err != nil || res.PreferredReadReplica >= 0 || res.Diverging != nil {
					res.Release()
					select {
					case news <- struct{}{}:
					default:
					}
					return
				}
				n := min(len(res.Records), p.max-mine)
				offset = max(offset, res.NextOffset)
				res.Release()
				if n == 0 {
					continue // woken by a HW move that brought nothing readable
				}
				mine += n
				counted.Add(int64(n))
				// The wait may have ended, and stopped reading, while
				// this partition kept bringing bytes.
				select {
				case arrived <- n:
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for got := 0; got < need; {
		select {
		case n := <-arrived:
			got += n
			continue
		case <-news:
		case <-done:
		case <-wctx.Done():
		}
		break
	}
	cancel()
	<-done
	return ctx.Err() == nil
}
