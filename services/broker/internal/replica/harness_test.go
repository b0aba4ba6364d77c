package replica

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// The unit tests run one Manager (broker 1) over the real log store on an
// in-memory file system, with a clock moved by hand and an in-memory
// controller. Followers 2 and 3 are played by the test: their fetches are
// calls of Manager.ReplicaFetch, which is what a follower's fetch stream
// ends in on the leader.

const (
	ctrlAddr = "controller:9190"
	// lagMax is replica.lag.time.max.ms in the tests; the ISR expiration
	// timer therefore runs every lagMax/2.
	lagMax = 10 * time.Second
)

// brokerEpochs are the registrations the controller told the broker about.
var brokerEpochs = map[int32]int64{1: 101, 2: 102, 3: 103}

type env struct {
	t     testing.TB
	clock *manualClock
	ctrl  *fakeController
	net   *memNet
	meta  *metadata.Cache
	m     *Manager
	// controller epoch of the control requests the test sends.
	ctrlEpoch int32
	// fs, when set, holds the data directories of the managers made next
	// (else each gets a file system of its own).
	fs vfs.FS
	// tracer, when set, traces the managers (else they trace nothing).
	tracer trace.Tracer
	// logger, when set, is the log of the managers made next (else they
	// log nothing).
	logger *slog.Logger
	// faults, when set, is the fault registry of the managers made next
	// (else theirs refuse every fault).
	faults *Faults
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newTracedEnv(t, nil)
}

// newTracedEnv is newEnv with its managers tracing to tracer.
func newTracedEnv(t testing.TB, tracer trace.Tracer) *env {
	t.Helper()
	e := &env{t: t, clock: newManualClock(), ctrl: newFakeController(), ctrlEpoch: 1, tracer: tracer}
	e.net = &memNet{ctrl: e.ctrl, managers: map[string]*Manager{}}
	e.m, e.meta = e.newManager(1)
	e.updateMetadata()
	return e
}

// newManager starts broker id's manager over its own in-memory data
// directory, on the env's clock and network.
func (e *env) newManager(id int32) (*Manager, *metadata.Cache) {
	e.t.Helper()
	return e.newManagerWith(id, nil)
}

// newManagerWith is newManager with the log store wrapped by wrap (nil:
// as it is).
func (e *env) newManagerWith(id int32, wrap func(LogStore) LogStore) (*Manager, *metadata.Cache) {
	e.t.Helper()
	return e.newManagerOver(id, wrap, e.net)
}

