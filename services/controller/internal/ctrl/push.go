package ctrl

import (
	"context"
	"errors"
	"maps"
	"slices"

	"google.golang.org/grpc"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/sender"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// addBroker starts tracking a live broker incarnation; the shell starts
// its sender.
func (c *core) addBroker(info metastore.Broker) {
	c.brokers[info.ID] = &broker{info: info}
	c.seen[info.ID] = info.BrokerInfo
	c.stateDirty = true
	c.emit(effBrokerUp{info: info})
	c.cancelFailCheck(info.ID)
}

// errStaleEpoch ends a term when a broker has seen a newer controller (F22).
var errStaleEpoch = errors.New("a broker answered STALE_CONTROLLER_EPOCH: a newer controller is active")

// removeBroker stops tracking a broker incarnation and drops its reported
// progress; the shell drops its queue.
func (c *core) removeBroker(b *broker) {
	delete(c.brokers, b.info.ID)
	c.departedEpoch[b.info.ID] = b.info.Epoch
	c.stateDirty = true
	c.emit(effBrokerGone{info: b.info})
	// A newer incarnation's session may already have reported (its full
	// report comes only once): its progress is not this incarnation's.
	if s := c.sessions[b.info.ID]; s == nil || s.epoch <= b.info.Epoch {
		for k := range c.progress {
			if k.broker == b.info.ID {
				delete(c.progress, k)
			}
		}
	}
	c.cancelFailCheck(b.info.ID)
}

// only returns a broker filter that admits ids.
func only(ids ...int32) func(int32) bool {
	return func(id int32) bool { return slices.Contains(ids, id) }
}

// except returns a broker filter that admits everyone but ids.
func except(ids ...int32) func(int32) bool {
	return func(id int32) bool { return !slices.Contains(ids, id) }
}

// pushLeaderAndIsr sends each live replica broker of parts (admitted by to,
// nil for all) one LeaderAndIsr with its partitions' states, the leaders'
// endpoints and the topics' effective configs.
func (c *core) pushLeaderAndIsr(parts []*partition, to func(int32) bool) {
	c.pushLeaderAndIsrTo(parts, to)
}

// pushLeaderAndIsrTracked is pushLeaderAndIsr to every live replica with
// the outcomes kept for the answer (effPush.track); it returns the brokers
// sent to.
func (c *core) pushLeaderAndIsrTracked(parts []*partition) map[int32]bool {
	c.tracking = true
	defer func() { c.tracking = false }()
	return c.pushLeaderAndIsrTo(parts, nil)
}

// pushLeaderAndIsrAwaited is pushLeaderAndIsr to every live replica with
// the requests to the partitions' leaders put in a new ack group, which it
// returns: the shell hands the group's outcomes to a caller that waits for
// the leaders (CreateTopics, CreatePartitions, CreateOffsetsTopic).
func (c *core) pushLeaderAndIsrAwaited(parts []*partition) uint64 {
	leaders := map[int32]bool{}
	for _, p := range parts {
		leaders[p.rec.State.Leader] = true
	}
	c.ackGroup++
	group := c.ackGroup
	c.grouping, c.groupOnly = group, leaders
	defer func() { c.grouping, c.groupOnly = 0, nil }()
	c.pushLeaderAndIsrTo(parts, nil)
	return group
}

func (c *core) pushLeaderAndIsrTo(parts []*partition, to func(int32) bool) map[int32]bool {
	byBroker := map[int32][]*partition{}
	for _, p := range parts {
		if !p.hasState() {
			continue
		}
		for _, r := range p.replicas {
			if c.registered(r) && (to == nil || to(r)) {
				byBroker[r] = append(byBroker[r], p)
			}
		}
	}
	sent := map[int32]bool{}
	for _, id := range slices.Sorted(maps.Keys(byBroker)) {
		c.emitLeaderAndIsr(id, c.leaderAndIsr(id, byBroker[id]))
		sent[id] = true
	}
	return sent
}

// pushRoles sends broker id one LeaderAndIsr with every replica it hosts,
// marked full (Kafka's LeaderAndIsr type FULL): the push that tells a new
// incarnation, or every broker at a term's start, all of its roles. Only a
// full push lifts the fence of a broker that registered again while still
// leading partitions of its previous incarnation; an incremental one that
// reaches it first names a few partitions and leaves the others' roles
// stale. A broker that hosts nothing is sent nothing: it leads nothing, so
// its fence has no roles to wait for.
func (c *core) pushRoles(id int32) {
	if !c.registered(id) {
		return
	}
	var parts []*partition
	for _, p := range c.partitionsOf(id) {
		if p.hasState() {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return
	}
	req := c.leaderAndIsr(id, parts)
	req.Full = true
	c.emitLeaderAndIsr(id, req)
}

func (c *core) emitLeaderAndIsr(id int32, req *controlv1.LeaderAndIsrRequest) {
	group := c.grouping
	if c.groupOnly != nil && !c.groupOnly[id] {
		group = 0
	}
	c.emit(effPush{to: id, req: sender.Request{LeaderAndIsr: req}, track: c.tracking, group: group})
}

func (c *core) leaderAndIsr(id int32, parts []*partition) *controlv1.LeaderAndIsrRequest {
	req := &controlv1.LeaderAndIsrRequest{
		ControllerId:    c.self.Id,
		ControllerEpoch: c.epoch,
		BrokerEpoch:     c.brokers[id].info.Epoch,
	}
	leaders := map[int32]bool{}
	topics := map[string]*topic{}
	for _, p := range parts {
		req.Partitions = append(req.Partitions, c.protoState(p))
		if l := p.rec.State.Leader; l >= 0 && c.registered(l) && !leaders[l] {
			leaders[l] = true
			req.Leaders = append(req.Leaders, c.node(l))
		}
		topics[p.t.name] = p.t
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		req.TopicConfigs = append(req.TopicConfigs,
			&controlv1.TopicConfig{Topic: name, Configs: c.topicConfigs(topics[name], id), TopicId: topics[name].id})
	}
	return req
}

// pushUpdateMetadata sends every live broker admitted by to (nil: all) an
// UpdateMetadata. full replaces the broker's view with the whole cluster;
// otherwise parts and deleted are a delta. The live broker list, the
// controller, the dynamic broker configs and the cluster id always travel.
func (c *core) pushUpdateMetadata(parts []*partition, deleted []string, full bool, to func(int32) bool) {
	if full {
		parts = c.allPartitions()
	}
	for _, id := range c.sortedBrokerIDs() {
		if to != nil && !to(id) {
			continue
		}
		c.emit(effPush{to: id, req: sender.Request{UpdateMetadata: c.updateMetadata(id, parts, deleted, full)}, track: c.tracking})
	}
}

func (c *core) updateMetadata(id int32, parts []*partition, deleted []string, full bool) *controlv1.UpdateMetadataRequest {
	req := &controlv1.UpdateMetadataRequest{
		ControllerId:    c.self.Id,
		ControllerEpoch: c.epoch,
		BrokerEpoch:     c.brokers[id].info.Epoch,
		Controller:      c.self,
		Full:            full,
		DeletedTopics:   deleted,
		BrokerConfigs:   c.brokerConfigsOf(id),
		ClusterId:       c.clusterID,
	}
	for _, bid := range c.sortedBrokerIDs() {
		b := c.brokers[bid]
		req.Brokers = append(req.Brokers, &controlv1.BrokerRegistration{Node: c.node(bid), BrokerEpoch: b.info.Epoch,
			ShuttingDown: b.shuttingDown, Endpoints: b.info.Endpoints})
	}
	topics := map[string]*topic{}
	for _, p := range parts {
		if p.hasState() {
			req.Partitions = append(req.Partitions, c.protoState(p))
			topics[p.t.name] = p.t
		}
	}
	if full {
		for name, t := range c.topics {
			topics[name] = t
		}
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		req.TopicConfigs = append(req.TopicConfigs,
			&controlv1.TopicConfig{Topic: name, Configs: c.topicConfigs(topics[name], id), TopicId: topics[name].id})
	}
	return req
}

// pushStopReplica asks broker id to stop the given partitions, deleting
// their data when del is set (topic deletion) or keeping it (a follower in
// controlled shutdown).
func (c *core) pushStopReplica(id int32, parts []*partition, del bool) {
	b := c.brokers[id]
	if b == nil || len(parts) == 0 {
		return
	}
	req := &controlv1.StopReplicaRequest{ControllerId: c.self.Id, ControllerEpoch: c.epoch, BrokerEpoch: b.info.Epoch}
	for _, p := range parts {
		epoch := p.rec.State.LeaderEpoch
		if del {
			epoch = -1 // whatever the broker has: the topic is going
		}
		req.Partitions = append(req.Partitions, &controlv1.StopReplicaPartition{
			Topic: p.t.name, Partition: p.id, LeaderEpoch: epoch, Delete: del})
	}
	c.emit(effPush{to: id, req: sender.Request{StopReplica: req}, track: c.tracking, group: c.grouping})
}

// pushChanges is the usual push after partition states changed: LeaderAndIsr
// to their live replicas, then UpdateMetadata to every live broker (Kafka's
// ControllerBrokerRequestBatch order).
func (c *core) pushChanges(parts []*partition) {
	if len(parts) == 0 {
		return
	}
	c.pushLeaderAndIsr(parts, nil)
	c.pushUpdateMetadata(parts, nil, false, nil)
}

// topicConfigs is a topic's effective configuration for one broker.
func (c *core) topicConfigs(t *topic, id int32) map[string]string {
	if c.pol.topicConfigs == nil {
		return map[string]string{}
	}
	return c.pol.topicConfigs(t, id)
}

// brokerConfigsOf is the dynamic broker configuration for one broker.
func (c *core) brokerConfigsOf(id int32) map[string]string {
	if c.pol.brokerConfigs == nil {
		return map[string]string{}
	}
	return c.pol.brokerConfigs(id)
}

// brokenClient stands in for a broker whose address could not be dialled
// (only a malformed one cannot): every request fails with
// BROKER_NOT_AVAILABLE, which the sender retries with its backoff until the
// incarnation departs, as it does for a broker it cannot reach.
type brokenClient struct{}

func (brokenClient) err() error {
	return kerr.New(kerr.BrokerNotAvailable, "broker address could not be dialled")
}

func (c brokenClient) LeaderAndIsr(context.Context, *controlv1.LeaderAndIsrRequest, ...grpc.CallOption) (*controlv1.LeaderAndIsrResponse, error) {
	return nil, c.err()
}

func (c brokenClient) UpdateMetadata(context.Context, *controlv1.UpdateMetadataRequest, ...grpc.CallOption) (*controlv1.UpdateMetadataResponse, error) {
	return nil, c.err()
}

func (c brokenClient) StopReplica(context.Context, *controlv1.StopReplicaRequest, ...grpc.CallOption) (*controlv1.StopReplicaResponse, error) {
	return nil, c.err()
}

func (c brokenClient) YieldLeadership(context.Context, *controlv1.YieldLeadershipRequest, ...grpc.CallOption) (*controlv1.YieldLeadershipResponse, error) {
	return nil, c.err()
}
