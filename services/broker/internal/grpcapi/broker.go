// Package grpcapi holds the broker's thin gRPC handlers: validate the
// request, call the replica manager, map the answer. Errors are returned as
// *kerr.Error; the shared server interceptor turns them into statuses.
package grpcapi

import (
	"cmp"
	"context"
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker/internal/quota"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
	"tidemark.io/services/recordbatch"
	"tidemark.io/services/topicconfig"
)

// ProducerIDs hands out producer ids (blocks come from the controller).
type ProducerIDs interface {
	Next(ctx context.Context) (int64, error)
}

// Broker serves BrokerService.
type Broker struct {
	brokerv1.UnimplementedBrokerServiceServer
	RM          *replica.Manager
	ProducerIDs ProducerIDs
	// Quotas holds answers of clients over their byte rates; nil: none.
	Quotas *quota.Manager
	// ClientID is the client id a request's context carries (the Kafka
	// request header's), which client quota entities match on; nil: none.
	ClientID func(context.Context) string
	// Authorize decides one request of a produce stream as the unary call
	// would be decided (the stream's opening is decided by the
	// interceptor); nil: no authorization.
	Authorize func(ctx context.Context, method string, req any) error
	// TracerProvider makes the per-request spans of produce streams; nil:
	// none.
	TracerProvider trace.TracerProvider
	// Draining, once done, ends every produce and follow stream (the requests in
	// flight are answered first), so the broker can stop.
	Draining context.Context
	// FollowKeepAlive is how long a follow stream stays silent at most
	// (0: 15 s): an answer with no records then says where the log stands
	// and keeps an idle stream open through proxies that close quiet
	// connections.
	FollowKeepAlive time.Duration
}

var _ brokerv1.BrokerServiceServer = (*Broker)(nil)

func checkTP(topic string, partition int32) (replica.TP, error) {
	if topic == "" {
		return replica.TP{}, kerr.BadField(kerr.InvalidTopicException, "topic", "must not be empty")
	}
	if partition < 0 {
		return replica.TP{}, kerr.BadField(kerr.UnknownTopicOrPartition, "partition", "must be >= 0, got %d", partition)
	}
	return replica.TP{Topic: topic, Partition: partition}, nil
}

// Produce appends a batch on the partition leader.
func (b *Broker) Produce(ctx context.Context, req *brokerv1.ProduceRequest) (*brokerv1.ProduceResponse, error) {
	wait := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if wait == 0 {
		wait = replica.DefaultProduceTimeout // timeout_ms 0 is the default (broker.proto)
	}
	resp, err := b.ProduceWaiting(ctx, req, wait)
	if _, raw := req.GetPayload().(*brokerv1.ProduceRequest_RecordBatch); raw && err != nil {
		err = namedBatch(err)
	}
	return resp, err
}

