package client

import (
	"context"
	"sync"
	"time"

	"tidemark.io/services/platform/kerr"
)

// route is where requests for one partition go.
type route struct {
	leader      int32
	leaderEpoch int32
	addr        string
	topicID     string // "" when the metadata gave none
}

type partMeta struct {
	leader      int32
	leaderEpoch int32
	replicas    []int32
	stale       bool // an answer said the leader moved; look it up again
}

// metadata is the client's cache of brokers, topics and partition leaders
// (BrokerService.Metadata), corrected in place by leader hints.
type metadata struct {
	c *Client

	mu      sync.Mutex // guards every field below
	brokers map[int32]string
	topics  map[string][]partMeta
	// topicIDs are the ids metadata gave the topics (KIP-516): a topic
	// created again under its name gets a new one.
	topicIDs map[string]string
	// idHistory lists the ids the metadata gave each topic name, oldest
	// first (the last maxIDHistory), and outlives the topic's entry. Ids
	// are never used again, so an answer naming one before the last comes
	// from a broker whose metadata lags and is ignored for that topic
	// (takeTopicIDLocked).
	idHistory map[string][]string
	// replacedIDNames lists, per topic, who named each of its replaced ids
	// (before the last in idHistory) since an answer last named the last
	// one (trustReplacedIDLocked).
	replacedIDNames map[string][]replacedIDNamers
	// fetchedAt is when each topic was last described: a refresh may ask
	// for some topics only, which says nothing of the others' age.
	fetchedAt map[string]time.Time
	inflight  *refreshCall // the running refresh, if any
	// silent are the brokers whose last call went unanswered (its own
	// timeout ran out, or no connection): asked last for any broker's
	// answer, as Kafka's clients pick the least loaded node. A stalled
	// coordinator that was just given up on is otherwise asked where the
	// group went as often as any other, and each such try costs a whole
	// request timeout, which can outlast the members' sessions.
	silent map[string]bool
}

// refreshCall lets concurrent callers share one Metadata request.
type refreshCall struct {
	topics []string // nil: every topic
	done   chan struct{}
	err    error
	// refused are the topics the answer refused (TOPIC_AUTHORIZATION_FAILED:
	// the caller may not Describe them), with the broker's message. They are
	// not kept in the cache: one client may speak for several principals
	// (the gateway's users), and what one may not see another may.
	refused map[string]string
	// invalid are the topics the answer said cannot exist
	// (INVALID_TOPIC_EXCEPTION: a name Kafka's rule forbids), with the
	// broker's message. Taken for topics not created yet, calls naming
	// them waited out their deadlines.
	invalid map[string]string
}

func newMetadata(c *Client) *metadata {
	return &metadata{c: c, brokers: map[int32]string{}, silent: map[string]bool{}, topics: map[string][]partMeta{}, topicIDs: map[string]string{},
		idHistory: map[string][]string{}, replacedIDNames: map[string][]replacedIDNamers{}, fetchedAt: map[string]time.Time{}}
}

// leader returns where to send requests for topic-partition, refreshing the
// cache at most once when it does not know or no longer trusts the answer.
func (m *metadata) leader(ctx context.Context, topic string, partition int32) (route, error) {
	r, err := m.cachedLeader(topic, partition)
	if err == nil {
		return r, nil
	}
	if rerr := m.refreshTopic(ctx, topic); rerr != nil {
		return route{}, rerr
	}
	r, err = m.cachedLeader(topic, partition)
	if err != nil {
		if m.beyondPartitions(topic, partition) {
			return route{}, &noSuchPartition{err}
		}
		return route{}, err
	}
	return r, nil
}

// noSuchPartition is UNKNOWN_TOPIC_OR_PARTITION from metadata fetched just
// now that lists the topic with fewer partitions: the partition does not
// exist, which asking again will not change (a partition call fails at
// once, as Kafka's admin client does for a partition its metadata lacks).
// A topic missing from the metadata is not this: right after CreateTopics
// the broker asked may not know it yet.
type noSuchPartition struct{ ke *kerr.Error }

func (e *noSuchPartition) Error() string { return e.ke.Error() }
func (e *noSuchPartition) Unwrap() error { return e.ke }