// newManagerOver is newManagerWith reaching its peers through transport
// (it is still reached itself through the env's network).
func (e *env) newManagerOver(id int32, wrap func(LogStore) LogStore, transport Transport) (*Manager, *metadata.Cache) {
	e.t.Helper()
	fsys := e.fs
	if fsys == nil {
		fsys = vfs.NewMem()
	}
	logs, err := logstore.OpenManager(logstore.ManagerOptions{FS: fsys, Dir: "/data", Now: e.clock.Now, NoBackground: true})
	if err != nil {
		e.t.Fatal(err)
	}
	var store LogStore = logManager{logs}
	if wrap != nil {
		store = wrap(store)
	}
	meta := metadata.New()
	m, err := New(Options{
		BrokerID:    id,
		Store:       store,
		Meta:        meta,
		Transport:   transport,
		Clock:       e.clock,
		BrokerEpoch: func() int64 { return brokerEpochs[id] },
		Static:      map[string]string{"replica.lag.time.max.ms": "10000"},
		Tracer:      e.tracer,
		Logger:      e.logger,
		Faults:      e.faults,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.net.add(brokerAddr(id), m)
	e.t.Cleanup(func() {
		m.Close()
		_ = logs.Close()
	})
	return m, meta
}

func brokerAddr(id int32) string { return "broker" + itoa(int64(id)) }

// updateMetadata sends an UpdateMetadata listing brokers 1-3 as live to
// broker 1; shutting marks those in controlled shutdown.
func (e *env) updateMetadata(shutting ...int32) {
	e.t.Helper()
	e.updateMetadataOn(e.m, shutting...)
}

func (e *env) updateMetadataOn(m *Manager, shutting ...int32) {
	e.t.Helper()
	req := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		Controller: &commonv1.Node{Id: 100, Address: ctrlAddr}}
	for _, id := range []int32{1, 2, 3} {
		req.Brokers = append(req.Brokers, &controlv1.BrokerRegistration{
			Node: &commonv1.Node{Id: id, Address: brokerAddr(id)}, BrokerEpoch: brokerEpochs[id],
			ShuttingDown: slices.Contains(shutting, id)})
	}
	if err := m.UpdateMetadata(req); err != nil {
		e.t.Fatal(err)
	}
}

var tp0 = TP{Topic: "t", Partition: 0}

// state sends a LeaderAndIsr for tp0 over replicas 1,2,3.
func (e *env) state(leader, leaderEpoch, partitionEpoch int32, isr []int32, configs map[string]string) {
	e.t.Helper()
	e.stateOf(tp0, leader, leaderEpoch, partitionEpoch, isr, configs)
}

func (e *env) stateOf(tp TP, leader, leaderEpoch, partitionEpoch int32, isr []int32, configs map[string]string) {
	e.t.Helper()
	e.stateOn(e.m, tp, leader, leaderEpoch, partitionEpoch, isr, configs)
}

// stateOn sends a LeaderAndIsr for tp to manager m.
func (e *env) stateOn(m *Manager, tp TP, leader, leaderEpoch, partitionEpoch int32, isr []int32, configs map[string]string) {
	e.t.Helper()
	req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[m.opts.BrokerID],
		Partitions: []*commonv1.PartitionState{partitionState(tp, leader, leaderEpoch, partitionEpoch, isr)}}
	if configs != nil {
		req.TopicConfigs = []*controlv1.TopicConfig{{Topic: tp.Topic, Configs: configs}}
	}
	resp, err := m.LeaderAndIsr(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if c := resp.GetPartitions()[0].GetErrorCode(); kerr.Code(c) != kerr.None {
		e.t.Fatalf("LeaderAndIsr: %v %s", c, resp.GetPartitions()[0].GetErrorMessage())
	}
}

func batch(values ...string) []byte {
	var b recordbatch.Builder
	for _, v := range values {
		b.Append(recordbatch.Record{Timestamp: 1, Value: []byte(v)})
	}
	return b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
}

func partitionState(tp TP, leader, leaderEpoch, partitionEpoch int32, isr []int32) *commonv1.PartitionState {
	return &commonv1.PartitionState{Topic: tp.Topic, Partition: tp.Partition, Leader: leader,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, Replicas: []int32{1, 2, 3}, Isr: isr}
}

// followerFetch is one fetch of follower id from offset, answered at once.
func (e *env) followerFetch(id int32, leaderEpoch int32, offset int64) FollowerFetchAnswer {
	e.t.Helper()
	return e.followerFetchOf(tp0, id, leaderEpoch, offset)
}

func (e *env) followerFetchOf(tp TP, id int32, leaderEpoch int32, offset int64) FollowerFetchAnswer {
	e.t.Helper()
	a := e.m.ReplicaFetch(context.Background(), FollowerFetch{ReplicaID: id, BrokerEpoch: brokerEpochs[id],
		Partitions: []FollowerFetchPartition{{TP: tp, FetchOffset: offset, CurrentLeaderEpoch: leaderEpoch, LastFetchedEpoch: -1}}})
	if a[0].Err != nil {
		e.t.Fatalf("fetch of follower %d at %d: %v", id, offset, a[0].Err)
	}
	return a[0]
}

// replica returns tp0's replica.
func (e *env) replica() *Replica {
	e.t.Helper()
	r, ok := e.m.Replica(tp0)
	if !ok {
		e.t.Fatal("t-0 is not hosted")
	}
	return r
}

// hw returns tp0's high watermark.
func (e *env) hw() int64 {
	r := e.replica()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.HighWatermark()
}

// produceAsync runs an acks=-1 produce of one record in the background and
// returns once it is parked in the produce purgatory (its timeout timer is
// armed).
func (e *env) produceAsync(timeout time.Duration, value string) <-chan produceOutcome {
	e.t.Helper()
	before := e.clock.pending(timeout)
	out := make(chan produceOutcome, 1)
	go func() {
		res, err := e.m.Produce(context.Background(), tp0, -1, batch(value), timeout)
		out <- produceOutcome{res, err}
	}()
	e.clock.WaitTimer(e.t, timeout, before+1)
	return out
}

type produceOutcome struct {
	res ProduceResult
	err error
}

// parked reports whether the produce is still waiting.
func parked(out <-chan produceOutcome) (produceOutcome, bool) {
	select {
	case o := <-out:
		return o, false
	default:
		return produceOutcome{}, true
	}
}

// result waits (bounded, in real time) for the produce's answer.
func (e *env) result(out <-chan produceOutcome) produceOutcome {
	e.t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(10 * time.Second):
		e.t.Fatal("the produce was not answered")
		return produceOutcome{}
	}
}

