package kafkaapi

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
)

// produceWorkers bounds the partition entries of one Produce request
// served at once. Each holds a goroutine until its acks=all wait ends, and
// a request may name thousands of partitions; the entries past the first
// produceWorkers start as earlier ones finish, and every wait ends at the
// request's one deadline. It is well above the partitions a producer
// batches to one broker, whose acks=all waits must overlap: the bound is
// against a request naming partitions by the thousand, not a cost for
// real ones.
const produceWorkers = 512

// handleProduce appends each partition's batch through the gRPC Produce
// handler (validation, leader fence, idempotence, acks=all purgatory,
// quotas), up to produceWorkers partitions at once, taken in request
// order, a partition named more than once served once (distinctProduce).
// acks=0 is answered with nothing, as Kafka does. A request's timeout
// above request.timeout.max.ms is lowered to it: Kafka's clients
// send their own request timeout here. A timeout of 0 (or below) does not
// wait, as in Kafka: acks=-1 is answered at once, REQUEST_TIMED_OUT unless
// the ISR already has the batch (gRPC's timeout_ms 0 means the default
// instead).
func (s *Server) handleProduce(ctx context.Context, rc *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	// A partition named twice is appended once and answered once, as
	// Kafka's handleProduceRequest does (distinctProduce).
	var refused map[replica.TP]copyRefusal
	req.Topics, refused = distinctProduce(req.Version, req.Topics)
	timeout := min(max(req.TimeoutMillis, 0), s.opts.RM.BrokerConfig().RequestTimeoutMaxMs)
	s.opts.Broker.WaitProduceThrottle(ctx) // before anything is appended or the next request may start
	if req.Version >= 6 {
		ctx = grpcapi.ClientThrottles(ctx) // KIP-219: answered at once, the client waits out its throttle
	}
	// One deadline for the request, as Kafka's one DelayedProduce: an
	// entry that starts late waits only for what is left of it.
	deadline := time.Now().Add(time.Duration(timeout) * time.Millisecond)
	type entry struct {
		topic string
		p     kmsg.ProduceRequestTopicPartition
		rp    *kmsg.ProduceResponseTopicPartition
	}
	var entries []entry
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			entries = append(entries, entry{t.Topic, p, rp})
		}
	}
	// The next request on the connection may start once every partition
	// has appended or failed; after acks=0 only once this request is
	// done (run releases it), as it may close the connection instead.
	release := rc.release
	if req.Acks == 0 {
		release = func() {}
	}
	var left atomic.Int32
	left.Store(int32(len(entries)))
	if len(entries) == 0 {
		release()
	}
	partDone := func() {
		if left.Add(-1) == 0 {
			release()
		}
	}
	var (
		wg       sync.WaitGroup
		next     atomic.Int32
		mu       sync.Mutex
		throttle int32
	)
	for range min(len(entries), produceWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(entries) {
					return
				}
				e := entries[i]
				var once sync.Once
				done := func() { once.Do(partDone) }
				wait := max(time.Until(deadline), 0)
				ms := s.producePartition(replica.WithAppended(ctx, done), req, e.topic, e.p, refused[replica.TP{Topic: e.topic, Partition: e.p.Partition}], timeout, wait, e.rp)
				done()
				mu.Lock()
				throttle = max(throttle, ms)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if req.Acks == 0 {
		// No answer to carry an error: as Kafka, close the connection so
		// the producer refreshes its metadata (a write to a broker that no
		// longer leads the partition was lost silently until then).
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					s.log.Debug("closing the connection of an acks=0 producer whose write failed", "topic", t.Topic,
						"partition", p.Partition, "error", kerr.Code(p.ErrorCode).String())
					rc.closeConn.Store(true)
					return nil
				}
			}
		}
		return nil
	}
	resp.ThrottleMillis = throttle
	if req.Version >= 10 {
		s.addLeaderEndpoints(resp, rc.listener)
	}
	return resp
}

