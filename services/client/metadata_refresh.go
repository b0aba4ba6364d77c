package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// refresh asks a broker for the metadata of every cached topic plus topics.
// Concurrent callers whose topics are covered share one request.
func (m *metadata) refresh(ctx context.Context, topics ...string) error {
	_, _, err := m.refreshCall(ctx, true, topics...)
	return err
}

// refreshTopic is refresh for one topic a caller is about to use, failing
// with TOPIC_AUTHORIZATION_FAILED, which no retry cures, when the answer
// refuses it (before, a refused topic was cached with no partitions and
// retried as unknown until the deadline). A refusal in someone else's
// answer may be that principal's only, so the caller then asks as itself.
func (m *metadata) refreshTopic(ctx context.Context, topic string) error {
	call, joined, err := m.refreshCall(ctx, true, topic)
	if err != nil {
		return err
	}
	if _, refused := call.refused[topic]; joined && refused {
		if call, _, err = m.refreshCall(ctx, false, topic); err != nil {
			return err
		}
	}
	if msg, ok := call.refused[topic]; ok {
		if msg == "" {
			msg = fmt.Sprintf("not allowed to describe topic %q", topic)
		}
		return kerr.New(kerr.TopicAuthorizationFailed, "%s", msg)
	}
	if msg, ok := call.invalid[topic]; ok {
		return kerr.BadField(kerr.InvalidTopicException, "topic", "%s", cmp.Or(msg, fmt.Sprintf("%q is not a legal topic name", topic)))
	}
	return nil
}

// invalidTopics are the topics an answer says cannot exist, with their
// messages.
func invalidTopics(resp *brokerv1.MetadataResponse) map[string]string {
	var out map[string]string
	for _, t := range resp.GetTopics() {
		if kerr.Code(t.GetErrorCode()) == kerr.InvalidTopicException {
			if out == nil {
				out = map[string]string{}
			}
			out[t.GetName()] = t.GetErrorMessage()
		}
	}
	return out
}

// refreshCall runs a refresh, or with share joins a running one that
// covers topics (joined). The call is done when it returns without error.
func (m *metadata) refreshCall(ctx context.Context, share bool, topics ...string) (call *refreshCall, joined bool, err error) {
	m.mu.Lock()
	if call := m.inflight; share && call != nil && covers(call.topics, topics) {
		m.mu.Unlock()
		select {
		case <-call.done:
			return call, true, call.err
		case <-ctx.Done():
			return nil, true, ctxError(ctx, nil, "metadata")
		}
	}
	want := m.topicsToAskLocked(topics)
	call = &refreshCall{topics: want, done: make(chan struct{})}
	m.inflight = call
	addrs := m.candidatesLocked()
	m.mu.Unlock()

	resp, addr, err := m.fetchOrDiscover(ctx, addrs, &brokerv1.MetadataRequest{Topics: want})
	m.mu.Lock()
	if err == nil {
		call.refused = m.applyLocked(resp, want, m.answererLocked(resp, addr))
		call.invalid = invalidTopics(resp)
	}
	if m.inflight == call {
		m.inflight = nil
	}
	m.mu.Unlock()
	call.err = err
	close(call.done)
	return call, false, err
}