// beyondPartitions reports whether the cache lists topic with partitions,
// none of them partition.
func (m *metadata) beyondPartitions(topic string, partition int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts, ok := m.topics[topic]
	return ok && len(parts) > 0 && (partition < 0 || int(partition) >= len(parts))
}

// cachedLeader answers from the cache, or says why it cannot.
func (m *metadata) cachedLeader(topic string, partition int32) (route, *kerr.Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts, ok := m.topics[topic]
	if !ok {
		return route{}, kerr.BadField(kerr.UnknownTopicOrPartition, "topic", "%q does not exist", topic)
	}
	if time.Since(m.fetchedAt[topic]) > m.c.opts.MetadataMaxAge {
		return route{}, kerr.New(kerr.LeaderNotAvailable, "metadata of %q is older than %v", topic, m.c.opts.MetadataMaxAge)
	}
	if partition < 0 || int(partition) >= len(parts) {
		return route{}, kerr.BadField(kerr.UnknownTopicOrPartition, "partition", "topic %q has %d partitions, no partition %d", topic, len(parts), partition)
	}
	p := parts[partition]
	switch {
	case p.stale:
		return route{}, kerr.New(kerr.NotLeaderOrFollower, "leader of %s-%d moved", topic, partition)
	case p.leader < 0:
		return route{}, kerr.New(kerr.LeaderNotAvailable, "%s-%d has no leader", topic, partition)
	}
	addr, ok := m.brokers[p.leader]
	if !ok {
		return route{}, kerr.New(kerr.LeaderNotAvailable, "address of broker %d, leader of %s-%d, is not known", p.leader, topic, partition)
	}
	return route{leader: p.leader, leaderEpoch: p.leaderEpoch, addr: addr, topicID: m.topicIDs[topic]}, nil
}

// topicID is the id the metadata last gave topic, "" when none.
func (m *metadata) topicID(topic string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.topicIDs[topic]
}

// numPartitions returns how many partitions topic has.
func (m *metadata) numPartitions(ctx context.Context, topic string) (int, error) {
	if n := m.cachedCount(topic); n > 0 {
		return n, nil
	}
	if err := m.refreshTopic(ctx, topic); err != nil {
		return 0, err
	}
	if n := m.cachedCount(topic); n > 0 {
		return n, nil
	}
	return 0, kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", topic)
}

func (m *metadata) cachedCount(topic string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.topics[topic])
}

// brokerAddr returns the address of broker id, if known.
func (m *metadata) brokerAddr(id int32) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.brokers[id]
	return a, ok
}

// noteError updates the cache after a failed partition request: a leader
// hint is applied directly (saving a Metadata round trip); other answers
// the kerr table marks RefreshMetadata mark the partition for a refresh.
func (m *metadata) noteError(topic string, partition int32, e *kerr.Error) {
	if e == nil {
		return
	}
	if h := e.Leader; h != nil && h.ID >= 0 && h.Address != "" {
		m.applyHint(topic, partition, h)
		return
	}
	if e.Code.RefreshMetadata() {
		m.markStale(topic, partition)
	}
}

// noteTimeout marks topic-partition for a refresh after its leader did not
// answer in time. A leader that stopped answering (stalled, or cut off
// from the client while the connection stays up) may have been replaced,
// and no answer will say so; Kafka's client refreshes metadata after a
// request timeout too.
func (m *metadata) noteTimeout(topic string, partition int32) {
	m.markStale(topic, partition)
}

func (m *metadata) markStale(topic string, partition int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if parts := m.topics[topic]; partition >= 0 && int(partition) < len(parts) {
		parts[partition].stale = true
	}
}

func (m *metadata) applyHint(topic string, partition int32, h *kerr.LeaderHint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := m.topics[topic]
	if partition < 0 || int(partition) >= len(parts) {
		return
	}
	p := &parts[partition]
	if h.LeaderEpoch < p.leaderEpoch {
		// Older news than ours: trust neither; look again.
		p.stale = true
		return
	}
	m.brokers[h.ID] = h.Address
	p.leader, p.leaderEpoch, p.stale = h.ID, h.LeaderEpoch, false
	m.c.log.Debug("leader hint", "topic", topic, "partition", partition, "leader", h.ID, "epoch", h.LeaderEpoch)
}
