package broker

import (
	"context"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/group"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// groupHost is the group coordinator's view of its broker: the metadata
// cache, the replica manager (the same produce path as client writes, at
// acks=all) and the active controller.
type groupHost struct{ b *Broker }

var _ group.Host = groupHost{}

// groupCommitTimeout bounds one write of __consumer_offsets when the
// caller set no deadline (Kafka's offsets.commit.timeout.ms).
const groupCommitTimeout = 5 * time.Second

func (h groupHost) BrokerID() int32 { return h.b.cfg.ID }

func (h groupHost) Self() group.Node { return group.Node{ID: h.b.cfg.ID, Address: h.b.Advertised()} }

func (h groupHost) Config() topicconfig.BrokerConfig { return h.b.rm.BrokerConfig() }

func (h groupHost) PartitionCount(topic string) int32 {
	return int32(len(h.b.meta.TopicPartitions(topic)))
}

func (h groupHost) TopicID(topic string) (string, bool) {
	if !h.b.meta.Initialised() {
		return "", false
	}
	return h.b.meta.TopicID(topic), true
}

func (h groupHost) PartitionLeader(tp group.TP) (group.Node, bool) {
	ps, ok := h.b.meta.Partition(metadata.TP{Topic: tp.Topic, Partition: tp.Partition})
	if !ok || ps.GetLeader() < 0 {
		return group.Node{}, false
	}
	br, ok := h.b.meta.Broker(ps.GetLeader())
	if !ok {
		return group.Node{}, false
	}
	return group.Node{ID: br.ID, Address: br.Address}, true
}

func (h groupHost) CreateOffsetsTopic(ctx context.Context) error {
	ctrl := h.b.meta.Controller()
	if ctrl == nil || ctrl.GetAddress() == "" {
		return kerr.New(kerr.NotController, "no active controller known to create %s", group.OffsetsTopic)
	}
	conn, err := h.b.peers.Controller(ctrl.GetAddress())
	if err != nil {
		return err
	}
	_, err = controlv1.NewControllerServiceClient(conn).CreateOffsetsTopic(ctx,
		&controlv1.CreateOffsetsTopicRequest{BrokerId: h.b.cfg.ID, BrokerEpoch: h.b.epoch.Load()})
	if err != nil {
		return kerr.FromStatus(err)
	}
	return nil
}

func (h groupHost) replica(tp group.TP) (*replica.Replica, bool) {
	return h.b.rm.Replica(replica.TP{Topic: tp.Topic, Partition: tp.Partition})
}

func (h groupHost) Leads(tp group.TP) (int32, bool) {
	r, ok := h.replica(tp)
	if !ok {
		return 0, false
	}
	return h.b.rm.LeadingSince(r)
}

func (h groupHost) LocalOffsets(tp group.TP) (group.PartitionOffsets, bool) {
	r, ok := h.replica(tp)
	if !ok {
		return group.PartitionOffsets{}, false
	}
	s := r.Snapshot(time.Now())
	return group.PartitionOffsets{LogStart: s.LogStartOffset, HighWatermark: s.HighWatermark, LogEnd: s.LogEndOffset}, true
}

func (h groupHost) Read(tp group.TP, offset, upTo int64) ([]byte, int64, error) {
	r, ok := h.replica(tp)
	if !ok {
		return nil, 0, kerr.New(kerr.NotLeaderOrFollower, "%s-%d is not hosted", tp.Topic, tp.Partition)
	}
	rr, err := r.Log().Read(offset, 1<<20, upTo)
	if err != nil {
		return nil, 0, err
	}
	return rr.Records, rr.NextOffset, nil
}

func (h groupHost) Append(ctx context.Context, tp group.TP, since int32, batch []byte) (int64, error) {
	timeout := groupCommitTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	res, err := h.b.rm.ProduceSince(ctx, replica.TP{Topic: tp.Topic, Partition: tp.Partition}, since, batch, timeout)
	if err != nil {
		return 0, err
	}
	return res.LastOffset, nil
}

func (h groupHost) ListOffsets(ctx context.Context, tp group.TP, spec group.OffsetSpec, ts int64) (int64, error) {
	rtp := replica.TP{Topic: tp.Topic, Partition: tp.Partition}
	if r, ok := h.b.rm.Replica(rtp); ok && r.IsLeader() {
		off, _, _, err := h.b.rm.ListOffsets(rtp, replica.OffsetSpec(spec), ts, -1, replica.ConsumerReplicaID)
		return off, err
	}
	leader, ok := h.PartitionLeader(tp)
	if !ok {
		return 0, kerr.New(kerr.LeaderNotAvailable, "%s-%d has no leader", tp.Topic, tp.Partition)
	}
	conn, err := h.b.peers.Conn(leader.Address)
	if err != nil {
		return 0, err
	}
	specs := map[group.OffsetSpec]brokerv1.OffsetSpec{group.Earliest: brokerv1.OffsetSpec_OFFSET_SPEC_EARLIEST,
		group.Latest: brokerv1.OffsetSpec_OFFSET_SPEC_LATEST, group.AtTimestamp: brokerv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP}
	resp, err := brokerv1.NewBrokerServiceClient(conn).ListOffsets(ctx, &brokerv1.ListOffsetsRequest{Topic: tp.Topic, Partition: tp.Partition, Spec: specs[spec], Timestamp: ts})
	if err != nil {
		return 0, kerr.FromStatus(err)
	}
	return resp.GetOffset(), nil
}
