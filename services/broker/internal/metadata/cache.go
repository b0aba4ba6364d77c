// Package metadata is a broker's view of the cluster as the active controller
// last described it (UpdateMetadata and LeaderAndIsr): live brokers, the
// controller, every partition's leader and ISR, and topic configs. It answers
// client Metadata requests and tells the replica fetchers where leaders are.
//
// It also keeps the controller-epoch fence: an UpdateMetadata or
// LeaderAndIsr from a controller older than the newest one seen is refused
// with STALE_CONTROLLER_EPOCH (Kafka's ZooKeeper-mode rule, F22).
package metadata

import (
	"context"
	"maps"
	"slices"
	"sort"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/platform/kerr"
)

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

// Broker is a live broker.
type Broker struct {
	ID      int32
	Address string
	Rack    string
	Epoch   int64
	// ShuttingDown is set while the broker is in controlled shutdown: it is
	// still registered (and may still serve) but may not join an ISR.
	ShuttingDown bool
	// Endpoints are its further named listeners, e.g. "kafka".
	Endpoints map[string]string
}

// Cache is safe for concurrent use. Readers get copies.
type Cache struct {
	mu              lockorder.RWMutex[lockorder.Leaf]
	clusterID       string
	controller      *commonv1.Node
	controllerEpoch int32
	newerController chan struct{} // closed when controllerEpoch grows; nil until asked for
	brokers         map[int32]Broker
	partitions      map[TP]*commonv1.PartitionState
	// announced are the partitions an UpdateMetadata has listed. A
	// LeaderAndIsr tells a broker only of the partitions it hosts, so a
	// topic's partitions known from it alone are a part of the topic:
	// Topics and TopicPartitions, which answer Metadata and count
	// __consumer_offsets' partitions, show only announced ones.
	announced     map[TP]bool
	topicConfigs  map[string]map[string]string
	topicIDs      map[string]string
	topicsByID    map[string]string // topicIDs reversed (setTopicIDLocked)
	brokerConfigs map[string]string
	initialised   bool          // a full UpdateMetadata has arrived
	ready         chan struct{} // closed when initialised is set
	updated       chan struct{} // closed by the next UpdateMetadata; nil until asked for

	// Config versions: each topic's configs and the dynamic broker configs
	// carry the value of gen when they last changed, so the replica manager
	// re-resolves a replica's effective config only when one of its inputs
	// did, not on every UpdateMetadata for every hosted replica.
	gen              uint64
	topicCfgVersions map[string]uint64
	brokerCfgVersion uint64
}

// ConfigVersion names the inputs a replica's effective config was resolved
// from: its topic's configs and the dynamic broker configs.
type ConfigVersion struct{ Topic, Broker uint64 }

// New returns an empty cache.
func New() *Cache {
	return &Cache{
		brokers:       map[int32]Broker{},
		partitions:    map[TP]*commonv1.PartitionState{},
		announced:     map[TP]bool{},
		topicConfigs:  map[string]map[string]string{},
		topicIDs:      map[string]string{},
		topicsByID:    map[string]string{},
		brokerConfigs: map[string]string{},

		topicCfgVersions: map[string]uint64{},
		ready:            make(chan struct{}),
	}
}

// Ready is closed once the first full UpdateMetadata has arrived.
func (c *Cache) Ready() <-chan struct{} { return c.ready }

// setTopicConfigLocked records a topic's configs, moving its version only
// when they changed.
func (c *Cache) setTopicConfigLocked(topic string, cfg map[string]string) {
	old, had := c.topicConfigs[topic]
	c.topicConfigs[topic] = maps.Clone(cfg)
	if !had || !maps.Equal(old, cfg) || c.topicCfgVersions[topic] == 0 {
		c.gen++
		c.topicCfgVersions[topic] = c.gen
	}
}

// ConfigVersion returns the versions of a topic's configs and of the
// dynamic broker configs.
func (c *Cache) ConfigVersion(topic string) ConfigVersion {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return ConfigVersion{Topic: c.topicCfgVersions[topic], Broker: c.brokerCfgVersion}
}

// TopicConfigVersioned returns a topic's configs with the version they and
// the broker configs are at, read together.
func (c *Cache) TopicConfigVersioned(topic string) (map[string]string, ConfigVersion) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.topicConfigs[topic]), ConfigVersion{Topic: c.topicCfgVersions[topic], Broker: c.brokerCfgVersion}
}

// CheckControllerEpoch admits a control request from controller epoch e and
// records it as the newest seen. Older epochs are refused: that is how a
// deposed controller is fenced.
func (c *Cache) CheckControllerEpoch(e int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e < c.controllerEpoch {
		return kerr.New(kerr.StaleControllerEpoch, "controller epoch %d is older than %d", e, c.controllerEpoch)
	}
	if e > c.controllerEpoch && c.newerController != nil {
		close(c.newerController)
		c.newerController = nil
	}
	c.controllerEpoch = e
	return nil
}

