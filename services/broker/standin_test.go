package broker_test

// A small in-process stand-in for the controller, so the broker's data plane
// can be tested on its own: it keeps partition state in memory, elects
// leaders by Kafka's offline rule (first live ISR member in assignment
// order), commits AlterPartition, and pushes LeaderAndIsr and UpdateMetadata
// over real gRPC. The real controller (etcd-backed) is exercised by the
// cluster tests; this one exists to isolate the broker layer.

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

type tp struct {
	topic string
	part  int32
}

type pstate struct {
	replicas       []int32
	leader         int32
	leaderEpoch    int32
	isr            []int32
	partitionEpoch int32
}

type standin struct {
	controlv1.UnimplementedControllerServiceServer
	t       testing.TB
	mu      sync.Mutex
	addr    string
	epoch   int32
	brokers map[int32]string // live brokers: id -> address
	racks   map[int32]string
	parts   map[tp]*pstate
	configs map[string]map[string]string
	nextPID int64
	srv     *grpc.Server
}

func newStandin(t testing.TB) *standin {
	s := &standin{t: t, epoch: 1, brokers: map[int32]string{}, racks: map[int32]string{}, parts: map[tp]*pstate{}, configs: map[string]map[string]string{}, nextPID: 1}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	s.srv = grpc.NewServer()
	controlv1.RegisterControllerServiceServer(s.srv, s)
	go func() { _ = s.srv.Serve(lis) }()
	t.Cleanup(s.srv.Stop)
	return s
}

func (s *standin) psProto(k tp, p *pstate) *commonv1.PartitionState {
	return &commonv1.PartitionState{Topic: k.topic, Partition: k.part, Leader: p.leader, LeaderEpoch: p.leaderEpoch,
		Isr: slices.Clone(p.isr), PartitionEpoch: p.partitionEpoch, Replicas: slices.Clone(p.replicas), ControllerEpoch: s.epoch}
}

func (s *standin) client(addr string) controlv1.BrokerControlServiceClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.Close() })
	return controlv1.NewBrokerControlServiceClient(conn)
}

// pushLocked sends the given partitions' LeaderAndIsr to their live
// replicas and a full UpdateMetadata to every live broker.
func (s *standin) pushLocked(keys ...tp) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	um := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: s.epoch, Full: true,
		Controller: &commonv1.Node{Id: 100, Address: s.addr}, ClusterId: "standin"}
	for id, addr := range s.brokers {
		um.Brokers = append(um.Brokers, &controlv1.BrokerRegistration{Node: &commonv1.Node{Id: id, Address: addr, Rack: s.racks[id]}, BrokerEpoch: 0})
	}
	for k, p := range s.parts {
		um.Partitions = append(um.Partitions, s.psProto(k, p))
	}
	for t, c := range s.configs {
		um.TopicConfigs = append(um.TopicConfigs, &controlv1.TopicConfig{Topic: t, Configs: c})
	}
	for id, addr := range s.brokers {
		if _, err := s.client(addr).UpdateMetadata(ctx, um); err != nil {
			s.t.Logf("UpdateMetadata to %d: %v", id, err)
		}
	}
	for id, addr := range s.brokers {
		req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: s.epoch}
		for _, k := range keys {
			p := s.parts[k]
			if slices.Contains(p.replicas, id) {
				req.Partitions = append(req.Partitions, s.psProto(k, p))
				req.TopicConfigs = append(req.TopicConfigs, &controlv1.TopicConfig{Topic: k.topic, Configs: s.configs[k.topic]})
			}
		}
		if len(req.Partitions) == 0 {
			continue
		}
		resp, err := s.client(addr).LeaderAndIsr(ctx, req)
		if err != nil {
			s.t.Logf("LeaderAndIsr to %d: %v", id, err)
		} else if resp.GetErrorCode() != 0 {
			s.t.Logf("LeaderAndIsr to %d: %v", id, resp.GetErrorCode())
		}
	}
}

// pushRacks records brokers' racks and republishes metadata.
func (s *standin) pushRacks(racks map[int32]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, r := range racks {
		s.racks[id] = r
	}
	s.pushLocked()
}

func (s *standin) keysLocked() []tp {
	var out []tp
	for k := range s.parts {
		out = append(out, k)
	}
	return out
}

