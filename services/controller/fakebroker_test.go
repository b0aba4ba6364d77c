package controller

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/kerr"
)

// fakeBroker plays a broker's control-plane part only: it serves
// BrokerControlService on loopback with the real fencing rules (older
// controller epoch: STALE_CONTROLLER_EPOCH; another broker epoch:
// STALE_BROKER_EPOCH), records what it accepts, registers in etcd with a
// lease, and keeps a BrokerSession open to the active controller with
// periodic progress reports.
type fakeBroker struct {
	controlv1.UnimplementedBrokerControlServiceServer
	t    testing.TB
	id   int32
	rack string
	ttl  time.Duration
	etcd string

	srv  *grpcserver.Server
	lis  net.Listener
	addr string

	mu        sync.Mutex
	cli       *clientv3.Client
	clis      []*clientv3.Client // every client made, closed by stop
	store     *metastore.Store
	reg       *metastore.Registration
	epoch     int64
	maxCtrl   int32
	lai       []*controlv1.LeaderAndIsrRequest
	laiAfter  []int // how many UpdateMetadata had arrived before each LeaderAndIsr
	um        []*controlv1.UpdateMetadataRequest
	sr        []*controlv1.StopReplicaRequest
	yields    []*controlv1.YieldLeadershipRequest
	rejected  []int32 // controller epochs refused as stale
	parts     map[string]*commonv1.PartitionState
	sessEpoch int64 // the broker epoch of the open session, 0 if none

	silent  atomic.Bool
	stalled atomic.Bool // LeaderAndIsr hangs until the caller gives up
	// heldPIDEnd is the producer id block end its session messages report.
	heldPIDEnd atomic.Int64
	stopSess   context.CancelFunc
	sessDone   chan struct{}
}

func tpKey(topic string, p int32) string { return topic + "/" + strconv.Itoa(int(p)) }

// startBroker serves, registers and opens its session.
func startBroker(t testing.TB, etcd string, id int32, rack string, ttl time.Duration) *fakeBroker {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{t: t, id: id, rack: rack, ttl: ttl, etcd: etcd, lis: lis, addr: lis.Addr().String(),
		parts: map[string]*commonv1.PartitionState{}}
	b.srv = grpcserver.New(grpcserver.Options{})
	controlv1.RegisterBrokerControlServiceServer(b.srv, b)
	b.srv.MarkAllServing()
	go func() { _ = b.srv.Serve(lis) }()
	b.register()
	b.openSession()
	t.Cleanup(b.stop)
	return b
}

// register creates a registration with a new epoch, on a fresh etcd client
// (closing a client is how a broker crash is played: its lease is not
// revoked but no longer renewed).
func (b *fakeBroker) register() {
	b.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{b.etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.t.Fatal(err)
	}
	store, err := metastore.New(cli, metastore.Options{})
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := store.RegisterBroker(ctx, metastore.BrokerInfo{ID: b.id, Address: b.addr, Rack: b.rack}, b.ttl, metastore.WaitForExpiry())
	if err != nil {
		b.t.Fatalf("broker %d register: %v", b.id, err)
	}
	b.mu.Lock()
	old := b.epoch
	b.cli, b.store, b.reg, b.epoch = cli, store, reg, reg.Epoch()
	b.clis = append(b.clis, cli)
	b.mu.Unlock()
	// As a broker does: its incarnation's health service (fast failover).
	if old != 0 {
		b.srv.SetServing(grpcserver.IncarnationService(old), false)
	}
	b.srv.SetServing(grpcserver.IncarnationService(reg.Epoch()), true)
}

func (b *fakeBroker) brokerEpoch() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch
}

// deregister revokes the registration at once (a clean stop or a bounce).
func (b *fakeBroker) deregister() {
	b.mu.Lock()
	reg := b.reg
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := reg.Close(ctx); err != nil {
		b.t.Errorf("broker %d deregister: %v", b.id, err)
	}
}

// kill plays kill -9: the session stream and the server die at once and
// the lease is left to expire.
func (b *fakeBroker) kill() {
	b.mu.Lock()
	cli := b.cli
	b.mu.Unlock()
	// The server first: a real process's death takes its listener with
	// it, so the controller's probe after the broken session must not find
	// the old incarnation still answering.
	b.srv.Server.Stop()
	_ = cli.Close()
	b.closeSession()
}

// silence plays a paused or partitioned broker: its lease stops being
// renewed and it reports nothing, but its session stream stays open.
func (b *fakeBroker) silence() {
	b.silent.Store(true)
	b.mu.Lock()
	cli := b.cli
	b.mu.Unlock()
	_ = cli.Close()
}

