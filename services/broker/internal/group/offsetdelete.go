package group

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// OffsetDelete deletes a group's committed offsets of some partitions
// (Kafka's OffsetDelete, kafka-consumer-groups --delete-offsets): any of
// them while the group is Empty; while it has members, only those of
// topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the
// rest), so a consumer never loses the position it resumes from.
func (s *Service) OffsetDelete(ctx context.Context, req *groupv1.OffsetDeleteRequest) (*groupv1.OffsetDeleteResponse, error) {
	c := s.C
	for i, t := range req.GetTopics() {
		if t.GetName() == "" {
			return nil, kerr.BadField(kerr.InvalidTopicException, "topics["+strconv.Itoa(i)+"].name", "must not be empty")
		}
	}
	gid := req.GetGroupId()
	sh, err := c.lockShard(gid)
	if err != nil {
		return nil, err
	}
	g, offs := sh.groups[gid], sh.offsets[gid]
	if (g == nil || g.State == Dead) && len(offs) == 0 {
		c.mu.Unlock()
		return nil, kerr.New(kerr.GroupIDNotFound, "group %q does not exist", gid)
	}
	var subscribed func(topic string) bool
	if g != nil && g.Size() > 0 {
		if subscribed, err = g.subscriptions(); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	out := &groupv1.OffsetDeleteResponse{}
	var b recordbatch.Builder
	var drops []groupTP
	now := c.now()
	for _, t := range req.GetTopics() {
		tr := &groupv1.OffsetDeleteTopicResult{Name: t.GetName()}
		out.Topics = append(out.Topics, tr)
		for _, p := range t.GetPartitions() {
			pr := &groupv1.OffsetDeletePartitionResult{Partition: p}
			tr.Partitions = append(tr.Partitions, pr)
			tp := TP{t.GetName(), p}
			switch {
			case p < 0 || !c.knownPartition(tp.Topic, p):
				pr.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			case subscribed != nil && subscribed(tp.Topic):
				pr.ErrorCode = commonv1.ErrorCode_ERROR_CODE_GROUP_SUBSCRIBED_TO_TOPIC
			case sh.inflight[gid][tp] > 0:
				// A commit being written would land after the tombstone
				// and bring the offset back.
				pr.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNSTABLE_OFFSET_COMMIT
			default:
				if _, ok := offs[tp]; ok {
					delete(offs, tp)
					b.Append(recordbatch.Record{Timestamp: now.UnixMilli(), Key: OffsetKey(gid, tp.Topic, tp.Partition)})
					drops = append(drops, groupTP{gid, tp})
				}
			}
		}
	}
	if len(offs) == 0 {
		delete(sh.offsets, gid)
	}
	if b.Count() == 0 {
		c.mu.Unlock()
		return out, nil
	}
	// Behind the group's earlier records in its shard's writer, so an
	// earlier commit cannot land after its tombstone.
	done := c.writeLocked(sh, clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)), drops...)
	c.mu.Unlock()
	select {
	case werr := <-done:
		if werr != nil {
			return nil, commitError(werr)
		}
	case <-ctx.Done():
		return nil, kerr.New(kerr.RequestTimedOut, "deleting offsets of group %q: %v", gid, ctx.Err())
	}
	return out, nil
}

// subscriptions reports, for a consumer group with members, whether any
// member subscribes to a topic, reading the consumer protocol's
// subscriptions. A group whose subscriptions cannot be read (another
// protocol type, no protocol chosen yet, metadata that does not decode)
// counts as subscribed to everything: deleting an offset a member resumes
// from cannot be undone.
func (g *Group) subscriptions() (func(topic string) bool, error) {
	all := func(string) bool { return true }
	switch {
	case g.ProtocolType != "consumer":
		return nil, kerr.New(kerr.NonEmptyGroup, "group %q has members and protocol type %q", g.ID, g.ProtocolType)
	case g.Protocol == "":
		return all, nil
	}
	var topics []string
	for _, m := range g.members {
		md, ok := m.metadataFor(g.Protocol)
		if !ok {
			return all, nil
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(md); err != nil {
			return all, nil
		}
		topics = append(topics, sub.Topics...)
	}
	return func(topic string) bool { return slices.Contains(topics, topic) }, nil
}

// subscribedTopics reads the topics the members subscribe to from their
// consumer-protocol metadata in the chosen protocol; nil when the group
// is not a consumer group or a member's metadata cannot be read (then no
// topic counts as unsubscribed).
func (g *Group) subscribedTopics() map[string]bool {
	if g.ProtocolType != ConsumerProtocolType || g.Protocol == "" {
		return nil
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		md, ok := m.metadataFor(g.Protocol)
		if !ok {
			return nil
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(md); err != nil {
			return nil
		}
		for _, t := range sub.Topics {
			topics[t] = true
		}
	}
	return topics
}