func (s *standin) addBroker(id int32, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.brokers[id] = addr
	// A returning ISR member may lead an offline partition again.
	for _, p := range s.parts {
		if p.leader < 0 && slices.Contains(p.isr, id) {
			p.leader, p.leaderEpoch = id, p.leaderEpoch+1
			p.partitionEpoch++
		}
	}
	s.pushLocked(s.keysLocked()...)
}

// createTopic assigns partition p to brokers p+1.. round robin (replica
// list rotated), every replica in the ISR.
func (s *standin) createTopic(name string, partitions, rf int, configs map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int32
	for id := range s.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	s.configs[name] = configs
	var keys []tp
	for p := 0; p < partitions; p++ {
		var reps []int32
		for i := 0; i < rf; i++ {
			reps = append(reps, ids[(p+i)%len(ids)])
		}
		k := tp{name, int32(p)}
		s.parts[k] = &pstate{replicas: reps, leader: reps[0], isr: slices.Clone(reps)}
		keys = append(keys, k)
	}
	s.pushLocked(keys...)
}

// brokerDown is the controller's reaction to a broker's session expiring
// (F19): leaders it held move to the first live ISR member in assignment
// order, and it leaves the ISRs (never emptying one).
func (s *standin) brokerDown(id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.brokers, id)
	var changed []tp
	for k, p := range s.parts {
		if !slices.Contains(p.replicas, id) {
			continue
		}
		if len(p.isr) > 1 || p.isr[0] != id {
			p.isr = slices.DeleteFunc(slices.Clone(p.isr), func(x int32) bool { return x == id })
		}
		if p.leader == id {
			p.leader = -1
			for _, r := range p.replicas {
				if _, live := s.brokers[r]; live && slices.Contains(p.isr, r) {
					p.leader = r
					break
				}
			}
		}
		p.leaderEpoch++
		p.partitionEpoch++
		changed = append(changed, k)
	}
	s.pushLocked(changed...)
}

func (s *standin) state(topic string, part int32) pstate {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := *s.parts[tp{topic, part}]
	p.isr = slices.Clone(p.isr)
	return p
}

// AlterPartition commits a leader's ISR change when its epochs match.
func (s *standin) AlterPartition(_ context.Context, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &controlv1.AlterPartitionResponse{}
	var changed []tp
	for _, it := range req.GetPartitions() {
		k := tp{it.GetTopic(), it.GetPartition()}
		p := s.parts[k]
		res := &controlv1.AlterPartitionResult{Topic: k.topic, Partition: k.part}
		var isr []int32
		for _, m := range it.GetNewIsr() {
			isr = append(isr, m.GetBrokerId())
		}
		switch {
		case p == nil:
			res.ErrorCode = commonv1.ErrorCode(kerr.UnknownTopicOrPartition)
		case it.GetLeaderEpoch() != p.leaderEpoch:
			res.ErrorCode = commonv1.ErrorCode(kerr.FencedLeaderEpoch)
		case it.GetPartitionEpoch() != p.partitionEpoch:
			res.ErrorCode = commonv1.ErrorCode(kerr.InvalidUpdateVersion)
		default:
			p.isr = isr
			p.partitionEpoch++
			changed = append(changed, k)
		}
		if p != nil {
			res.Leader, res.LeaderEpoch, res.Isr, res.PartitionEpoch = p.leader, p.leaderEpoch, slices.Clone(p.isr), p.partitionEpoch
		}
		resp.Partitions = append(resp.Partitions, res)
	}
	if len(changed) > 0 {
		go func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.pushLocked()
		}()
	}
	return resp, nil
}

// AllocateProducerIds hands out blocks of 100, none below the end of the
// newest block the broker held, as the controller does.
func (s *standin) AllocateProducerIds(_ context.Context, req *controlv1.AllocateProducerIdsRequest) (*controlv1.AllocateProducerIdsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := max(s.nextPID, req.GetHeldBlockEnd())
	s.nextPID = first + 100
	return &controlv1.AllocateProducerIdsResponse{FirstProducerId: first, Count: 100}, nil
}

// rewindProducerIDs puts the producer id counter back to its start, as an
// etcd restored from an older snapshot does.
func (s *standin) rewindProducerIDs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextPID = 1
}
