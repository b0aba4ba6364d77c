package ctrl

import (
	"cmp"
	"maps"
	"slices"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// topic is one topic as the loop knows it.
type topic struct {
	name   string
	id     string
	modRev int64
	parts  []*partition // indexed by partition id
	config map[string]string
	// deleting is set once the topic is marked for deletion; done closes
	// when its keys are gone.
	deleting bool
	done     chan struct{}
}

// partition is one partition: its assignment and its state in etcd.
type partition struct {
	t        *topic
	id       int32
	replicas election.Assignment
	// adding and removing are a reassignment in flight (KIP-455): replicas
	// then holds the target and the original replicas (reassign.go).
	adding, removing []int32
	// rec is the stored state; rec.ModRevision 0 means it has none yet
	// (Kafka's NewPartition).
	rec metastore.PartitionRecord
}

func (p *partition) tp() election.TopicPartition {
	return election.TopicPartition{Topic: p.t.name, Partition: p.id}
}

func (p *partition) hasState() bool { return p.rec.ModRevision != 0 }

func (p *partition) state() election.PartitionState {
	s := p.rec.State
	return election.PartitionState{Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
		ISR: slices.Clone(s.ISR), PartitionEpoch: s.PartitionEpoch}
}

func (p *partition) view() election.Partition {
	return election.Partition{Assignment: p.replicas, State: p.state()}
}

// broker is a live broker incarnation (a registration in etcd).
// Its connection and sender are the shell's (link).
type broker struct {
	info         metastore.Broker
	shuttingDown bool
}

// session is an open BrokerSession stream.
type session struct {
	brokerID int32
	epoch    int64
	// kick closes when a newer session of the same broker replaces it.
	kick chan struct{}
}

// failCheck is a pending fast-failover decision for a broker whose session
// broke: it is declared dead when the grace period has passed, the health
// probe failed and its address refused a connection, unless it reopened a
// session meanwhile.
type failCheck struct {
	epoch int64
	// gen tells this check's grace timer and probe result from an older
	// check's of the same broker.
	gen              uint64
	expired, probed  bool
	healthy          bool
	refused          bool // the probe's connection was refused: the process is gone
	replaced         bool // another process answers at its address: this incarnation is gone
	healthCheckError string
}

// progressKey names one replica's progress report.
type progressKey struct {
	tp     election.TopicPartition
	broker int32
}

// subscriber is one WatchCluster stream; ch is poked after changes.
type subscriber struct {
	ch chan struct{}
}

// view is the election package's picture of the brokers.
func (c *core) view() election.Brokers {
	b := election.Brokers{Epochs: make(map[int32]int64, len(c.brokers)), ShuttingDown: map[int32]bool{}}
	for id, br := range c.brokers {
		b.Epochs[id] = br.info.Epoch
		if br.shuttingDown {
			b.ShuttingDown[id] = true
		}
	}
	return b
}

// registered reports whether id has a live registration.
func (c *core) registered(id int32) bool { return c.brokers[id] != nil }

// liveReplicas lists, in assignment order, those of reps that may lead or
// join an ISR: registered and not shutting down.
func (c *core) liveReplicas(reps []int32) []int32 {
	var live []int32
	for _, r := range reps {
		if b := c.brokers[r]; b != nil && !b.shuttingDown {
			live = append(live, r)
		}
	}
	return live
}

// sortedTopics lists the topics by name.
func (c *core) sortedTopics() []*topic {
	out := make([]*topic, 0, len(c.topics))
	for _, name := range slices.Sorted(maps.Keys(c.topics)) {
		out = append(out, c.topics[name])
	}
	return out
}

// allPartitions lists every partition with a state, by topic and id.
func (c *core) allPartitions() []*partition {
	var out []*partition
	for _, t := range c.sortedTopics() {
		for _, p := range t.parts {
			if p.hasState() {
				out = append(out, p)
			}
		}
	}
	return out
}

// partitionsOf lists the partitions with a state that have a replica on id,
// leaving out topics being deleted (their replicas only get StopReplica).
func (c *core) partitionsOf(id int32) []*partition {
	var out []*partition
	for _, p := range c.allPartitions() {
		if p.replicas.Contains(id) && !p.t.deleting {
			out = append(out, p)
		}
	}
	return out
}

// lookup finds a partition; nil if unknown.
func (c *core) lookup(topicName string, id int32) *partition {
	t := c.topics[topicName]
	if t == nil || id < 0 || int(id) >= len(t.parts) {
		return nil
	}
	return t.parts[id]
}

// sortedBrokerIDs lists the live brokers by id.
func (c *core) sortedBrokerIDs() []int32 {
	return slices.Sorted(maps.Keys(c.brokers))
}

// offline reports whether a partition has no live leader.
func (c *core) offline(p *partition) bool {
	return p.rec.State.Leader == election.NoLeader || !c.registered(p.rec.State.Leader)
}

// offlineCount is OfflinePartitionsCount: the offline partitions of topics
// not being deleted. Kafka leaves topics queued for deletion out: nothing
// will elect their leaders again, and their replicas are being removed.
func (c *core) offlineCount() int {
	n := 0
	for _, p := range c.allPartitions() {
		if !p.t.deleting && c.offline(p) {
			n++
		}
	}
	return n
}

// node is a broker's endpoint as the controller knows it, live or not.
func (c *core) node(id int32) *commonv1.Node {
	if b := c.brokers[id]; b != nil {
		return &commonv1.Node{Id: id, Address: b.info.Address, Rack: b.info.Rack}
	}
	if info, ok := c.seen[id]; ok {
		return &commonv1.Node{Id: id, Address: info.Address, Rack: info.Rack}
	}
	return &commonv1.Node{Id: id}
}

// protoState renders a partition's state for control requests.
func (c *core) protoState(p *partition) *commonv1.PartitionState {
	s := p.rec.State
	return &commonv1.PartitionState{
		Topic:           p.t.name,
		Partition:       p.id,
		Leader:          s.Leader,
		LeaderEpoch:     s.LeaderEpoch,
		Isr:             slices.Clone(s.ISR),
		PartitionEpoch:  s.PartitionEpoch,
		Replicas:        slices.Clone([]int32(p.replicas)),
		ControllerEpoch: s.ControllerEpoch,
		AddingReplicas:  slices.Clone(p.adding),
		EmptyLogLeader:  s.EmptyLogLeader && !c.leaderHasLog(p),
	}
}

func sortPartitions(ps []*partition) {
	slices.SortFunc(ps, func(x, y *partition) int {
		return cmp.Or(cmp.Compare(x.t.name, y.t.name), cmp.Compare(x.id, y.id))
	})
}

// progress returns the last report of one replica, or nil.
func (a *Active) progressOf(p *partition, brokerID int32) *controlv1.ReplicaProgress {
	return a.progress[progressKey{tp: p.tp(), broker: brokerID}]
}
