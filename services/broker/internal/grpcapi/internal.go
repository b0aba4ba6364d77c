package grpcapi

import (
	"context"
	"io"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/telemetry"
)

// Replication serves ReplicationService: follower fetches and epoch lookups.
type Replication struct {
	replicationv1.UnimplementedReplicationServiceServer
	RM *replica.Manager
	// BrokerEpochOf returns the registered epoch of a broker, false when it
	// is not known; a fetch from an older incarnation is refused (KIP-903).
	BrokerEpochOf func(id int32) (int64, bool)
	// TracerProvider makes the per-round-trip fetch spans; nil: none (and
	// no work spent on them: this runs once per follower round trip).
	TracerProvider trace.TracerProvider
	// Draining, once done, ends every fetch stream after its current round
	// trip (a parked fetch answers at once), so the broker can stop.
	Draining context.Context
	// Faults, when set, holds the answers to a broker this broker's link
	// to is cut until it heals, and the other brokers' requests while an
	// isolation cuts this broker from them.
	Faults *replica.Faults
}

// awaitLink holds an answer to broker id while the link to it is cut.
func (s *Replication) awaitLink(ctx context.Context, id int32) error {
	if s.Faults == nil {
		return nil
	}
	return s.Faults.AwaitLink(ctx, id)
}

// awaitArrival holds a request from another broker, unserved, while an
// isolation cuts this broker from its peers: on a partitioned network it
// would not have arrived, so it must not move the follower's offsets, the
// ISR or the high watermark here until the partition heals.
func (s *Replication) awaitArrival(ctx context.Context) error {
	if s.Faults == nil {
		return nil
	}
	return s.Faults.AwaitArrival(ctx)
}

var _ replicationv1.ReplicationServiceServer = (*Replication)(nil)

// ReplicaFetch serves a follower fetcher's stream: one batched fetch per
// request, answered in order. Each round trip gets its own server span,
// joined to the follower's round-trip span through the trace context the
// request carries (one stream lives for many round trips, many traces).
func (s *Replication) ReplicaFetch(stream replicationv1.ReplicationService_ReplicaFetchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if s.Draining != nil {
		defer context.AfterFunc(s.Draining, cancel)()
	}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.awaitArrival(ctx); err != nil {
			return err
		}
		resp, answers, charge, err := s.fetchCharged(ctx, req)
		if err != nil {
			return err
		}
		if err := s.awaitLink(ctx, req.GetReplicaId()); err != nil {
			charge.Cancel()
			s.RM.RecycleFetch(answers)
			return err
		}
		charge.Queue(grpcserver.AnswerSize(resp))
		err = stream.Send(resp)
		// Send has marshalled the records: their read buffers are free.
		s.RM.RecycleFetch(answers)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return kerr.New(kerr.BrokerNotAvailable, "the leader is shutting down")
		}
	}
}

// fetchCharged serves one request of a fetch stream within the
// connection's answer budget (max.queued.answer.bytes.per.connection).
// When the answer does not fit, the client having left that much unread,
// it waits for room and reads again, without waiting for records, as much
// as the room it got.
func (s *Replication) fetchCharged(ctx context.Context, req *replicationv1.ReplicaFetchRequest) (*replicationv1.ReplicaFetchResponse, []replica.FollowerFetchAnswer, *grpcserver.AnswerReservation, error) {
	resp, answers, err := s.fetchOnce(ctx, req)
	if err != nil {
		return nil, nil, nil, err
	}
	size := grpcserver.AnswerSize(resp)
	if charge, ok := grpcserver.TryReserveAnswer(ctx, size); ok {
		return resp, answers, charge, nil
	}
	s.RM.RecycleFetch(answers)
	charge := grpcserver.ReserveAnswer(ctx, ctx, size)
	if charge.Bytes() == 0 { // the stream ended while waiting
		return nil, nil, nil, kerr.New(kerr.BrokerNotAvailable, "the fetch stream ended: %v", ctx.Err())
	}
	if resp, answers, err = s.fetchOnce(ctx, readingAtMost(req, max(charge.Bytes()-answerEnvelope, 1))); err != nil {
		charge.Cancel()
		return nil, nil, nil, err
	}
	return resp, answers, charge, nil
}