// NewerController returns a channel closed once a controller epoch newer
// than the newest seen now is admitted: the controller of a call in flight
// has been succeeded (it may be frozen, holding the call until it times out).
func (c *Cache) NewerController() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.newerController == nil {
		c.newerController = make(chan struct{})
	}
	return c.newerController
}

// ControllerEpoch is the newest controller epoch seen.
func (c *Cache) ControllerEpoch() int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.controllerEpoch
}

// ApplyUpdate applies an UpdateMetadata request whose controller epoch has
// already been admitted.
func (c *Cache) ApplyUpdate(req *controlv1.UpdateMetadataRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyUpdateLocked(req)
}

// ApplyUpdateOfNewest is ApplyUpdate for a request whose controller epoch is
// still the newest seen; it applies nothing and answers
// STALE_CONTROLLER_EPOCH when a newer one was admitted since (checked under
// the lock the update takes, so no newer controller's view is overwritten
// by an older one).
func (c *Cache) ApplyUpdateOfNewest(req *controlv1.UpdateMetadataRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := req.GetControllerEpoch(); e < c.controllerEpoch {
		return kerr.New(kerr.StaleControllerEpoch, "controller epoch %d was succeeded by %d before its update was applied", e, c.controllerEpoch)
	}
	c.applyUpdateLocked(req)
	return nil
}

func (c *Cache) applyUpdateLocked(req *controlv1.UpdateMetadataRequest) {
	if c.updated != nil {
		close(c.updated)
		c.updated = nil
	}
	if req.GetClusterId() != "" {
		c.clusterID = req.GetClusterId()
	}
	if req.GetController() != nil {
		c.controller = req.GetController()
	}
	if req.GetFull() {
		c.brokers = map[int32]Broker{}
		c.partitions = map[TP]*commonv1.PartitionState{}
		c.announced = map[TP]bool{}
		// Topic configs are replaced below; those of topics the update
		// does not list go (their versions too).
		listed := map[string]bool{}
		for _, tc := range req.GetTopicConfigs() {
			listed[tc.GetTopic()] = true
		}
		for t := range c.topicConfigs {
			if !listed[t] {
				delete(c.topicConfigs, t)
				delete(c.topicCfgVersions, t)
			}
		}
		c.topicIDs, c.topicsByID = map[string]string{}, map[string]string{}
		if !c.initialised {
			close(c.ready)
		}
		c.initialised = true
	}
	if req.GetFull() || len(req.GetBrokers()) > 0 {
		c.brokers = map[int32]Broker{}
		for _, b := range req.GetBrokers() {
			n := b.GetNode()
			c.brokers[n.GetId()] = Broker{ID: n.GetId(), Address: n.GetAddress(), Rack: n.GetRack(), Epoch: b.GetBrokerEpoch(),
				ShuttingDown: b.GetShuttingDown(), Endpoints: maps.Clone(b.GetEndpoints())}
		}
	}
	for _, t := range req.GetDeletedTopics() {
		for tp := range c.partitions {
			if tp.Topic == t {
				delete(c.partitions, tp)
				delete(c.announced, tp)
			}
		}
		delete(c.topicConfigs, t)
		delete(c.topicCfgVersions, t)
		c.setTopicIDLocked(t, "")
	}
	for _, p := range req.GetPartitions() {
		c.putPartitionLocked(p)
		c.announced[TP{p.GetTopic(), p.GetPartition()}] = true
	}
	for _, tc := range req.GetTopicConfigs() {
		c.setTopicConfigLocked(tc.GetTopic(), tc.GetConfigs())
		if tc.GetTopicId() != "" {
			c.setTopicIDLocked(tc.GetTopic(), tc.GetTopicId())
		}
	}
	// Every UpdateMetadata carries the whole dynamic broker config; an
	// empty one arrives as nil (protobuf drops empty maps), and means the
	// last key was deleted.
	bc := maps.Clone(req.GetBrokerConfigs())
	if bc == nil {
		bc = map[string]string{}
	}
	if !maps.Equal(bc, c.brokerConfigs) || c.brokerCfgVersion == 0 {
		c.gen++
		c.brokerCfgVersion = c.gen
	}
	c.brokerConfigs = bc
}

// WaitAnnounced waits until an UpdateMetadata has announced every one of
// topic's partitions (0 to partitions-1) with a leader, and its id, or ctx
// ends (false): a broker answering a CreateTopics it forwarded waits for
// this, as Kafka's does, so a client that next asks it about the topic
// finds it.
func (c *Cache) WaitAnnounced(ctx context.Context, topic string, partitions int32) bool {
	for {
		c.mu.Lock()
		done := c.announcedLocked(topic, partitions)
		if !done && c.updated == nil {
			c.updated = make(chan struct{})
		}
		updated := c.updated
		c.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-updated:
		case <-ctx.Done():
			return false
		}
	}
}

