// Package fakebroker is an in-process stand-in for tidemark brokers and
// controllers, for testing the client: real gRPC servers on loopback ports
// in front of one shared in-memory cluster state. Each partition has a log
// of record batches with offsets assigned on append, a high watermark, a
// leader and leader epoch, and the idempotent-producer table (the last five
// batches per producer), so retries and duplicates behave as on a broker.
//
// Every broker also serves GroupService (group.go): one of them coordinates
// every group, with Kafka's classic membership protocol and offsets kept
// in memory; MoveCoordinator moves it, state and all.
//
// Tests script failures with a ControlFunc that sees every call and may
// fail it (optionally after the append), delay it, or drop the leader hint.
package fakebroker

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/kerr"
)

// Config describes the cluster to start.
type Config struct {
	// Brokers is the number of brokers, with ids 1..Brokers (default 1).
	Brokers int
	// Racks gives broker i+1 the rack Racks[i].
	Racks []string
	// Controllers is the number of AdminService servers; the first is
	// active. Their node ids are 1001, 1002, ...
	Controllers int
}

// Call is what a ControlFunc sees of a request.
type Call struct {
	Method string // "Produce", "Fetch", "Metadata", "ListOffsets", "InitProducerId", or an AdminService or GroupService method
	Node   int32  // the broker or controller id answering
	// N counts the calls of Method cluster-wide, from 1.
	N         int
	Topic     string
	Partition int32
}

// Fault is what a ControlFunc does to a call.
type Fault struct {
	Code kerr.Code // the error to answer with; None only delays
	// AfterAppend (Produce) appends the batch first, then answers Code, as
	// a broker whose acks=-1 wait timed out does.
	AfterAppend bool
	// Delay holds the call before anything is done (a slow or stalled
	// broker; on a produce stream it holds back the requests behind it).
	Delay time.Duration
	// Wait (Produce) holds the answer after the append, as an acks=-1
	// request waits for the high watermark: requests behind it go on.
	Wait time.Duration
	// Until, when set, ends Wait early once closed.
	Until <-chan struct{}
	// NoHint leaves the leader or controller hint out of the error.
	NoHint bool
}

// ControlFunc may return a fault for a call, or nil to let it through.
type ControlFunc func(Call) *Fault

// Cluster is the shared state behind every fake server.
type Cluster struct {
	mu          sync.Mutex // guards everything below
	brokers     []*node
	controllers []*node
	active      int // index of the active controller
	noCtlHints  bool
	noHints     bool
	topics      map[string]*topic
	topicSerial int // numbers the topic ids
	nextPID     int64
	control     ControlFunc
	calls       map[string]int
	nodeCalls   map[int32]map[string]int
	batchSizes  []int
	groups      *groups // its own lock
}

type node struct {
	id   int32
	rack string
	addr string
	srv  *grpcserver.Server
	down bool
}

type topic struct {
	id      string // new at every creation, as a controller's (KIP-516)
	parts   []*partition
	configs map[string]string
}

// Start starts the servers.
func Start(cfg Config) (*Cluster, error) {
	if cfg.Brokers <= 0 {
		cfg.Brokers = 1
	}
	c := &Cluster{
		topics: map[string]*topic{}, nextPID: 1,
		calls: map[string]int{}, nodeCalls: map[int32]map[string]int{},
		groups: newGroups(),
	}
	for i := range cfg.Brokers {
		n := &node{id: int32(i + 1)}
		if i < len(cfg.Racks) {
			n.rack = cfg.Racks[i]
		}
		if err := c.serve(n, func(s *grpcserver.Server) {
			brokerv1.RegisterBrokerServiceServer(s, &brokerService{c: c, n: n})
			groupv1.RegisterGroupServiceServer(s, &groupService{c: c, n: n})
		}); err != nil {
			c.Close()
			return nil, err
		}
		c.brokers = append(c.brokers, n)
	}
	for i := range cfg.Controllers {
		n := &node{id: int32(1001 + i)}
		if err := c.serve(n, func(s *grpcserver.Server) {
			adminv1.RegisterAdminServiceServer(s, &adminService{c: c, n: n, index: i})
		}); err != nil {
			c.Close()
			return nil, err
		}
		c.controllers = append(c.controllers, n)
	}
	return c, nil
}

func (c *Cluster) serve(n *node, register func(*grpcserver.Server)) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	n.addr = lis.Addr().String()
	n.srv = grpcserver.New(grpcserver.Options{})
	register(n.srv)
	go func() { _ = n.srv.Serve(lis) }()
	return nil
}

// Close stops every server at once.
func (c *Cluster) Close() {
	c.mu.Lock()
	nodes := append(slices.Clone(c.brokers), c.controllers...)
	c.mu.Unlock()
	c.groups.close()
	for _, n := range nodes {
		stopNow(n)
	}
}

func stopNow(n *node) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: cut open calls
	n.srv.Stop(ctx)
}

// BrokerAddrs lists the brokers' addresses, broker 1 first.
func (c *Cluster) BrokerAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.brokers))
	for i, n := range c.brokers {
		out[i] = n.addr
	}
	return out
}

// BrokerAddr is broker id's address.
func (c *Cluster) BrokerAddr(id int32) string { return c.BrokerAddrs()[id-1] }

// ControllerAddrs lists the controllers' addresses, the first controller first.
func (c *Cluster) ControllerAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.controllers))
	for i, n := range c.controllers {
		out[i] = n.addr
	}
	return out
}

