package replica

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/platform/kerr"
)

// memNet is the in-memory Transport of the tests: a broker's address leads
// to that broker's Manager, served the way the broker's gRPC handlers serve
// it (grpcapi.Replication: one fetch per stream request, answered in order;
// OffsetForLeaderEpoch per partition), and AlterPartition goes to the fake
// controller. An unknown address fails like an unreachable peer.
type memNet struct {
	ctrl *fakeController

	mu       sync.Mutex
	managers map[string]*Manager
}

func (n *memNet) add(addr string, m *Manager) {
	n.mu.Lock()
	n.managers[addr] = m
	n.mu.Unlock()
}

func (n *memNet) Replication(addr string) (replicationv1.ReplicationServiceClient, error) {
	n.mu.Lock()
	m, ok := n.managers[addr]
	n.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.Unavailable, "nothing listens at %s", addr)
	}
	return memReplication{m}, nil
}

func (n *memNet) AlterPartition(ctx context.Context, addr string, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	return n.ctrl.AlterPartition(ctx, addr, req)
}

// memReplication is a peer's replication service reached in memory.
type memReplication struct{ leader *Manager }

func (c memReplication) ReplicaFetch(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[replicationv1.ReplicaFetchRequest, replicationv1.ReplicaFetchResponse], error) {
	return &memFetchStream{ctx: ctx, leader: c.leader}, nil
}

func (c memReplication) OffsetForLeaderEpoch(_ context.Context, req *replicationv1.OffsetForLeaderEpochRequest, _ ...grpc.CallOption) (*replicationv1.OffsetForLeaderEpochResponse, error) {
	resp := &replicationv1.OffsetForLeaderEpochResponse{}
	for _, p := range req.GetPartitions() {
		tp := TP{Topic: p.GetTopic(), Partition: p.GetPartition()}
		r := &replicationv1.OffsetForLeaderEpochResult{Topic: tp.Topic, Partition: tp.Partition}
		e, off, err := c.leader.EpochEndOffset(tp, p.GetCurrentLeaderEpoch(), p.GetLeaderEpoch())
		if err != nil {
			r.ErrorCode = commonv1.ErrorCode(kerr.CodeOf(err))
			r.LeaderEpoch, r.EndOffset = -1, -1
		} else {
			r.LeaderEpoch, r.EndOffset = e, off
		}
		resp.Partitions = append(resp.Partitions, r)
	}
	return resp, nil
}

// memFetchStream is one fetch stream: each request is served by the
// leader's ReplicaFetch when its answer is read. Cancelling the stream's
// context ends a parked fetch, as it does over gRPC.
type memFetchStream struct {
	grpc.ClientStream // not used; the methods below are what the fetcher calls
	ctx               context.Context
	leader            *Manager
	mu                sync.Mutex
	queue             []*replicationv1.ReplicaFetchRequest
}

func (s *memFetchStream) Send(req *replicationv1.ReplicaFetchRequest) error {
	if s.ctx.Err() != nil {
		return status.FromContextError(s.ctx.Err()).Err()
	}
	s.mu.Lock()
	s.queue = append(s.queue, req)
	s.mu.Unlock()
	return nil
}

func (s *memFetchStream) Recv() (*replicationv1.ReplicaFetchResponse, error) {
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.mu.Unlock()
		return nil, errors.New("Recv without a request")
	}
	req := s.queue[0]
	s.queue = s.queue[1:]
	s.mu.Unlock()
	f := FollowerFetch{ReplicaID: req.GetReplicaId(), BrokerEpoch: req.GetBrokerEpoch(),
		MaxWait: time.Duration(req.GetMaxWaitMs()) * time.Millisecond, MinBytes: int(req.GetMinBytes()), MaxBytes: int(req.GetMaxBytes())}
	for _, p := range req.GetPartitions() {
		f.Partitions = append(f.Partitions, FollowerFetchPartition{
			TP: TP{Topic: p.GetTopic(), Partition: p.GetPartition()}, FetchOffset: p.GetFetchOffset(),
			CurrentLeaderEpoch: p.GetCurrentLeaderEpoch(), LastFetchedEpoch: p.GetLastFetchedEpoch(),
			LogStartOffset: p.GetLogStartOffset(), MaxBytes: int(p.GetPartitionMaxBytes())})
	}
	answers := s.leader.ReplicaFetch(s.ctx, f)
	if s.ctx.Err() != nil {
		return nil, status.FromContextError(s.ctx.Err()).Err()
	}
	resp := &replicationv1.ReplicaFetchResponse{}
	for _, a := range answers {
		pr := &replicationv1.ReplicaFetchPartitionResponse{Topic: a.TP.Topic, Partition: a.TP.Partition,
			HighWatermark: a.HighWatermark, LeaderLogEndOffset: a.LeaderLEO, LogStartOffset: a.LogStartOffset, Records: a.Records}
		if a.Err != nil {
			pr.ErrorCode = commonv1.ErrorCode(kerr.CodeOf(a.Err))
		}
		if a.Diverging != nil {
			pr.DivergingEpoch = &replicationv1.EpochEndOffset{Epoch: a.Diverging.Epoch, EndOffset: a.Diverging.EndOffset}
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return resp, nil
}

func (s *memFetchStream) CloseSend() error         { return nil }
func (s *memFetchStream) Context() context.Context { return s.ctx }
