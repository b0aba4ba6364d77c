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

// addBroker starts tracking a live broker incarnation with its own sender.
func (a *Active) addBroker(info metastore.Broker) *broker {
	b := &broker{info: info}
	conn, err := a.d.Dial(info.Address)
	if err != nil {
		// A malformed address: requests fail, the broker will be seen as
		// dead at lease expiry or fast failover.
		a.log.Error("cannot dial broker", "broker_id", info.ID, "address", info.Address, "err", err)
	}
	b.conn = conn
	var client controlv1.BrokerControlServiceClient = brokenClient{}
	if conn != nil {
		client = controlv1.NewBrokerControlServiceClient(conn)
	}
	b.out = sender.Start(sender.Options{
		Client:  client,
		Target:  sender.Target{ID: info.ID, Epoch: info.Epoch, Address: info.Address},
		Timeout: a.d.Settings.RequestTimeout,
		OnStale: func(err error) {
			a.post(func() { a.stepDown(errors.Join(errStaleEpoch, err)) })
		},
		Gate:   a.gate.wait,
		Logger: a.log,
	})
	a.brokers[info.ID] = b
	a.seen[info.ID] = info.BrokerInfo
	a.stateDirty = true
	return b
}

// errStaleEpoch ends a term when a broker has seen a newer controller (F22).
var errStaleEpoch = errors.New("a broker answered STALE_CONTROLLER_EPOCH: a newer controller is active")

// removeBroker stops tracking a broker incarnation and drops its queue.
func (a *Active) removeBroker(b *broker) {
	delete(a.brokers, b.info.ID)
	a.departedEpoch[b.info.ID] = b.info.Epoch
	b.out.Stop()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		b.out.Wait()
		if b.conn != nil {
			_ = b.conn.Close()
		}
	}()
	// A newer incarnation's session may already have reported (its full
	// report comes only once): its progress is not this incarnation's.
	if s := a.sessions[b.info.ID]; s == nil || s.epoch <= b.info.Epoch {
		for k := range a.progress {
			if k.broker == b.info.ID {
				delete(a.progress, k)
			}
		}
	}
	a.stateDirty = true
}