// StopBroker stops broker id's server: open calls fail and new ones cannot
// connect. Metadata stops listing it.
func (c *Cluster) StopBroker(id int32) {
	c.mu.Lock()
	n := c.brokers[id-1]
	n.down = true
	c.mu.Unlock()
	stopNow(n)
}

// SetActiveController makes controller index i (from 0) the active one.
func (c *Cluster) SetActiveController(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = i
}

// SetControllerHints says whether standby controllers name the active one.
func (c *Cluster) SetControllerHints(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noCtlHints = !on
}

// SetLeaderHints says whether brokers name the leader in their
// NOT_LEADER_OR_FOLLOWER and leader epoch errors (they do by default).
func (c *Cluster) SetLeaderHints(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noHints = !on
}

// SetControl installs fn (nil removes it).
func (c *Cluster) SetControl(fn ControlFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.control = fn
}

// Calls is how many calls of method the cluster has had.
func (c *Cluster) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// NodeCalls is how many calls of method node id has had.
func (c *Cluster) NodeCalls(id int32, method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodeCalls[id][method]
}

// BatchSizes lists the size of every batch appended by Produce, in log order.
func (c *Cluster) BatchSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.batchSizes)
}

// intercept counts a call and applies the control function's fault: it
// sleeps for the delay and returns the fault, if any. A call whose caller
// gives up during the delay is answered REQUEST_TIMED_OUT, unprocessed.
func (c *Cluster) intercept(ctx context.Context, n *node, method, topic string, partition int32) *Fault {
	c.mu.Lock()
	c.calls[method]++
	if c.nodeCalls[n.id] == nil {
		c.nodeCalls[n.id] = map[string]int{}
	}
	c.nodeCalls[n.id][method]++
	call := Call{Method: method, Node: n.id, N: c.calls[method], Topic: topic, Partition: partition}
	fn := c.control
	c.mu.Unlock()
	if fn == nil {
		return nil
	}
	f := fn(call)
	if f == nil {
		return nil
	}
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			// The caller gave up: do nothing, as a stalled broker would.
			return &Fault{Code: kerr.RequestTimedOut}
		}
	}
	if f.Code == kerr.None && f.Wait == 0 {
		return nil
	}
	return f
}

// CreateTopic creates a topic whose partitions all have the given replicas
// (default: broker 1), the first being the leader, at leader epoch 0.
func (c *Cluster) CreateTopic(name string, partitions int, replicas ...int32) {
	if len(replicas) == 0 {
		replicas = []int32{1}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.createTopicLocked(name, partitions, func(int) []int32 { return slices.Clone(replicas) })
}

func (c *Cluster) createTopicLocked(name string, partitions int, replicas func(p int) []int32) {
	c.topicSerial++
	t := &topic{id: fmt.Sprintf("topic-id-%d", c.topicSerial), configs: map[string]string{}}
	for i := range partitions {
		r := replicas(i)
		t.parts = append(t.parts, newPartition(r[0], r))
	}
	c.topics[name] = t
}

// DeleteTopic deletes a topic with its logs; a topic created again under
// its name starts empty, at leader epoch 0, with a new topic id.
func (c *Cluster) DeleteTopic(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleteTopicLocked(name)
}

func (c *Cluster) deleteTopicLocked(name string) {
	t := c.topics[name]
	if t == nil {
		return
	}
	delete(c.topics, name)
	for _, p := range t.parts {
		p.notifyLocked() // parked fetches find it gone
	}
}

// TopicID is the id of topic name ("" when it does not exist).
func (c *Cluster) TopicID(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.topics[name]; t != nil {
		return t.id
	}
	return ""
}

// MoveLeader makes broker to the leader of topic-partition, bumping the
// leader epoch.
func (c *Cluster) MoveLeader(topicName string, partition, to int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.topics[topicName].parts[partition]
	p.leader = to
	p.epoch++
	if !slices.Contains(p.replicas, to) {
		p.replicas = append(p.replicas, to)
	}
	p.notifyLocked()
}

// Leader returns the leader and leader epoch of topic-partition.
func (c *Cluster) Leader(topicName string, partition int32) (int32, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.topics[topicName].parts[partition]
	return p.leader, p.epoch
}

func (c *Cluster) partLocked(topicName string, partition int32) (*partition, error) {
	t, ok := c.topics[topicName]
	if !ok || partition < 0 || int(partition) >= len(t.parts) {
		return nil, kerr.New(kerr.UnknownTopicOrPartition, "no partition %s-%d", topicName, partition)
	}
	return t.parts[partition], nil
}

func (c *Cluster) mustPart(topicName string, partition int32) *partition {
	p, err := c.partLocked(topicName, partition)
	if err != nil {
		panic(fmt.Sprintf("fakebroker: %v", err))
	}
	return p
}

// notLeaderLocked is the NOT_LEADER_OR_FOLLOWER answer of node n, naming
// the leader unless told not to.
func (c *Cluster) notLeaderLocked(n *node, topicName string, partition int32, p *partition, noHint bool) *kerr.Error {
	e := kerr.New(kerr.NotLeaderOrFollower, "broker %d is not the leader of %s-%d", n.id, topicName, partition)
	if !noHint && !c.noHints && p.leader > 0 {
		e.Leader = &kerr.LeaderHint{ID: p.leader, Address: c.brokers[p.leader-1].addr, LeaderEpoch: p.epoch}
	}
	return e
}