// fakeController is the in-memory controller: it records every
// AlterPartition and answers with answer (by default it commits each
// proposed ISR with the next partition epoch, as the controller does).
type fakeController struct {
	mu     sync.Mutex
	answer func(*controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error)
	// hold, when set, blocks each call until it is closed or sent to;
	// abandoned hears of each held call whose caller gave up first.
	hold      chan struct{}
	abandoned chan struct{}
	calls     chan *controlv1.AlterPartitionRequest
}

func newFakeController() *fakeController {
	c := &fakeController{calls: make(chan *controlv1.AlterPartitionRequest, 64), abandoned: make(chan struct{}, 64)}
	c.answer = commitAll
	return c
}

func commitAll(req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	resp := &controlv1.AlterPartitionResponse{}
	for _, p := range req.GetPartitions() {
		res := &controlv1.AlterPartitionResult{Topic: p.GetTopic(), Partition: p.GetPartition(),
			LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch() + 1}
		for _, m := range p.GetNewIsr() {
			res.Isr = append(res.Isr, m.GetBrokerId())
		}
		resp.Partitions = append(resp.Partitions, res)
	}
	return resp, nil
}

// answerEach answers every partition with code (no state).
func answerEach(code kerr.Code) func(*controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	return func(req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
		resp := &controlv1.AlterPartitionResponse{}
		for _, p := range req.GetPartitions() {
			resp.Partitions = append(resp.Partitions, &controlv1.AlterPartitionResult{Topic: p.GetTopic(), Partition: p.GetPartition(), ErrorCode: commonv1.ErrorCode(code)})
		}
		return resp, nil
	}
}

func (c *fakeController) setAnswer(f func(*controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error)) {
	c.mu.Lock()
	c.answer = f
	c.mu.Unlock()
}

func (c *fakeController) AlterPartition(ctx context.Context, addr string, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	if addr != ctrlAddr {
		return nil, errors.New("AlterPartition sent to " + addr + ", not the controller")
	}
	c.mu.Lock()
	answer, hold := c.answer, c.hold
	c.mu.Unlock()
	c.calls <- req
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			c.abandoned <- struct{}{}
			return nil, ctx.Err()
		}
	}
	resp, err := answer(req)
	if err != nil || resp.GetErrorCode() != 0 {
		return resp, err
	}
	// Like the controller, refuse a partition named twice in one request.
	seen := map[TP]bool{}
	for i, p := range req.GetPartitions() {
		tp := TP{Topic: p.GetTopic(), Partition: p.GetPartition()}
		if seen[tp] && i < len(resp.GetPartitions()) {
			resp.Partitions[i] = &controlv1.AlterPartitionResult{Topic: tp.Topic, Partition: tp.Partition,
				ErrorCode: commonv1.ErrorCode(kerr.InvalidRequest)}
		}
		seen[tp] = true
	}
	return resp, nil
}

// call waits (bounded) for the next AlterPartition the broker sends.
func (c *fakeController) call(t *testing.T) *controlv1.AlterPartitionRequest {
	t.Helper()
	select {
	case req := <-c.calls:
		return req
	case <-time.After(10 * time.Second):
		t.Fatal("no AlterPartition was sent")
		return nil
	}
}

// noCall checks that no AlterPartition is waiting to be seen.
func (c *fakeController) noCall(t *testing.T) {
	t.Helper()
	select {
	case req := <-c.calls:
		t.Fatalf("unexpected AlterPartition %v", req)
	default:
	}
}

func isrOf(req *controlv1.AlterPartitionRequest, i int) []int32 {
	var out []int32
	for _, m := range req.GetPartitions()[i].GetNewIsr() {
		out = append(out, m.GetBrokerId())
	}
	return out
}