func (c *Cache) announcedLocked(topic string, partitions int32) bool {
	if c.topicIDs[topic] == "" {
		return false
	}
	for p := range partitions {
		tp := TP{topic, p}
		if st, ok := c.partitions[tp]; !ok || !c.announced[tp] || st.GetLeader() < 0 {
			return false
		}
	}
	return true
}

// Initialised reports whether a full UpdateMetadata has arrived (every
// controller term and every broker registration starts with one). Before
// that the cache knows at most the partitions of a LeaderAndIsr, so it
// cannot tell a topic that does not exist from one it has not heard of.
func (c *Cache) Initialised() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.initialised
}

// PutPartitions records a LeaderAndIsr's partition states (the broker acts
// on them at once: Partition) without announcing them (Topics,
// TopicPartitions wait for the UpdateMetadata that lists them); a state is
// skipped when the cache already holds a newer leader epoch for its
// partition.
func (c *Cache) PutPartitions(ps []*commonv1.PartitionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		c.putPartitionLocked(p)
	}
}

func (c *Cache) putPartitionLocked(p *commonv1.PartitionState) {
	tp := TP{p.GetTopic(), p.GetPartition()}
	if old, ok := c.partitions[tp]; ok && (old.GetLeaderEpoch() > p.GetLeaderEpoch() ||
		(old.GetLeaderEpoch() == p.GetLeaderEpoch() && old.GetPartitionEpoch() > p.GetPartitionEpoch())) {
		return
	}
	c.partitions[tp] = p
}

// PutTopicConfig records a topic's configs and, when given, its id.
func (c *Cache) PutTopicConfig(topic string, cfg map[string]string, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setTopicConfigLocked(topic, cfg)
	if id != "" {
		c.setTopicIDLocked(topic, id)
	}
}

// setTopicIDLocked records topic's id ("": forgets it), keeping the
// reverse index in step.
func (c *Cache) setTopicIDLocked(topic, id string) {
	if old, ok := c.topicIDs[topic]; ok {
		if c.topicsByID[old] == topic {
			delete(c.topicsByID, old)
		}
		delete(c.topicIDs, topic)
	}
	if id != "" {
		c.topicIDs[topic] = id
		c.topicsByID[id] = topic
	}
}

// TopicByID returns the topic whose id is id ("" when none is known),
// announced or not: a leader knows a new topic's id from its LeaderAndIsr
// before an UpdateMetadata announces it, and serves fetches by it.
func (c *Cache) TopicByID(id string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.topicsByID[id]
}

// TopicID returns a topic's id ("" when unknown).
func (c *Cache) TopicID(topic string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.topicIDs[topic]
}

// Partition returns a partition's state.
func (c *Cache) Partition(tp TP) (*commonv1.PartitionState, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.partitions[tp]
	return p, ok
}

// Broker returns a live broker.
func (c *Cache) Broker(id int32) (Broker, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.brokers[id]
	return b, ok
}

// Brokers lists live brokers by id.
func (c *Cache) Brokers() []Broker {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := slices.Collect(maps.Values(c.brokers))
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Controller returns the active controller, or nil.
func (c *Cache) Controller() *commonv1.Node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.controller
}

// TopicConfig returns a topic's configs (nil when unknown).
func (c *Cache) TopicConfig(topic string) map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.topicConfigs[topic])
}

// BrokerConfigs returns the dynamic broker configs.
func (c *Cache) BrokerConfigs() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.brokerConfigs)
}

// LeaderHint names the leader of tp for NOT_LEADER_OR_FOLLOWER answers.
func (c *Cache) LeaderHint(tp TP) *kerr.LeaderHint {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.partitions[tp]
	if !ok {
		return nil
	}
	h := &kerr.LeaderHint{ID: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch()}
	if b, ok := c.brokers[p.GetLeader()]; ok {
		h.Address = b.Address
	}
	return h
}

// Topics lists the topics with at least one partition an UpdateMetadata
// listed, sorted.
func (c *Cache) Topics() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	seen := map[string]bool{}
	for tp := range c.partitions {
		if c.announced[tp] {
			seen[tp.Topic] = true
		}
	}
	out := slices.Collect(maps.Keys(seen))
	sort.Strings(out)
	return out
}

// TopicPartitions returns a topic's partition states that an
// UpdateMetadata listed, ordered by partition: every partition of the topic
// as the controller last announced it, never the part of it a LeaderAndIsr
// told this broker of first (a Kafka client takes the partition count from
// a Metadata answer, and the group coordinator maps groups to
// __consumer_offsets' partitions by it).
func (c *Cache) TopicPartitions(topic string) []*commonv1.PartitionState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []*commonv1.PartitionState
	for tp, p := range c.partitions {
		if tp.Topic == topic && c.announced[tp] {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetPartition() < out[j].GetPartition() })
	return out
}

// ClusterID is the cluster's id as the controller named it.
func (c *Cache) ClusterID() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.clusterID
}