// readingAtMost is req asking for at most maxBytes, at once.
func readingAtMost(req *replicationv1.ReplicaFetchRequest, maxBytes int) *replicationv1.ReplicaFetchRequest {
	limited := proto.CloneOf(req)
	limited.MaxBytes, limited.MaxWaitMs, limited.MinBytes = int32(maxBytes), 0, 0
	for _, p := range limited.Partitions {
		if p.GetPartitionMaxBytes() <= 0 || p.GetPartitionMaxBytes() > int32(maxBytes) {
			p.PartitionMaxBytes = int32(maxBytes)
		}
	}
	return limited
}

// fetchOnce serves one request of a fetch stream inside its server span.
// The response's records alias the answers' read buffers, which the caller
// recycles once the response is sent.
func (s *Replication) fetchOnce(ctx context.Context, req *replicationv1.ReplicaFetchRequest) (*replicationv1.ReplicaFetchResponse, []replica.FollowerFetchAnswer, error) {
	if req.GetReplicaId() < 0 {
		return nil, nil, kerr.BadField(kerr.InvalidRequest, "replica_id", "must be a broker id >= 0")
	}
	// As a consumer's Fetch (checkFetchNumbers): a negative number is a
	// mistake, and a wait beyond a minute held the leader's fetch (and
	// the stream) for as long as the follower's deadline allowed.
	if err := checkFetchNumbers(0, req.GetMaxBytes(), req.GetMaxWaitMs(), req.GetMinBytes()); err != nil {
		return nil, nil, err
	}
	for i, p := range req.GetPartitions() {
		if p.GetPartitionMaxBytes() < 0 {
			return nil, nil, kerr.BadField(kerr.InvalidRequest, "partitions["+strconv.Itoa(i)+"].partition_max_bytes", "must not be negative")
		}
	}
	if s.TracerProvider != nil {
		if tc := req.GetTraceContext(); len(tc) > 0 {
			ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(tc))
		}
		var span trace.Span
		ctx, span = s.TracerProvider.Tracer(tracerName).Start(ctx, telemetry.ReplicaFetchSpan, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(rpcSystem, rpcService, rpcMethod, attribute.Int("tidemark.follower_id", int(req.GetReplicaId()))))
		defer span.End()
	}
	if s.BrokerEpochOf != nil && req.GetBrokerEpoch() > 0 {
		if known, ok := s.BrokerEpochOf(req.GetReplicaId()); ok && req.GetBrokerEpoch() < known {
			return &replicationv1.ReplicaFetchResponse{ErrorCode: commonv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH}, nil, nil
		}
	}
	// The follower's sizes are capped by this leader's
	// replica.fetch.response.max.bytes before any buffer is sized by them.
	limit := s.RM.BrokerConfig().ReplicaFetchResponseMaxBytes
	capped := func(asked int32) int { return int(min(asked, limit)) } // <= 0 keeps the default
	f := replica.FollowerFetch{
		ReplicaID: req.GetReplicaId(), BrokerEpoch: req.GetBrokerEpoch(),
		MaxWait: time.Duration(req.GetMaxWaitMs()) * time.Millisecond, MinBytes: int(req.GetMinBytes()), MaxBytes: capped(req.GetMaxBytes()),
		Partitions: make([]replica.FollowerFetchPartition, 0, len(req.GetPartitions())),
	}
	for _, p := range req.GetPartitions() {
		f.Partitions = append(f.Partitions, replica.FollowerFetchPartition{
			TP: replica.TP{Topic: p.GetTopic(), Partition: p.GetPartition()}, FetchOffset: p.GetFetchOffset(),
			CurrentLeaderEpoch: p.GetCurrentLeaderEpoch(), LastFetchedEpoch: p.GetLastFetchedEpoch(),
			LogStartOffset: p.GetLogStartOffset(), MaxBytes: capped(p.GetPartitionMaxBytes()),
		})
	}
	answers := s.RM.ReplicaFetch(ctx, f)
	resp := &replicationv1.ReplicaFetchResponse{Partitions: make([]*replicationv1.ReplicaFetchPartitionResponse, 0, len(answers))}
	for _, a := range answers {
		if a.HWAfter > a.HWBefore {
			// Tells the follower's span that this round trip committed records.
			resp.HwAdvances = append(resp.HwAdvances, &replicationv1.HighWatermarkAdvance{
				Topic: a.TP.Topic, Partition: a.TP.Partition, Before: a.HWBefore, After: a.HWAfter})
		}
		pr := &replicationv1.ReplicaFetchPartitionResponse{
			Topic: a.TP.Topic, Partition: a.TP.Partition, HighWatermark: a.HighWatermark,
			LeaderLogEndOffset: a.LeaderLEO, LogStartOffset: a.LogStartOffset, Records: a.Records,
		}
		if a.Err != nil {
			e := kerr.As(a.Err)
			pr.ErrorCode = commonv1.ErrorCode(e.Code)
			if e.Leader != nil {
				pr.CurrentLeader = &commonv1.LeaderHint{LeaderId: e.Leader.ID, Address: e.Leader.Address, LeaderEpoch: e.Leader.LeaderEpoch}
			}
		}
		if a.Diverging != nil {
			pr.DivergingEpoch = &replicationv1.EpochEndOffset{Epoch: a.Diverging.Epoch, EndOffset: a.Diverging.EndOffset}
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return resp, answers, nil
}

// The attributes otelgrpc puts on its spans, so per-round-trip spans of the
// stream look like those of any other call.
var (
	rpcSystem  = attribute.String("rpc.system", "grpc")
	rpcService = attribute.String("rpc.service", "tidemark.replication.v1.ReplicationService")
	rpcMethod  = attribute.String("rpc.method", "ReplicaFetch")

	brokerService = attribute.String("rpc.service", "tidemark.broker.v1.BrokerService")
	produceMethod = attribute.String("rpc.method", "Produce")
)

const tracerName = "tidemark.io/services/broker/grpcapi"

// OffsetForLeaderEpoch answers where each asked epoch ends.
func (s *Replication) OffsetForLeaderEpoch(ctx context.Context, req *replicationv1.OffsetForLeaderEpochRequest) (*replicationv1.OffsetForLeaderEpochResponse, error) {
	if err := s.awaitArrival(ctx); err != nil {
		return nil, err
	}
	resp := &replicationv1.OffsetForLeaderEpochResponse{}
	for _, p := range req.GetPartitions() {
		tp := replica.TP{Topic: p.GetTopic(), Partition: p.GetPartition()}
		r := &replicationv1.OffsetForLeaderEpochResult{Topic: tp.Topic, Partition: tp.Partition}
		e, off, err := s.RM.EpochEndOffset(tp, p.GetCurrentLeaderEpoch(), p.GetLeaderEpoch())
		if err != nil {
			r.ErrorCode = commonv1.ErrorCode(kerr.CodeOf(err))
			r.LeaderEpoch, r.EndOffset = -1, -1
		} else {
			r.LeaderEpoch, r.EndOffset = e, off
		}
		resp.Partitions = append(resp.Partitions, r)
	}
	if err := s.awaitLink(ctx, req.GetReplicaId()); err != nil {
		return nil, err
	}
	return resp, nil
}

// Control serves BrokerControlService: the controller's pushes.
type Control struct {
	controlv1.UnimplementedBrokerControlServiceServer
	RM *replica.Manager
}

var _ controlv1.BrokerControlServiceServer = (*Control)(nil)

// LeaderAndIsr applies leadership decisions.
func (s *Control) LeaderAndIsr(_ context.Context, req *controlv1.LeaderAndIsrRequest) (*controlv1.LeaderAndIsrResponse, error) {
	resp, err := s.RM.LeaderAndIsr(req)
	if err != nil {
		return &controlv1.LeaderAndIsrResponse{ErrorCode: commonv1.ErrorCode(kerr.CodeOf(err))}, nil
	}
	return resp, nil
}

// UpdateMetadata refreshes the broker's cluster view.
func (s *Control) UpdateMetadata(_ context.Context, req *controlv1.UpdateMetadataRequest) (*controlv1.UpdateMetadataResponse, error) {
	if err := s.RM.UpdateMetadata(req); err != nil {
		return &controlv1.UpdateMetadataResponse{ErrorCode: commonv1.ErrorCode(kerr.CodeOf(err))}, nil
	}
	return &controlv1.UpdateMetadataResponse{}, nil
}

// YieldLeadership stops a leader's writes ahead of a voluntary move.
func (s *Control) YieldLeadership(_ context.Context, req *controlv1.YieldLeadershipRequest) (*controlv1.YieldLeadershipResponse, error) {
	resp, err := s.RM.YieldLeadership(req)
	if err != nil {
		return &controlv1.YieldLeadershipResponse{ErrorCode: commonv1.ErrorCode(kerr.CodeOf(err))}, nil
	}
	return resp, nil
}

// StopReplica stops (and maybe deletes) replicas.
func (s *Control) StopReplica(_ context.Context, req *controlv1.StopReplicaRequest) (*controlv1.StopReplicaResponse, error) {
	resp, err := s.RM.StopReplica(req)
	if err != nil {
		return &controlv1.StopReplicaResponse{ErrorCode: commonv1.ErrorCode(kerr.CodeOf(err))}, nil
	}
	return resp, nil
}

// Faults serves FaultInjectionService.
type Faults struct {
	faultv1.UnimplementedFaultInjectionServiceServer
	F *replica.Faults
	// BrokerID is this broker's id: its link to itself cannot be cut.
	BrokerID int32
}

func linksProto(ids []int32) []*faultv1.LinkFault {
	var out []*faultv1.LinkFault
	for _, id := range ids {
		out = append(out, &faultv1.LinkFault{ToBrokerId: id})
	}
	return out
}

func toProto(fs []replica.Fault) []*faultv1.FetchFault {
	var out []*faultv1.FetchFault
	for _, f := range fs {
		out = append(out, &faultv1.FetchFault{Topic: f.Topic, Partition: f.Partition, DelayMs: int32(f.Delay / time.Millisecond), Stall: f.Stall})
	}
	return out
}

// SetFetchFault slows or stalls this broker's fetching of some partitions.
func (s *Faults) SetFetchFault(_ context.Context, req *faultv1.SetFetchFaultRequest) (*faultv1.SetFetchFaultResponse, error) {
	f := req.GetFault()
	if f == nil {
		return nil, kerr.BadField(kerr.InvalidRequest, "fault", "is required")
	}
	list, err := s.F.Set(replica.Fault{Topic: f.GetTopic(), Partition: f.GetPartition(), Delay: time.Duration(f.GetDelayMs()) * time.Millisecond, Stall: f.GetStall()})
	if err != nil {
		return nil, err
	}
	return &faultv1.SetFetchFaultResponse{Faults: toProto(list)}, nil
}

// ClearFaults removes every injected fault.
func (s *Faults) ClearFaults(context.Context, *faultv1.ClearFaultsRequest) (*faultv1.ClearFaultsResponse, error) {
	return &faultv1.ClearFaultsResponse{}, s.F.Clear()
}

// ListFaults lists the faults in force.
func (s *Faults) ListFaults(context.Context, *faultv1.ListFaultsRequest) (*faultv1.ListFaultsResponse, error) {
	isolated, _ := s.F.Isolation()
	return &faultv1.ListFaultsResponse{Faults: toProto(s.F.List()), Links: linksProto(s.F.Links()),
		Isolated: isolated, IsolatedFromPeers: s.F.IsolatedFromPeers()}, nil
}

// Isolate cuts this broker off from etcd and from the controllers, and
// with peers from the other brokers too.
func (s *Faults) Isolate(_ context.Context, req *faultv1.IsolateRequest) (*faultv1.IsolateResponse, error) {
	return &faultv1.IsolateResponse{}, s.F.Isolate(true, req.GetPeers())
}

// HealIsolation undoes Isolate.
func (s *Faults) HealIsolation(context.Context, *faultv1.HealIsolationRequest) (*faultv1.HealIsolationResponse, error) {
	return &faultv1.HealIsolationResponse{}, s.F.Isolate(false, false)
}

// CutLink loses what this broker sends to another broker.
func (s *Faults) CutLink(_ context.Context, req *faultv1.CutLinkRequest) (*faultv1.CutLinkResponse, error) {
	if req.GetToBrokerId() == s.BrokerID {
		return nil, kerr.BadField(kerr.InvalidRequest, "to_broker_id", "is this broker (%d): a link joins two brokers", s.BrokerID)
	}
	links, err := s.F.CutLink(req.GetToBrokerId())
	if err != nil {
		return nil, err
	}
	return &faultv1.CutLinkResponse{Links: linksProto(links)}, nil
}

// HealLink undoes CutLink.
func (s *Faults) HealLink(_ context.Context, req *faultv1.HealLinkRequest) (*faultv1.HealLinkResponse, error) {
	links, err := s.F.HealLink(req.GetToBrokerId())
	if err != nil {
		return nil, err
	}
	return &faultv1.HealLinkResponse{Links: linksProto(links)}, nil
}