// covers reports whether a request for have answers for want (nil = all).
func covers(have, want []string) bool {
	if have == nil {
		return true
	}
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

func (m *metadata) topicsToAskLocked(extra []string) []string {
	if len(m.topics) == 0 && len(extra) == 0 {
		return nil
	}
	out := make([]string, 0, len(m.topics)+len(extra))
	for t := range m.topics {
		out = append(out, t)
	}
	for _, t := range extra {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// candidatesLocked lists the addresses to ask, known brokers first in
// random order (to spread the load), then the bootstrap list.
func (m *metadata) candidatesLocked() []string {
	var out []string
	for _, a := range m.brokers {
		out = append(out, a)
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	for _, a := range m.c.bootstrap {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	// Those that went silent last, in the same order otherwise.
	slices.SortStableFunc(out, func(a, b string) int {
		switch {
		case m.silent[a] == m.silent[b]:
			return 0
		case m.silent[a]:
			return 1
		}
		return -1
	})
	return out
}

// noteAnswered records whether the broker at addr answered a call: err is
// the call's outcome, attempt its own context and ctx the caller's. A call
// whose own timeout ran out, or that found no connection, went unanswered;
// any answer, an error code included, clears that. The server ends the call
// at the same deadline (sent with it), and its reset (CANCEL) can arrive a
// moment before the attempt's own timer fires: that is a timeout too.
func (m *metadata) noteAnswered(addr string, ctx, attempt context.Context, err error) {
	if ctx.Err() != nil {
		return // the caller gave up: that says nothing of the broker
	}
	silent := err != nil && (errors.Is(attempt.Err(), context.DeadlineExceeded) || unanswered(status.Code(err)))
	m.mu.Lock()
	defer m.mu.Unlock()
	if silent {
		m.silent[addr] = true
	} else {
		delete(m.silent, addr)
	}
}

// unanswered says a call ended with no answer from the broker: no
// connection, or its deadline passed (seen by either end).
func unanswered(c codes.Code) bool {
	return c == codes.Unavailable || c == codes.DeadlineExceeded || c == codes.Canceled
}

// fetchOrDiscover is fetch, then, when no address answered, fetch from
// the addresses Options.DiscoverBrokers names that were not tried.
func (m *metadata) fetchOrDiscover(ctx context.Context, addrs []string, req *brokerv1.MetadataRequest) (resp *brokerv1.MetadataResponse, from string, err error) {
	resp, from, err = m.fetch(ctx, addrs, req)
	discover := m.c.opts.DiscoverBrokers
	if err == nil || discover == nil || ctx.Err() != nil {
		return resp, from, err
	}
	var more []string
	for _, a := range discover(ctx) {
		if a != "" && !slices.Contains(addrs, a) && !slices.Contains(more, a) {
			more = append(more, a)
		}
	}
	if len(more) == 0 {
		return nil, "", err
	}
	m.c.log.Debug("no known broker answered; asking discovered ones", "addrs", more)
	return m.fetch(ctx, more, req)
}

// fetch tries each address in turn until one answers, and returns the
// answer with the address that gave it.
func (m *metadata) fetch(ctx context.Context, addrs []string, req *brokerv1.MetadataRequest) (*brokerv1.MetadataResponse, string, error) {
	var last error
	for _, addr := range addrs {
		var resp *brokerv1.MetadataResponse
		err := m.c.brokerCall(ctx, addr, func(ctx context.Context, bc brokerv1.BrokerServiceClient) error {
			var err error
			resp, err = bc.Metadata(ctx, req)
			return err
		})
		if err == nil {
			return resp, addr, nil
		}
		last = err
		m.c.log.Debug("metadata request failed", "addr", addr, "err", err)
		if ctx.Err() != nil {
			return nil, "", ctxError(ctx, err, "metadata")
		}
	}
	if last == nil {
		last = kerr.New(kerr.NetworkException, "no broker address to ask")
	}
	if ke := toKerr(last); ke.Code == kerr.BrokerNotAvailable {
		// No broker would answer: each has fenced itself as leader (etcd is
		// out of reach) or is stopping. BROKER_NOT_AVAILABLE is final, as in
		// Kafka, but the cluster answers again once etcd does: retriable,
		// like a cluster no connection reaches.
		return nil, "", kerr.New(kerr.LeaderNotAvailable, "metadata from %d brokers: none would answer: %s", len(addrs), ke.Message)
	}
	return nil, "", wrap(last, "metadata from %d brokers", len(addrs))
}

// noBroker is answererLocked's id for an address no broker is known by.
const noBroker = -1

// answererLocked names the broker at addr, which gave resp, by its id: the
// answer lists the live brokers, the answering one among them, and the
// cache those an earlier answer listed. An address neither lists (one of
// the bootstrap addresses, which need not be a broker's own) is noBroker.
func (m *metadata) answererLocked(resp *brokerv1.MetadataResponse, addr string) int32 {
	for _, b := range resp.GetBrokers() {
		if b.GetAddress() == addr {
			return b.GetId()
		}
	}
	for id, a := range m.brokers {
		if a == addr {
			return id
		}
	}
	return noBroker
}

// applyLocked merges an answer from broker from (noBroker: not known) into
// the cache and returns the topics it refused. A partition entry is only
// replaced by one at least as new (by leader epoch), so a lagging broker
// cannot undo a newer hint.
func (m *metadata) applyLocked(resp *brokerv1.MetadataResponse, asked []string, from int32) (refused map[string]string) {
	now := time.Now()
	src := answerer{broker: from, alone: m.oneBrokerLocked(resp)}
	seen := map[string]bool{}
	for _, t := range resp.GetTopics() {
		name := t.GetName()
		seen[name] = true
		switch kerr.Code(t.GetErrorCode()) {
		case kerr.UnknownTopicOrPartition, kerr.InvalidTopicException:
			m.forgetLocked(name)
			continue
		case kerr.TopicAuthorizationFailed:
			m.forgetLocked(name)
			if refused == nil {
				refused = map[string]string{}
			}
			refused[name] = t.GetErrorMessage()
			continue
		}
		old := m.topics[name]
		if id := t.GetTopicId(); id != "" {
			if !m.takeTopicIDLocked(name, id, src) {
				continue // a lagging broker's view of an older topic: keep ours
			}
			if known := m.topicIDs[name]; known != "" && known != id {
				// Deleted and created again while this client was not
				// looking: the old partitions' leader epochs, however
				// high, say nothing of the new ones, which began at 0.
				old = nil
			}
			m.topicIDs[name] = id
		}
		m.topics[name] = mergeParts(old, t.GetPartitions())
		m.fetchedAt[name] = now
	}
	// A topic asked for (or any, when all were) but missing from the
	// answer no longer exists.
	for name := range m.topics {
		if !seen[name] && (asked == nil || slices.Contains(asked, name)) {
			m.forgetLocked(name)
		}
	}
	m.applyBrokersLocked(resp.GetBrokers())
	return refused
}

// maxIDHistory bounds idHistory per topic: a broker lagging behind more
// than a few creations of one topic is not expected.
const maxIDHistory = 4

// A client that first heard of a topic from a broker that knew the newer
// topic, and then from a lagging one, took the older id for the newer:
// every up-to-date answer then names the id it holds as replaced, and
// ignoring them all would keep it on the old topic for good. So a replaced
// id is taken back after all once replacedIDBrokersToTrust different
// brokers named it since an answer last named the id held: one broker
// whose metadata lags, however often it alone is asked (it may be the only
// one answering: the others refuse, or are out of reach), cannot send the
// client back to the old topic. In a cluster of one broker no second
// broker will ever answer; there replacedIDAnswersToTrust answers of the
// one broker naming the id take it, a broker that truly lags being seldom
// asked so many times before it catches up.
const (
	replacedIDBrokersToTrust = 2
	replacedIDAnswersToTrust = 3
)

// answerer is who gave a Metadata answer, as far as the client can tell.
type answerer struct {
	broker int32 // noBroker: an address no broker is known by
	alone  bool  // the cluster has no other broker (oneBrokerLocked)
}

// replacedIDNamers is who named one replaced id of a topic since an answer
// last named the id the cache holds.
type replacedIDNamers struct {
	id      string
	brokers []int32 // distinct, fewer than replacedIDBrokersToTrust
	answers int     // from any broker (what counts in a one-broker cluster)
}

// oneBrokerLocked reports whether resp comes from a cluster of one broker:
// it lists one (the live ones), or, listing none, the cache knew at most
// one, when no second broker can be told apart to confirm anything.
func (m *metadata) oneBrokerLocked(resp *brokerv1.MetadataResponse) bool {
	if n := len(resp.GetBrokers()); n > 0 {
		return n == 1
	}
	return len(m.brokers) <= 1
}

// takeTopicIDLocked records that src's answer names topic with id and
// reports whether the answer's view of topic is to be taken: not when id
// is one this client saw replaced by a newer one, which only a broker
// whose metadata lags still names (a topic deleted and created again has
// another id, and ids are never used again), unless enough brokers name
// it (replacedIDBrokersToTrust). The first id heard, and any id not heard
// before, is taken.
func (m *metadata) takeTopicIDLocked(topic, id string, src answerer) bool {
	h := m.idHistory[topic]
	i := slices.Index(h, id)
	if i >= 0 && i < len(h)-1 {
		if !m.trustReplacedIDLocked(topic, id, src) {
			return false
		}
		// Enough brokers name it: the id after it was the stale one.
		h = slices.Delete(h, i, i+1)
		i = -1
	}
	delete(m.replacedIDNames, topic)
	if i < 0 {
		if h == nil {
			m.trimIDHistoryLocked()
		}
		h = append(h, id)
		if len(h) > maxIDHistory {
			h = slices.Clone(h[len(h)-maxIDHistory:])
		}
		m.idHistory[topic] = h
	}
	return true
}

// trustReplacedIDLocked records that src named topic's replaced id and
// reports whether enough brokers have now named it to take it back.
func (m *metadata) trustReplacedIDLocked(topic, id string, src answerer) bool {
	names := m.replacedIDNames[topic]
	k := slices.IndexFunc(names, func(n replacedIDNamers) bool { return n.id == id })
	if k < 0 {
		// At most one entry per id of idHistory: bounded by maxIDHistory.
		names = append(names, replacedIDNamers{id: id})
		k = len(names) - 1
	}
	n := &names[k]
	n.answers++
	if src.broker != noBroker && !slices.Contains(n.brokers, src.broker) {
		n.brokers = append(n.brokers, src.broker)
	}
	if len(n.brokers) >= replacedIDBrokersToTrust || (src.alone && n.answers >= replacedIDAnswersToTrust) {
		return true
	}
	m.replacedIDNames[topic] = names
	return false
}

// maxIDHistoryTopics bounds how many topic names idHistory holds: a client
// that sees many short-lived topics must not keep each one's ids forever.
const maxIDHistoryTopics = 4096

// trimIDHistoryLocked makes room for one more name in idHistory, dropping
// one of a topic no longer cached when it is full.
func (m *metadata) trimIDHistoryLocked() {
	if len(m.idHistory) < maxIDHistoryTopics {
		return
	}
	for name := range m.idHistory {
		if _, cached := m.topics[name]; !cached {
			delete(m.idHistory, name)
			delete(m.replacedIDNames, name)
			return
		}
	}
}

// forgetLocked drops what the cache knows of topic, but for the ids it
// was given (idHistory): a broker lagging behind its deletion may still
// name one.
func (m *metadata) forgetLocked(topic string) {
	delete(m.topics, topic)
	delete(m.topicIDs, topic)
	delete(m.fetchedAt, topic)
}

// applyBrokersLocked makes the answer's brokers the known ones. A broker
// that left the cluster is dropped, so that refreshes stop trying its
// address first; one that still leads a cached partition (a hint newer
// than the answer named it) keeps its address until that changes. An
// answer that lists no broker says nothing.
func (m *metadata) applyBrokersLocked(nodes []*commonv1.Node) {
	if len(nodes) == 0 {
		return
	}
	live := make(map[int32]string, len(nodes))
	for _, b := range nodes {
		live[b.GetId()] = b.GetAddress()
	}
	for id, addr := range m.brokers {
		if _, ok := live[id]; !ok && m.leadsLocked(id) {
			live[id] = addr
		}
	}
	m.brokers = live
}

// leadsLocked reports whether broker id leads a cached partition.
func (m *metadata) leadsLocked(id int32) bool {
	for _, parts := range m.topics {
		for _, p := range parts {
			if p.leader == id {
				return true
			}
		}
	}
	return false
}

func mergeParts(old []partMeta, fresh []*brokerv1.PartitionMetadata) []partMeta {
	n := 0
	for _, p := range fresh {
		n = max(n, int(p.GetPartition())+1)
	}
	out := make([]partMeta, n)
	for i := range out {
		out[i] = partMeta{leader: -1, leaderEpoch: -1}
	}
	for _, p := range fresh {
		np := partMeta{leader: p.GetLeader(), leaderEpoch: p.GetLeaderEpoch(), replicas: p.GetReplicas()}
		if kerr.Code(p.GetErrorCode()) == kerr.LeaderNotAvailable {
			np.leader = -1
		}
		i := p.GetPartition()
		if int(i) < len(old) && old[i].leaderEpoch > np.leaderEpoch {
			np = old[i] // our hint is newer than this broker's view
		}
		out[i] = np
	}
	return out
}