// addLeaderEndpoints gives the answer the Kafka address of every leader a
// partition's current_leader names (KIP-951, Produce v10+), so the producer
// redirects without a metadata round trip: their endpoints on listener,
// the one the request arrived on.
func (s *Server) addLeaderEndpoints(resp *kmsg.ProduceResponse, listener string) {
	meta := s.opts.RM.Meta()
	seen := map[int32]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			id := p.CurrentLeader.LeaderID
			if id < 0 || seen[id] {
				continue
			}
			seen[id] = true
			b, ok := meta.Broker(id)
			if !ok {
				continue
			}
			if host, port, ok := Endpoint(b, listener); ok {
				resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: id, Host: host, Port: port, Rack: rackOf(b)})
			}
		}
	}
}

// checkProduceBatch is Kafka's ProduceRequest.validateRecords for v3+: one
// batch of magic 2 (INVALID_RECORD otherwise, not the retriable
// CORRUPT_MESSAGE), and no zstd before v7 (UNSUPPORTED_COMPRESSION_TYPE).
func checkProduceBatch(version int16, records []byte) (int16, string) {
	const magicAt, attrsAt, zstd = 16, 21, 4
	if len(records) <= magicAt {
		return 0, "" // too short to tell: the log's validation answers
	}
	if m := records[magicAt]; m != 2 {
		return int16(kerr.InvalidRecord), fmt.Sprintf("Produce v%d takes record batches of magic 2 only, got magic %d", version, m)
	}
	if version < 7 && len(records) > attrsAt+1 && binary.BigEndian.Uint16(records[attrsAt:])&7 == zstd {
		return 76, fmt.Sprintf("Produce v%d cannot carry zstd batches (v7+)", version) // UNSUPPORTED_COMPRESSION_TYPE
	}
	return 0, ""
}

// copyRefusal is what checkProduceBatch said of a copy of a partition
// named more than once in a Produce.
type copyRefusal struct {
	code int16
	msg  string
}

// distinctProduce reads a Produce's entries into one per partition, as
// Kafka's handleProduceRequest reads them into maps keyed by
// topic-partition: a copy that passes validateRecords (checkProduceBatch)
// goes into the map of records to append, one that fails into the map of
// refusals, a later copy replacing an earlier one in either. So the
// partition is appended with its last valid copy, if any, and answered
// with its last invalid copy's error, if any: Kafka's answer puts the
// refusals over the append's result. The entry kept is placed as
// lastOfEach places it.
func distinctProduce(version int16, topics []kmsg.ProduceRequestTopic) ([]kmsg.ProduceRequestTopic, map[replica.TP]copyRefusal) {
	out := lastOfEach(topics, func(t *kmsg.ProduceRequestTopic) string { return t.Topic },
		func(t *kmsg.ProduceRequestTopic) *[]kmsg.ProduceRequestTopicPartition { return &t.Partitions },
		func(p *kmsg.ProduceRequestTopicPartition) int32 { return p.Partition })
	if len(topics) == 1 && len(topics[0].Partitions) <= 1 {
		return out, nil // the usual produce: nothing can repeat
	}
	copies := map[replica.TP]int{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			copies[replica.TP{Topic: t.Topic, Partition: p.Partition}]++
		}
	}
	valid := map[replica.TP][]byte{}
	var refused map[replica.TP]copyRefusal
	for _, t := range topics {
		for _, p := range t.Partitions {
			tp := replica.TP{Topic: t.Topic, Partition: p.Partition}
			if copies[tp] < 2 {
				continue
			}
			if c, m := checkProduceBatch(version, p.Records); c != 0 {
				if refused == nil {
					refused = map[replica.TP]copyRefusal{}
				}
				refused[tp] = copyRefusal{c, m}
				continue
			}
			valid[tp] = p.Records
		}
	}
	for i := range out {
		for j := range out[i].Partitions {
			p := &out[i].Partitions[j]
			if r, ok := valid[replica.TP{Topic: out[i].Topic, Partition: p.Partition}]; ok {
				p.Records = r
			}
		}
	}
	return out, refused
}