func (b *fakeBroker) stop() {
	b.closeSession()
	b.srv.Server.Stop()
	b.mu.Lock()
	reg, clis := b.reg, b.clis
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = reg.Close(ctx)
	for _, cli := range clis {
		_ = cli.Close()
	}
}

// openSession keeps a BrokerSession open to whichever controller is active,
// with the current registration's epoch, reconnecting when the stream
// breaks, the active controller changes, or the epoch changes.
func (b *fakeBroker) openSession() {
	ctx, cancel := context.WithCancel(context.Background())
	b.stopSess = cancel
	b.sessDone = make(chan struct{})
	go func() {
		defer close(b.sessDone)
		for ctx.Err() == nil {
			b.runSession(ctx)
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}()
}

func (b *fakeBroker) closeSession() {
	if b.stopSess != nil {
		b.stopSess()
		<-b.sessDone
		b.stopSess = nil
	}
}

func (b *fakeBroker) runSession(ctx context.Context) {
	b.mu.Lock()
	store, epoch := b.store, b.epoch
	b.mu.Unlock()
	lctx, lcancel := context.WithTimeout(ctx, time.Second)
	info, ok, err := store.ActiveController(lctx)
	lcancel()
	if err != nil || !ok {
		return
	}
	conn, err := grpc.NewClient(info.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return
	}
	defer conn.Close()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	stream, err := controlv1.NewControllerServiceClient(conn).BrokerSession(sctx)
	if err != nil {
		return
	}
	hello := &controlv1.BrokerSessionRequest{BrokerId: b.id, BrokerEpoch: epoch, Events: []*controlv1.ClusterEvent{{
		Kind: controlv1.EventKind_EVENT_KIND_HW_ADVANCE, Topic: "any", Reason: "session opened"}},
		HeldProducerIdBlockEnd: b.heldPIDEnd.Load()}
	if err := stream.Send(hello); err != nil {
		return
	}
	if _, err := stream.Recv(); err != nil {
		return
	}
	b.mu.Lock()
	b.sessEpoch = epoch
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.sessEpoch = 0; b.mu.Unlock() }()
	broken := make(chan struct{})
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				close(broken)
				return
			}
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-broken:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if b.silent.Load() {
			continue
		}
		if b.brokerEpoch() != epoch {
			return // re-registered: a new session with the new epoch
		}
		lctx, lcancel := context.WithTimeout(ctx, time.Second)
		cur, ok, err := store.ActiveController(lctx)
		lcancel()
		if err == nil && (!ok || cur.Epoch != info.Epoch) {
			return // a new controller: follow it
		}
		if err := stream.Send(&controlv1.BrokerSessionRequest{BrokerId: b.id, BrokerEpoch: epoch, FullReport: true, Replicas: b.progress(),
			HeldProducerIdBlockEnd: b.heldPIDEnd.Load()}); err != nil {
			return
		}
	}
}

// progress reports made-up log positions for the partitions it hosts.
func (b *fakeBroker) progress() []*controlv1.ReplicaProgress {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*controlv1.ReplicaProgress
	for _, ps := range b.parts {
		rp := &controlv1.ReplicaProgress{Topic: ps.Topic, Partition: ps.Partition, BrokerId: b.id,
			LogEndOffset: 100 + int64(b.id), HighWatermark: 100, LeaderEpoch: ps.LeaderEpoch, Leader: ps.Leader == b.id}
		if rp.Leader {
			rp.MaximalIsr = slices.Clone(ps.Isr)
			for _, r := range ps.Replicas {
				if r != b.id {
					rp.Followers = append(rp.Followers, &controlv1.FollowerProgress{BrokerId: r, LogEndOffset: 100 + int64(r), LagMs: 7})
				}
			}
		}
		out = append(out, rp)
	}
	return out
}

// admit applies the broker's fences to a control request.
func (b *fakeBroker) admit(ctrlEpoch int32, brokerEpoch int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ctrlEpoch < b.maxCtrl {
		b.rejected = append(b.rejected, ctrlEpoch)
		return kerr.New(kerr.StaleControllerEpoch, "controller epoch %d is older than %d", ctrlEpoch, b.maxCtrl)
	}
	// KIP-380: only an older epoch is stale. A newer one is this
	// incarnation's, arriving before RegisterBroker returned.
	if brokerEpoch < b.epoch {
		return kerr.New(kerr.StaleBrokerEpoch, "request for broker epoch %d; this incarnation is %d", brokerEpoch, b.epoch)
	}
	b.maxCtrl = ctrlEpoch
	return nil
}

