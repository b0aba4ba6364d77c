package gateway

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// router finds where a BrokerService call belongs: a partition's calls go
// to its leader, as the brokers' metadata (client.Client.Metadata) named it
// (cached until an answer says it moved); other calls go to any broker. The client package
// keeps its per-partition calls to itself, so the gateway makes the call
// over its own connection to the broker the metadata named.
type router struct {
	cl        *client.Client
	conns     *connSet
	bootstrap []string
	next      atomic.Uint32 // spreads any-broker calls over bootstrap
	budget    time.Duration
	// stopping ends when the gateway stops; streams end with it.
	stopping context.Context
	// leaders caches each partition's leader address between calls, so a
	// steady stream of REST calls costs no metadata round trip each. An
	// answer a new route may fix drops the entry; entries also age out.
	leaders sync.Map // "topic/partition" -> cachedLeader
}

type cachedLeader struct {
	addr string
	at   time.Time
}

// leaderTTL bounds how long a cached leader is trusted without an error.
const leaderTTL = 10 * time.Second

func leaderKey(topic string, partition int32) string {
	return topic + "/" + strconv.Itoa(int(partition))
}

// onLeader runs call against the leader of topic-partition, looking the
// leader up again (or following the leader the answer named) and retrying
// while the answer is one a new route may fix, within the retry budget.
func (r *router) onLeader(ctx context.Context, topic string, partition int32, call func(brokerv1.BrokerServiceClient) error) error {
	p := newPacer(r.budget)
	hint := ""
	for {
		retry, err := r.leaderAttempt(ctx, topic, partition, &hint, call)
		if err == nil {
			return nil
		}
		if !retry || ctx.Err() != nil || !p.wait(ctx) {
			return err
		}
	}
}

// leaderAttempt makes one attempt and says whether another may succeed.
// hint carries a leader address from one attempt to the next.
func (r *router) leaderAttempt(ctx context.Context, topic string, partition int32, hint *string,
	call func(brokerv1.BrokerServiceClient) error) (bool, error) {
	bc, err := r.leader(ctx, topic, partition, *hint)
	if err != nil {
		// The metadata's own UNKNOWN_TOPIC_OR_PARTITION is final: the
		// topic or partition does not exist.
		ke := asKerr(err)
		return reroutable(ke.Code), ke
	}
	ke := asKerr(call(bc))
	if ke == nil {
		return false, nil
	}
	if reroutable(ke.Code) || ke.Code == kerr.UnknownTopicOrPartition {
		r.leaders.Delete(leaderKey(topic, partition))
	}
	*hint = hintAddr(ke)
	// A leader the metadata named that does not know the partition has
	// not caught up with the controller yet.
	return reroutable(ke.Code) || ke.Code == kerr.UnknownTopicOrPartition, ke
}

// leader returns a client on the leader of topic-partition: the broker at
// hint when one is given, else the cached leader, else the leader the
// metadata names.
func (r *router) leader(ctx context.Context, topic string, partition int32, hint string) (brokerv1.BrokerServiceClient, error) {
	addr := hint
	key := leaderKey(topic, partition)
	if addr == "" {
		if c, ok := r.leaders.Load(key); ok && time.Since(c.(cachedLeader).at) < leaderTTL {
			addr = c.(cachedLeader).addr
		}
	}
	if addr == "" {
		var err error
		if addr, err = r.lookup(ctx, topic, partition); err != nil {
			return nil, err
		}
		r.leaders.Store(key, cachedLeader{addr: addr, at: time.Now()})
	} else if hint != "" {
		r.leaders.Store(key, cachedLeader{addr: addr, at: time.Now()})
	}
	cc, err := r.conns.get(addr)
	if err != nil {
		return nil, err
	}
	return brokerv1.NewBrokerServiceClient(cc), nil
}

// lookup asks the brokers' metadata for the address of the partition's leader.
func (r *router) lookup(ctx context.Context, topic string, partition int32) (string, error) {
	md, err := r.cl.Metadata(ctx, topic)
	if err != nil {
		return "", err
	}
	for _, t := range md.GetTopics() {
		if t.GetName() != topic || kerr.Code(t.GetErrorCode()) == kerr.UnknownTopicOrPartition {
			continue
		}
		for _, p := range t.GetPartitions() {
			if p.GetPartition() != partition {
				continue
			}
			if p.GetLeader() < 0 || kerr.Code(p.GetErrorCode()) == kerr.LeaderNotAvailable {
				return "", kerr.New(kerr.LeaderNotAvailable, "%s-%d has no live leader", topic, partition)
			}
			for _, b := range md.GetBrokers() {
				if b.GetId() == p.GetLeader() {
					return b.GetAddress(), nil
				}
			}
			return "", kerr.New(kerr.LeaderNotAvailable, "broker %d, leader of %s-%d, is not live", p.GetLeader(), topic, partition)
		}
		return "", kerr.BadField(kerr.UnknownTopicOrPartition, "partition", "topic %q has %d partitions, no partition %d",
			topic, len(t.GetPartitions()), partition)
	}
	return "", kerr.BadField(kerr.UnknownTopicOrPartition, "topic", "topic %q does not exist", topic)
}

// onAny runs call against a broker, moving on to the next bootstrap
// address while brokers cannot be reached, within the retry budget.
func (r *router) onAny(ctx context.Context, call func(brokerv1.BrokerServiceClient) error) error {
	p := newPacer(r.budget)
	start := int(r.next.Add(1))
	for i := 0; ; i++ {
		addr := r.bootstrap[(start+i)%len(r.bootstrap)]
		cc, err := r.conns.get(addr)
		if err == nil {
			err = call(brokerv1.NewBrokerServiceClient(cc))
		}
		ke := asKerr(err)
		if ke == nil {
			return nil
		}
		if ke.Code != kerr.NetworkException || ctx.Err() != nil {
			return ke
		}
		// Pause only after every address has been tried.
		if (i+1)%len(r.bootstrap) == 0 && !p.wait(ctx) {
			return ke
		}
	}
}