// producePartition serves one partition entry: refusal, when set, is the
// error of an invalid copy of a partition named more than once (the entry
// holds its last valid copy, if any: it is appended, and the refusal is
// the answer all the same, as Kafka's); timeout is the request's (in ms,
// as the gRPC request carries it), wait what is left of it for an
// acks=all wait.
func (s *Server) producePartition(ctx context.Context, req *kmsg.ProduceRequest, topic string, p kmsg.ProduceRequestTopicPartition, refusal copyRefusal, timeout int32, wait time.Duration, rp *kmsg.ProduceResponseTopicPartition) int32 {
	fail := func(err error) int32 {
		rp.ErrorCode, rp.ErrorMessage = code(err), message(err)
		rp.BaseOffset = -1
		// KIP-951: where the leader moved, say where to (v10+ carries it).
		if ke := kerr.FromStatus(err); ke != nil && ke.Leader != nil && ke.Leader.ID >= 0 &&
			(ke.Code == kerr.NotLeaderOrFollower || ke.Code == kerr.FencedLeaderEpoch) {
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = ke.Leader.ID, ke.Leader.LeaderEpoch
		}
		return 0
	}
	if req.TransactionID != nil {
		return fail(kerr.New(kerr.InvalidRequest, "transactional producers are not supported by tidemark"))
	}
	greq := &brokerv1.ProduceRequest{Topic: topic, Partition: p.Partition, Acks: int32(req.Acks), TimeoutMs: timeout,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: p.Records}}
	if err := s.authorize(ctx, brokerv1.BrokerService_Produce_FullMethodName, greq); err != nil {
		return fail(err)
	}
	c, m := checkProduceBatch(req.Version, p.Records)
	if c != 0 || refusal.code != 0 {
		// Kafka looks for the partition in its metadata before it
		// validates the records: an unknown one is that, whatever the
		// batch.
		meta := s.opts.RM.Meta()
		if _, ok := meta.Partition(metadata.TP{Topic: topic, Partition: p.Partition}); !ok && meta.Initialised() {
			return fail(kerr.New(kerr.UnknownTopicOrPartition, "partition %s-%d does not exist", topic, p.Partition))
		}
	}
	if c != 0 {
		rp.ErrorCode, rp.ErrorMessage, rp.BaseOffset = c, &m, -1
		return 0
	}
	if refusal.code != 0 {
		defer func() {
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage, rp.BaseOffset = p.Partition, refusal.code, &refusal.msg, -1
		}()
	}
	if err := s.opts.Broker.CheckBatchClaims(p.Records); err != nil {
		return fail(err)
	}
	gresp, err := s.opts.Broker.ProduceWaiting(ctx, greq, wait)
	if err != nil {
		ms := fail(err)
		rp.LogStartOffset = s.logStartOnRefusal(topic, p.Partition, err)
		return ms
	}
	// LogAppendTime stays -1: tidemark's topics keep the producer's
	// CreateTime, and Kafka answers -1 for those.
	rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = gresp.GetBaseOffset(), -1, gresp.GetLogStartOffset()
	return gresp.GetThrottleTimeMs()
}

// logStartOnRefusal is the log_start_offset of a batch the producer state
// refused, as Kafka's processFailedRecord gives it: an idempotent producer
// compares it with its last acknowledged offset to tell state dropped with
// deleted records from a lost write (KIP-360). With -1 Kafka's Java
// producer resends the batch, sequence unchanged, until its delivery
// timeout; kgo reports data loss.
func (s *Server) logStartOnRefusal(topic string, partition int32, err error) int64 {
	switch kerr.Code(code(err)) {
	case kerr.UnknownProducerID, kerr.OutOfOrderSequenceNumber, kerr.InvalidProducerEpoch:
		if r, ok := s.opts.RM.Replica(replica.TP{Topic: topic, Partition: partition}); ok {
			return r.Log().LogStartOffset()
		}
	}
	return -1
}