// ProduceWaiting is Produce with the acks=-1 wait taken as given, 0 not
// waiting at all (REQUEST_TIMED_OUT unless the ISR already holds the
// batch): Kafka's clients send 0 as a real timeout, where timeout_ms 0
// means the default.
func (b *Broker) ProduceWaiting(ctx context.Context, req *brokerv1.ProduceRequest, wait time.Duration) (*brokerv1.ProduceResponse, error) {
	tp, err := checkTP(req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	if topicconfig.IsInternal(tp.Topic) {
		// Only the group coordinator writes it, through the replica
		// manager; Kafka answers a client's produce to an internal topic
		// the same way.
		return nil, kerr.BadField(kerr.InvalidTopicException, "topic", "%s is an internal topic: clients cannot produce to it", tp.Topic)
	}
	acks := req.GetAcks()
	if acks != 0 && acks != 1 && acks != -1 {
		return nil, kerr.BadField(kerr.InvalidRequiredAcks, "acks", "must be 0, 1 or -1 (all), got %d", acks)
	}
	if err := b.checkTimeout(req.GetTimeoutMs()); err != nil {
		return nil, err
	}
	var batch []byte
	switch p := req.GetPayload().(type) {
	case *brokerv1.ProduceRequest_RecordBatch:
		batch = p.RecordBatch
		if len(batch) == 0 {
			return nil, kerr.BadField(kerr.InvalidRecord, "record_batch", "is empty")
		}
		// One batch, as Kafka's Produce v3+ (every door comes here).
		if size, ok := recordbatch.PeekSize(batch); ok && size >= recordbatch.HeaderSize && size < int64(len(batch)) {
			return nil, kerr.BadField(kerr.InvalidRecord, "record_batch",
				"holds %d bytes after a batch of %d: a produce carries exactly one record batch", int64(len(batch))-size, size)
		}
		// Record headers count against produce.max.records.per.request
		// in the log's validation (a compressed batch is decompressed
		// once, there).
	case *brokerv1.ProduceRequest_Records:
		recs := p.Records.GetRecords()
		if len(recs) == 0 {
			return nil, kerr.BadField(kerr.InvalidRecord, "records", "at least one record is needed")
		}
		// The batch header holds an int16 epoch: a larger one would wrap
		// to another producer's epoch (65536 to 0) and pass the fencing.
		if e := req.GetProducerEpoch(); req.GetProducerId() > 0 && e != int32(int16(e)) {
			return nil, kerr.BadField(kerr.InvalidRequest, "producer_epoch", "must fit a batch's int16 epoch (at most %d), got %d", math.MaxInt16, e)
		}
		batch = encodeRecords(recs, req.GetProducerId(), req.GetProducerEpoch(), req.GetBaseSequence())
	default:
		return nil, kerr.BadField(kerr.InvalidRequest, "payload", "give record_batch or records")
	}
	res, err := b.RM.Produce(ctx, tp, int16(acks), batch, wait)
	if err != nil {
		return nil, b.unready(err)
	}
	out := &brokerv1.ProduceResponse{
		BaseOffset: res.BaseOffset, LastOffset: res.LastOffset, LogAppendTime: res.LogAppendTime,
		LogStartOffset: res.LogStartOffset, Duplicate: res.Duplicate, LeaderEpoch: res.LeaderEpoch,
	}
	if acks == 0 {
		out.BaseOffset, out.LastOffset = -1, -1
	}
	if !res.Duplicate {
		out.ThrottleTimeMs = b.throttle(ctx, quota.Produce, len(batch))
	}
	return out, nil
}

// namedBatch names record_batch as the field of the log's refusal of a gRPC
// caller's batch (its CRC, framing, counts, codec, timestamps, size): the
// log's validation speaks of the batch, not of the request that carried it.
// The Kafka listener's answers keep the log's words.
func namedBatch(err error) error {
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Field != "" {
		return err
	}
	switch ke.Code {
	case kerr.CorruptMessage, kerr.InvalidRecord, kerr.InvalidTimestamp, kerr.MessageTooLarge, kerr.RecordListTooLarge:
		named := *ke
		named.Field = "record_batch"
		named.Message = "record_batch: " + ke.Message
		return &named
	}
	return err
}

// encodeRecords builds one batch from structured records (REST and grpcurl
// users); timestamp 0 means now.
func encodeRecords(recs []*commonv1.Record, pid int64, epoch, seq int32) []byte {
	var bld recordbatch.Builder
	now := time.Now().UnixMilli()
	for _, r := range recs {
		ts := r.GetTimestamp()
		if ts == 0 {
			ts = now
		}
		rec := recordbatch.Record{Timestamp: ts, Key: r.GetKey(), Value: r.GetValue()}
		for _, h := range r.GetHeaders() {
			rec.Headers = append(rec.Headers, recordbatch.Header{Key: h.GetKey(), Value: h.GetValue()})
		}
		bld.Append(rec)
	}
	if pid <= 0 {
		return bld.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
	}
	return bld.Build(pid, int16(epoch), seq)
}

// Fetch reads records for a consumer.
func (b *Broker) Fetch(ctx context.Context, req *brokerv1.FetchRequest) (*brokerv1.FetchResponse, error) {
	epoch := req.GetCurrentLeaderEpoch()
	if epoch == 0 {
		epoch = -1 // unset in JSON and grpcurl: skip the check
	}
	return b.FetchAtEpoch(ctx, req, epoch)
}

// FetchAtEpoch is Fetch with the caller's current leader epoch taken as
// given, -1 skipping the check: Kafka's clients send 0 as a real epoch,
// where protobuf cannot tell 0 from unset.
func (b *Broker) FetchAtEpoch(ctx context.Context, req *brokerv1.FetchRequest, epoch int32) (*brokerv1.FetchResponse, error) {
	return b.FetchWithin(ctx, req, epoch, b.fetchMaxBytes(req.GetMaxBytes()), false)
}

// FetchWithin is FetchAtEpoch reading at most maxBytes, which the caller
// has already bounded by fetch.max.bytes (a Kafka fetch shares one budget
// among its partitions); fitOnly leaves out a first batch larger than
// that (replica.ConsumerFetch.FitOnly). Only what is read is charged, and
// all of it is answered.
func (b *Broker) FetchWithin(ctx context.Context, req *brokerv1.FetchRequest, epoch int32, maxBytes int, fitOnly bool) (*brokerv1.FetchResponse, error) {
	tp, err := checkTP(req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	if err := checkFetchNumbers(req.GetOffset(), req.GetMaxBytes(), req.GetMaxWaitMs(), req.GetMinBytes()); err != nil {
		return nil, err
	}
	if err := checkRack(req.GetRackId()); err != nil {
		return nil, err
	}
	if req.LastFetchedEpoch != nil && req.GetLastFetchedEpoch() < 0 {
		return nil, kerr.BadField(kerr.InvalidRequest, "last_fetched_epoch", "must be >= 0 when set, got %d", req.GetLastFetchedEpoch())
	}
	if b.Draining != nil && req.GetMaxWaitMs() > 0 {
		// A fetch parked on a partition the controlled shutdown could not
		// move (its only replica, or a follower read) must not hold the
		// stop for up to its max wait.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(b.Draining, cancel)()
	}
	waited := b.fetchThrottle(ctx)
	f := replica.ConsumerFetch{
		TP: tp, Offset: req.GetOffset(), MaxBytes: maxBytes, MinBytes: int(req.GetMinBytes()),
		MaxWait: time.Duration(req.GetMaxWaitMs()) * time.Millisecond, Rack: req.GetRackId(), CurrentLeaderEpoch: epoch,
		LastFetchedEpoch: req.GetLastFetchedEpoch(), HasLastFetchedEpoch: req.LastFetchedEpoch != nil,
		TopicID: req.GetTopicId(), FitOnly: fitOnly,
	}
	waitEnds := time.Now().Add(f.MaxWait)
	res, out, err := b.consumerRead(ctx, f, req)
	if err != nil {
		return nil, err
	}
	size := grpcserver.AnswerSize(out)
	charge, ok := grpcserver.TryReserveAnswer(ctx, size)
	if !ok {
		res.Release()
		if res, out, charge, err = b.readWithinBudget(ctx, f, req, size, waitEnds); err != nil {
			return nil, err
		}
	}
	charge.Queue(grpcserver.AnswerSize(out))
	out.ThrottleTimeMs = max(waited, b.fetchRecorded(ctx, len(res.Records)))
	// The reply aliases the read buffer (raw batches, or decoded keys and
	// values): it goes back to the pool once gRPC has encoded the reply.
	grpcserver.ReleaseAfterSend(ctx, res.Release)
	return out, nil
}

// consumerRead reads f and builds its answer; on an error nothing is kept.
func (b *Broker) consumerRead(ctx context.Context, f replica.ConsumerFetch, req *brokerv1.FetchRequest) (replica.ConsumerFetchResult, *brokerv1.FetchResponse, error) {
	res, err := b.RM.Fetch(ctx, f)
	if err != nil {
		return res, nil, b.unready(err)
	}
	if ctx.Err() != nil && b.Draining != nil && b.Draining.Err() != nil {
		res.Release()
		return res, nil, errShuttingDown()
	}
	out, err := fetchResponse(res, req.GetOffset(), req.GetRawBatches())
	if err != nil {
		res.Release()
		return res, nil, err
	}
	return res, out, nil
}

// answerEnvelope is room charged for a fetch answer's fields around its
// records.
const answerEnvelope = 512

// readWithinBudget reads f again once the connection's answer budget
// (max.queued.answer.bytes.per.connection) has room, its client having
// left that much unread: it waits for the client to read, until the
// fetch's max wait ends, then reads what fits in the room it got (nothing
// when none: the answer then carries the offsets only). wanted is the
// size of the answer that did not fit.
func (b *Broker) readWithinBudget(ctx context.Context, f replica.ConsumerFetch, req *brokerv1.FetchRequest, wanted int, waitEnds time.Time) (replica.ConsumerFetchResult, *brokerv1.FetchResponse, *grpcserver.AnswerReservation, error) {
	wait, cancel := context.WithDeadline(ctx, waitEnds)
	defer cancel()
	charge := grpcserver.ReserveAnswer(ctx, wait, wanted)
	f.MaxBytes, f.MaxWait, f.FitOnly = max(charge.Bytes()-answerEnvelope, 0), 0, true
	res, out, err := b.consumerRead(ctx, f, req)
	if err != nil {
		charge.Cancel()
		return res, nil, nil, err
	}
	return res, out, charge, nil
}

// maxKafkaString is the longest string Kafka's protocol carries (an int16
// length); no longer name, id or rack means anything to a broker.
const maxKafkaString = math.MaxInt16

// checkRack refuses a rack_id no Kafka fetch could carry: it was kept with
// the fetch and compared with every replica's rack.
func checkRack(rack string) error {
	if len(rack) > maxKafkaString {
		return kerr.BadField(kerr.InvalidRequest, "rack_id", "%d bytes; at most %d", len(rack), maxKafkaString)
	}
	return nil
}

func checkFetchNumbers(offset int64, maxBytes, maxWait, minBytes int32) error {
	switch {
	case offset < 0:
		return kerr.BadField(kerr.OffsetOutOfRange, "offset", "must be >= 0, got %d", offset)
	case maxBytes < 0:
		return kerr.BadField(kerr.InvalidRequest, "max_bytes", "must not be negative")
	case maxWait < 0:
		return kerr.BadField(kerr.InvalidRequest, "max_wait_ms", "must not be negative")
	case maxWait > replica.MaxFetchWaitMs:
		return kerr.BadField(kerr.InvalidRequest, "max_wait_ms", "at most %d, got %d", replica.MaxFetchWaitMs, maxWait)
	case minBytes < 0:
		return kerr.BadField(kerr.InvalidRequest, "min_bytes", "must not be negative")
	}
	return nil
}

func fetchResponse(res replica.ConsumerFetchResult, from int64, raw bool) (*brokerv1.FetchResponse, error) {
	out := &brokerv1.FetchResponse{
		HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset, LogEndOffset: res.LogEndOffset,
		PreferredReadReplica: res.PreferredReadReplica, NextOffset: res.NextOffset, TopicId: res.TopicID,
	}
	if d := res.Diverging; d != nil {
		out.DivergingEpoch = &brokerv1.DivergingEpoch{Epoch: d.Epoch, EndOffset: d.EndOffset}
	}
	if raw {
		out.RecordBatches = res.Records
		return out, nil
	}
	recs, err := DecodeRecords(res.Records, from)
	if err != nil {
		return nil, err
	}
	out.Records = recs
	return out, nil
}

// DecodeRecords turns batches into structured records at or after from.
func DecodeRecords(batches []byte, from int64) ([]*commonv1.Record, error) {
	var out []*commonv1.Record
	for batch, err := range recordbatch.All(batches) {
		if err != nil {
			return nil, kerr.New(kerr.CorruptMessage, "decoding fetched batches: %v", err)
		}
		epoch := batch.PartitionLeaderEpoch()
		for r, err := range batch.Records() {
			if err != nil {
				return nil, kerr.New(kerr.CorruptMessage, "decoding records: %v", err)
			}
			if r.Offset < from {
				continue
			}
			rec := &commonv1.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, LeaderEpoch: epoch}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, &commonv1.RecordHeader{Key: h.Key, Value: h.Value})
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

// Follow streams fetch answers as the HW moves, until the client leaves.
// The first answer comes at once, records or not (a REST reader gets its
// headers and the partition's offsets without waiting for a write), and an
// idle stream gets an answer with no records every FollowKeepAlive.
func (b *Broker) Follow(req *brokerv1.FollowRequest, stream brokerv1.BrokerService_FollowServer) error {
	tp, err := checkTP(req.GetTopic(), req.GetPartition())
	if err != nil {
		return err
	}
	if err := checkFetchNumbers(req.GetOffset(), req.GetMaxBytes(), 0, 0); err != nil {
		return err
	}
	if err := checkRack(req.GetRackId()); err != nil {
		return err
	}
	if req.LastFetchedEpoch != nil && req.GetLastFetchedEpoch() < 0 {
		return kerr.BadField(kerr.InvalidRequest, "last_fetched_epoch", "must be >= 0 when set, got %d", req.GetLastFetchedEpoch())
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if b.Draining != nil {
		// A follower's rack-aware reader stays after the controlled
		// shutdown moved the leadership: its parked fetch must not hold
		// the stop.
		defer context.AfterFunc(b.Draining, cancel)()
	}
	offset := req.GetOffset()
	// The epoch of the last record the reader has, checked on every read:
	// the stream reads at no fixed leader epoch, so the replica may lose
	// and regain its leadership, or (a rack's follower) be truncated,
	// between two reads.
	lastEpoch, hasLastEpoch := req.GetLastFetchedEpoch(), req.LastFetchedEpoch != nil
	// The topic the stream reads, from its first read on when the reader
	// named none: a topic deleted and created again under its name while
	// the stream waits ends it with UNKNOWN_TOPIC_ID, where the new topic's
	// records at the old offsets were sent as if they followed the old.
	topicID := req.GetTopicId()
	var sentAt time.Time // zero until the first answer
	keepAlive := cmp.Or(b.FollowKeepAlive, 15*time.Second)
	// room is charged to the connection's answer budget for the next read,
	// after an answer that did not fit: that read is at once and within it.
	var room *grpcserver.AnswerReservation
	defer func() { room.Cancel() }()
	budget := grpcserver.CallBudgetOf(ctx) // found once: every answer of the stream is charged to it
	for ctx.Err() == nil {
		waited := b.fetchThrottle(ctx)
		maxWait := min(5*time.Second, keepAlive)
		if sentAt.IsZero() {
			maxWait = 0
		}
		maxBytes := b.fetchMaxBytes(req.GetMaxBytes())
		if room != nil {
			maxWait, maxBytes = 0, max(min(maxBytes, room.Bytes()-answerEnvelope), 1)
		}
		res, err := b.RM.Fetch(ctx, replica.ConsumerFetch{
			TP: tp, Offset: offset, MaxBytes: maxBytes, MinBytes: 1,
			MaxWait: maxWait, Rack: req.GetRackId(), CurrentLeaderEpoch: -1,
			LastFetchedEpoch: lastEpoch, HasLastFetchedEpoch: hasLastEpoch, TopicID: topicID,
		})
		if b.Draining != nil && b.Draining.Err() != nil {
			if err == nil {
				res.Release()
			}
			return errShuttingDown()
		}
		if err != nil {
			return b.unready(err)
		}
		topicID = cmp.Or(topicID, res.TopicID)
		if d := res.Diverging; d != nil {
			if d.EndOffset >= offset {
				// The epoch read last is gone, but the log still holds
				// everything below offset: read on, checked against
				// the older epoch (as the client's consumer does).
				lastEpoch = d.Epoch
				continue
			}
			if err := stream.Send(&brokerv1.FollowResponse{Fetch: &brokerv1.FetchResponse{
				HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset, LogEndOffset: res.LogEndOffset,
				PreferredReadReplica: -1, NextOffset: offset, TopicId: res.TopicID,
				DivergingEpoch: &brokerv1.DivergingEpoch{Epoch: d.Epoch, EndOffset: d.EndOffset},
			}}); err != nil {
				return err
			}
			return kerr.New(kerr.OffsetOutOfRange, "%s: the log was truncated under this reader: it holds what was read only below offset %d (leader epoch %d), not up to %d; read on from %d",
				tp, d.EndOffset, d.Epoch, offset, d.EndOffset)
		}
		if len(res.Records) == 0 && res.PreferredReadReplica < 0 && !sentAt.IsZero() && time.Since(sentAt) < keepAlive {
			res.Release()
			room.Cancel()
			room = nil
			continue
		}
		out, err := fetchResponse(res, offset, req.GetRawBatches())
		if err != nil {
			res.Release()
			return err
		}
		charge := room
		room = nil
		if charge == nil {
			var fits bool
			size := grpcserver.AnswerSize(out)
			if charge, fits = budget.TryReserve(size); !fits {
				// Its client has not read what it has: wait for room,
				// then read again what fits.
				res.Release()
				room = budget.Reserve(ctx, size)
				continue
			}
		}
		if e, ok := recordbatch.LastEpochFrom(res.Records, offset); ok {
			lastEpoch, hasLastEpoch = e, true
		}
		out.ThrottleTimeMs = max(waited, b.fetchRecorded(ctx, len(res.Records)))
		resp := &brokerv1.FollowResponse{Fetch: out}
		charge.Queue(grpcserver.AnswerSize(resp))
		err = stream.Send(resp)
		res.Release() // Send has encoded the records
		if err != nil {
			return err
		}
		sentAt = time.Now()
		if res.PreferredReadReplica >= 0 {
			return nil // the client should follow from that replica
		}
		offset = res.NextOffset
	}
	if b.Draining != nil && b.Draining.Err() != nil {
		return errShuttingDown()
	}
	// The call's context ended (its deadline, or the client left): say so,
	// rather than end the stream cleanly, which a client cannot tell from
	// "nothing more to follow".
	return status.FromContextError(stream.Context().Err()).Err()
}

// DefaultDeleteRecordsTimeout bounds a DeleteRecords wait when a gRPC
// request gives none (timeout_ms 0).
const DefaultDeleteRecordsTimeout = 30 * time.Second

// DeleteRecords raises the partition's log start on its leader and waits
// for the live followers' (the replica manager's DeleteRecords).
func (b *Broker) DeleteRecords(ctx context.Context, req *brokerv1.DeleteRecordsRequest) (*brokerv1.DeleteRecordsResponse, error) {
	tp, err := checkTP(req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	if topicconfig.IsInternal(tp.Topic) {
		return nil, kerr.New(kerr.InvalidTopicException, "records of the internal topic %s cannot be deleted", tp.Topic)
	}
	// A negative wait is a mistake, not "the default" (as Produce's).
	if ms := req.GetTimeoutMs(); ms < 0 {
		return nil, kerr.BadField(kerr.InvalidRequest, "timeout_ms", "must not be negative, got %d", ms)
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout == 0 {
		timeout = DefaultDeleteRecordsTimeout
	}
	res := b.RM.DeleteRecords(ctx, []replica.DeleteRecordsPartition{{TP: tp, Offset: req.GetOffset()}}, timeout)[0]
	if res.Err != nil {
		// The low watermark reached so far goes with the error (a
		// REQUEST_TIMED_OUT waiting for the followers), as it does beside
		// the error code in Kafka's answer.
		var e *kerr.Error
		if res.LowWatermark >= 0 && errors.As(res.Err, &e) {
			withLow := *e
			withLow.Partial = &brokerv1.DeleteRecordsResponse{LowWatermark: res.LowWatermark}
			return nil, &withLow
		}
		return nil, res.Err
	}
	return &brokerv1.DeleteRecordsResponse{LowWatermark: res.LowWatermark}, nil
}

// ListOffsets answers earliest, latest, by-timestamp and max-timestamp lookups.
func (b *Broker) ListOffsets(ctx context.Context, req *brokerv1.ListOffsetsRequest) (*brokerv1.ListOffsetsResponse, error) {
	epoch := req.GetCurrentLeaderEpoch()
	if epoch == 0 {
		epoch = -1
	}
	return b.ListOffsetsAtEpoch(ctx, req, epoch, replica.ConsumerReplicaID)
}

// ListOffsetsAtEpoch is ListOffsets with the current leader epoch taken as
// given (see FetchAtEpoch), for Kafka's replica id (a gRPC caller is always
// a client, -1; Kafka's ListOffsets carries its own).
func (b *Broker) ListOffsetsAtEpoch(_ context.Context, req *brokerv1.ListOffsetsRequest, epoch, replicaID int32) (*brokerv1.ListOffsetsResponse, error) {
	tp, err := checkTP(req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	var spec replica.OffsetSpec
	switch req.GetSpec() {
	case brokerv1.OffsetSpec_OFFSET_SPEC_EARLIEST:
		spec = replica.OffsetEarliest
	case brokerv1.OffsetSpec_OFFSET_SPEC_LATEST:
		spec = replica.OffsetLatest
	case brokerv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP:
		spec = replica.OffsetTimestamp
	case brokerv1.OffsetSpec_OFFSET_SPEC_MAX_TIMESTAMP:
		spec = replica.OffsetMaxTimestamp
	default:
		return nil, kerr.BadField(kerr.InvalidRequest, "spec", "must be OFFSET_SPEC_EARLIEST, OFFSET_SPEC_LATEST, OFFSET_SPEC_TIMESTAMP or OFFSET_SPEC_MAX_TIMESTAMP")
	}
	off, ts, le, err := b.RM.ListOffsets(tp, spec, req.GetTimestamp(), epoch, replicaID)
	if err != nil {
		return nil, b.unready(err)
	}
	return &brokerv1.ListOffsetsResponse{Offset: off, Timestamp: ts, LeaderEpoch: le}, nil
}

// errNoMetadata answers while the broker has had no full UpdateMetadata
// (it has just started): retriable, so clients ask another broker or retry
// instead of taking an empty view as the cluster's.
func errNoMetadata(what string) error {
	return kerr.New(kerr.LeaderNotAvailable, "%sthis broker has no metadata from the controller yet (it is starting); ask another broker or retry", what)
}

// unready turns UNKNOWN_TOPIC_OR_PARTITION into errNoMetadata until the
// broker's metadata is initialised: it does not yet know which topics exist.
// errShuttingDown ends a follow stream the stopping broker will not serve
// any longer: retriable, with a metadata refresh, so a reader (the
// gateway's included) goes on from the replica the metadata names next.
func errShuttingDown() error {
	return kerr.New(kerr.ReplicaNotAvailable, "the broker is shutting down")
}

func (b *Broker) unready(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) && ke.Code == kerr.UnknownTopicOrPartition && !b.RM.Meta().Initialised() {
		return errNoMetadata(ke.Message + ": ")
	}
	return err
}

// Metadata answers from the controller-fed cache, once it has been filled.
// A fenced broker refuses: it hears from no controller, so its cache may
// still name it leader of partitions the controller has moved, and a
// client that believed it would send every write back to it. Refused, the
// client asks the next broker on its list.
func (b *Broker) Metadata(ctx context.Context, req *brokerv1.MetadataRequest) (*brokerv1.MetadataResponse, error) {
	pg, err := paging.ParseUnlessNamed(len(req.GetTopics()) > 0, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	meta := b.RM.Meta()
	if !meta.Initialised() {
		return nil, errNoMetadata("")
	}
	if err := b.RM.Fenced(); err != nil {
		return nil, kerr.New(kerr.BrokerNotAvailable, "this broker's metadata may be stale (%v); ask another broker", err)
	}
	out := &brokerv1.MetadataResponse{ClusterId: meta.ClusterID(), Controller: &commonv1.Node{Id: -1}}
	if c := meta.Controller(); c != nil {
		out.Controller = c
	}
	live := map[int32]bool{}
	for _, br := range meta.Brokers() {
		live[br.ID] = true
		out.Brokers = append(out.Brokers, &commonv1.Node{Id: br.ID, Address: br.Address, Rack: br.Rack})
	}
	topics := req.GetTopics()
	cur := paging.NewCursor(ctx, pg)
	if len(topics) == 0 {
		topics = pg.From(meta.Topics()) // in name order
	}
	for _, t := range topics {
		if cur.Skip(t) {
			continue
		}
		if !cur.Take(t) {
			break
		}
		tm := &brokerv1.TopicMetadata{Name: t, TopicId: meta.TopicID(t)}
		parts := meta.TopicPartitions(t)
		if len(parts) == 0 {
			tm.ErrorCode, tm.ErrorMessage = missingTopicError(t)
		}
		for _, p := range parts {
			pm := partitionMetadata(p, live)
			tm.Partitions = append(tm.Partitions, pm)
		}
		out.Topics = append(out.Topics, tm)
	}
	out.NextPageToken = cur.Next()
	return out, nil
}

// missingTopicError is why a topic asked for is not answered: a name Kafka's
// rule forbids can never exist, and Kafka says INVALID_TOPIC_EXCEPTION for
// it (as the Kafka listener does) rather than UNKNOWN_TOPIC_OR_PARTITION.
func missingTopicError(name string) (commonv1.ErrorCode, string) {
	if err := topicconfig.ValidateTopicName(name); err != nil {
		return commonv1.ErrorCode_ERROR_CODE_INVALID_TOPIC_EXCEPTION, kerr.As(err).Message
	}
	return commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, ""
}

func partitionMetadata(p *commonv1.PartitionState, live map[int32]bool) *brokerv1.PartitionMetadata {
	pm := &brokerv1.PartitionMetadata{
		Partition: p.GetPartition(), Leader: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(),
		Replicas: p.GetReplicas(), Isr: p.GetIsr(),
	}
	for _, r := range p.GetReplicas() {
		if !live[r] {
			pm.OfflineReplicas = append(pm.OfflineReplicas, r)
		}
	}
	if p.GetLeader() < 0 || !live[p.GetLeader()] {
		pm.ErrorCode = commonv1.ErrorCode_ERROR_CODE_LEADER_NOT_AVAILABLE
	}
	return pm
}

// InitProducerId hands out a fresh producer id at epoch 0, whatever id and
// epoch the request names: tidemark has no transactional ids, and Kafka's
// coordinator answers a request without one the same way. Bumping a named id
// here would let any caller fence the producer that owns it; an idempotent
// producer bumps its own epoch instead (KIP-360), and the partition leaders
// check it.
func (b *Broker) InitProducerId(ctx context.Context, req *brokerv1.InitProducerIdRequest) (*brokerv1.InitProducerIdResponse, error) {
	if b.ProducerIDs == nil {
		return nil, kerr.New(kerr.BrokerNotAvailable, "no producer id source")
	}
	id, err := b.ProducerIDs.Next(ctx)
	if err != nil {
		return nil, err
	}
	return &brokerv1.InitProducerIdResponse{ProducerId: id, ProducerEpoch: 0}, nil
}