func (b *fakeBroker) LeaderAndIsr(ctx context.Context, req *controlv1.LeaderAndIsrRequest) (*controlv1.LeaderAndIsrResponse, error) {
	if b.stalled.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := b.admit(req.GetControllerEpoch(), req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lai = append(b.lai, req)
	b.laiAfter = append(b.laiAfter, len(b.um))
	resp := &controlv1.LeaderAndIsrResponse{}
	for _, ps := range req.GetPartitions() {
		k := tpKey(ps.GetTopic(), ps.GetPartition())
		if cur := b.parts[k]; cur == nil || ps.GetLeaderEpoch() > cur.GetLeaderEpoch() ||
			ps.GetLeaderEpoch() == cur.GetLeaderEpoch() && ps.GetPartitionEpoch() > cur.GetPartitionEpoch() {
			b.parts[k] = ps
		}
		resp.Partitions = append(resp.Partitions, &controlv1.PartitionResult{Topic: ps.GetTopic(), Partition: ps.GetPartition()})
	}
	return resp, nil
}

func (b *fakeBroker) UpdateMetadata(_ context.Context, req *controlv1.UpdateMetadataRequest) (*controlv1.UpdateMetadataResponse, error) {
	if err := b.admit(req.GetControllerEpoch(), req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.um = append(b.um, req)
	return &controlv1.UpdateMetadataResponse{}, nil
}

func (b *fakeBroker) StopReplica(_ context.Context, req *controlv1.StopReplicaRequest) (*controlv1.StopReplicaResponse, error) {
	if err := b.admit(req.GetControllerEpoch(), req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sr = append(b.sr, req)
	for _, p := range req.GetPartitions() {
		delete(b.parts, tpKey(p.GetTopic(), p.GetPartition()))
	}
	return &controlv1.StopReplicaResponse{}, nil
}

// YieldLeadership answers as a broker does: NONE for a partition it does
// not lead or leads at the named leader epoch, FENCED_LEADER_EPOCH for one
// it leads at another (the fake does not follow partition epochs: a real
// leader learns its ISR changes from AlterPartition answers). Like
// LeaderAndIsr it hangs while stalled.
func (b *fakeBroker) YieldLeadership(ctx context.Context, req *controlv1.YieldLeadershipRequest) (*controlv1.YieldLeadershipResponse, error) {
	if b.stalled.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := b.admit(req.GetControllerEpoch(), req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.yields = append(b.yields, req)
	resp := &controlv1.YieldLeadershipResponse{}
	for _, p := range req.GetPartitions() {
		res := &controlv1.PartitionResult{Topic: p.GetTopic(), Partition: p.GetPartition()}
		cur := b.parts[tpKey(p.GetTopic(), p.GetPartition())]
		if !req.GetResume() && cur != nil && cur.GetLeader() == b.id &&
			cur.GetLeaderEpoch() != p.GetLeaderEpoch() {
			res.ErrorCode = commonv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH
		}
		resp.Partitions = append(resp.Partitions, res)
	}
	return resp, nil
}

// yieldRequests is a copy of the YieldLeadership requests accepted.
func (b *fakeBroker) yieldRequests() []*controlv1.YieldLeadershipRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.yields)
}

// role is the newest state the broker accepted for a partition.
func (b *fakeBroker) role(topic string, p int32) *commonv1.PartitionState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.parts[tpKey(topic, p)]
}

func (b *fakeBroker) seenControllerEpoch() int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxCtrl
}

func (b *fakeBroker) staleRejections() []int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.rejected)
}

func (b *fakeBroker) sessionOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessEpoch != 0 && b.sessEpoch == b.epoch
}

// fullUpdates counts accepted full UpdateMetadata requests from controller
// epoch e (any epoch for 0).
func (b *fakeBroker) fullUpdates(e int32) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.um {
		if r.GetFull() && (e == 0 || r.GetControllerEpoch() == e) {
			n++
		}
	}
	return n
}

func (b *fakeBroker) lastUpdate() *controlv1.UpdateMetadataRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.um) == 0 {
		return nil
	}
	return b.um[len(b.um)-1]
}

func (b *fakeBroker) stopReplicas() []*controlv1.StopReplicaRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sr)
}

// markedBeforeLeading reports whether an UpdateMetadata marking broker
// shutting as shutting down arrived before the LeaderAndIsr that made this
// broker leader of topic-p.
func (b *fakeBroker) markedBeforeLeading(topic string, p int32, shutting int32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, req := range b.lai {
		for _, ps := range req.GetPartitions() {
			if ps.GetTopic() != topic || ps.GetPartition() != p || ps.GetLeader() != b.id {
				continue
			}
			for _, um := range b.um[:b.laiAfter[i]] {
				if shuttingDownIn(um, shutting) {
					return true
				}
			}
			return false
		}
	}
	return false
}