// enqueue hands r to broker id's sender; the returned channel gets the
// outcome (closed-over errors for unknown brokers).
func (a *Active) enqueue(id int32, r sender.Request) <-chan error {
	ch := make(chan error, 1)
	r.Done = ch
	b := a.brokers[id]
	if b == nil {
		ch <- sender.ErrStopped
		return ch
	}
	b.out.Enqueue(r)
	return ch
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
// endpoints and the topics' effective configs. It returns the outcome
// channels by broker id.
func (a *Active) pushLeaderAndIsr(parts []*partition, to func(int32) bool) map[int32]<-chan error {
	byBroker := map[int32][]*partition{}
	for _, p := range parts {
		if !p.hasState() {
			continue
		}
		for _, r := range p.replicas {
			if a.registered(r) && (to == nil || to(r)) {
				byBroker[r] = append(byBroker[r], p)
			}
		}
	}
	acks := map[int32]<-chan error{}
	for _, id := range slices.Sorted(maps.Keys(byBroker)) {
		acks[id] = a.enqueue(id, sender.Request{LeaderAndIsr: a.leaderAndIsr(id, byBroker[id])})
	}
	return acks
}

func (a *Active) leaderAndIsr(id int32, parts []*partition) *controlv1.LeaderAndIsrRequest {
	req := &controlv1.LeaderAndIsrRequest{
		ControllerId:    a.self.Id,
		ControllerEpoch: a.epoch,
		BrokerEpoch:     a.brokers[id].info.Epoch,
	}
	leaders := map[int32]bool{}
	topics := map[string]*topic{}
	for _, p := range parts {
		req.Partitions = append(req.Partitions, a.protoState(p))
		if l := p.rec.State.Leader; l >= 0 && a.registered(l) && !leaders[l] {
			leaders[l] = true
			req.Leaders = append(req.Leaders, a.node(l))
		}
		topics[p.t.name] = p.t
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		req.TopicConfigs = append(req.TopicConfigs,
			&controlv1.TopicConfig{Topic: name, Configs: a.topicConfigMap(topics[name], id), TopicId: topics[name].id})
	}
	return req
}

// pushUpdateMetadata sends every live broker admitted by to (nil: all) an
// UpdateMetadata. full replaces the broker's view with the whole cluster;
// otherwise parts and deleted are a delta. The live broker list, the
// controller, the dynamic broker configs and the cluster id always travel.
func (a *Active) pushUpdateMetadata(parts []*partition, deleted []string, full bool, to func(int32) bool) map[int32]<-chan error {
	if full {
		parts = a.allPartitions()
	}
	acks := map[int32]<-chan error{}
	for _, id := range a.sortedBrokerIDs() {
		if to != nil && !to(id) {
			continue
		}
		acks[id] = a.enqueue(id, sender.Request{UpdateMetadata: a.updateMetadata(id, parts, deleted, full)})
	}
	return acks
}

func (a *Active) updateMetadata(id int32, parts []*partition, deleted []string, full bool) *controlv1.UpdateMetadataRequest {
	req := &controlv1.UpdateMetadataRequest{
		ControllerId:    a.self.Id,
		ControllerEpoch: a.epoch,
		BrokerEpoch:     a.brokers[id].info.Epoch,
		Controller:      a.self,
		Full:            full,
		DeletedTopics:   deleted,
		BrokerConfigs:   a.brokerConfigsFor(id),
		ClusterId:       a.clusterID,
	}
	for _, bid := range a.sortedBrokerIDs() {
		b := a.brokers[bid]
		req.Brokers = append(req.Brokers, &controlv1.BrokerRegistration{Node: a.node(bid), BrokerEpoch: b.info.Epoch,
			ShuttingDown: b.shuttingDown, Endpoints: b.info.Endpoints})
	}
	topics := map[string]*topic{}
	for _, p := range parts {
		if p.hasState() {
			req.Partitions = append(req.Partitions, a.protoState(p))
			topics[p.t.name] = p.t
		}
	}
	if full {
		for name, t := range a.topics {
			topics[name] = t
		}
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		req.TopicConfigs = append(req.TopicConfigs,
			&controlv1.TopicConfig{Topic: name, Configs: a.topicConfigMap(topics[name], id), TopicId: topics[name].id})
	}
	return req
}

// pushStopReplica asks broker id to stop the given partitions, deleting
// their data when del is set (topic deletion) or keeping it (a follower in
// controlled shutdown).
func (a *Active) pushStopReplica(id int32, parts []*partition, del bool) <-chan error {
	b := a.brokers[id]
	if b == nil || len(parts) == 0 {
		ch := make(chan error, 1)
		ch <- nil
		return ch
	}
	req := &controlv1.StopReplicaRequest{ControllerId: a.self.Id, ControllerEpoch: a.epoch, BrokerEpoch: b.info.Epoch}
	for _, p := range parts {
		epoch := p.rec.State.LeaderEpoch
		if del {
			epoch = -1 // whatever the broker has: the topic is going
		}
		req.Partitions = append(req.Partitions, &controlv1.StopReplicaPartition{
			Topic: p.t.name, Partition: p.id, LeaderEpoch: epoch, Delete: del})
	}
	return a.enqueue(id, sender.Request{StopReplica: req})
}

// pushChanges is the usual push after partition states changed: LeaderAndIsr
// to their live replicas, then UpdateMetadata to every live broker (Kafka's
// ControllerBrokerRequestBatch order).
func (a *Active) pushChanges(parts []*partition) {
	if len(parts) == 0 {
		return
	}
	a.pushLeaderAndIsr(parts, nil)
	a.pushUpdateMetadata(parts, nil, false, nil)
}

// brokenClient stands in for a broker whose address could not be dialled:
// every request fails without being retried.
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
