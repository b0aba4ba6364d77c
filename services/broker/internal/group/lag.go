package group

import (
	"context"
	"encoding/binary"
	"sort"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
)

// ConsumerProtocolType is the protocol type of Kafka consumers; their
// assignments use Kafka's ConsumerProtocolAssignment encoding, which the
// lag view decodes to name each partition's owner.
const ConsumerProtocolType = "consumer"

// DecodeConsumerAssignment reads the partitions of a
// ConsumerProtocolAssignment (any version: int16 version, then
// [string topic, [int32 partition]], then user data, ignored).
func DecodeConsumerAssignment(b []byte) ([]TP, bool) {
	r := reader{b: b}
	if r.i16() < 0 {
		return nil, false
	}
	n := r.i32()
	if n < 0 || int(n) > len(b) {
		return nil, false
	}
	var out []TP
	for i := int32(0); i < n && r.err == nil; i++ {
		topic := r.str()
		m := r.i32()
		if m < 0 || int(m) > len(b) {
			return nil, false
		}
		for j := int32(0); j < m && r.err == nil; j++ {
			out = append(out, TP{topic, r.i32()})
		}
	}
	return out, r.err == nil
}

// EncodeConsumerAssignment writes a version 0 ConsumerProtocolAssignment
// (for tests and tools that act as a consumer).
func EncodeConsumerAssignment(tps []TP) []byte {
	byTopic := map[string][]int32{}
	var topics []string
	for _, tp := range tps {
		if _, ok := byTopic[tp.Topic]; !ok {
			topics = append(topics, tp.Topic)
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	sort.Strings(topics)
	var w writer
	w.i16(0)
	w.i32(int32(len(topics)))
	for _, t := range topics {
		w.str(t)
		w.i32(int32(len(byTopic[t])))
		for _, p := range byTopic[t] {
			w.b = binary.BigEndian.AppendUint32(w.b, uint32(p))
		}
	}
	w.i32(-1) // null user data
	return w.b
}

type owner struct {
	member, instance, client, host string
}

// DescribeGroupLag is kafka-consumer-groups --describe: per partition the
// committed offset, the leader's high watermark and log end, the lag and
// the owning member.
func (s *Service) DescribeGroupLag(ctx context.Context, req *groupv1.DescribeGroupLagRequest) (*groupv1.DescribeGroupLagResponse, error) {
	c := s.C
	sh, err := c.lockShard(req.GetGroupId())
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, t := range req.GetTopics() {
		want[t] = true
	}
	keep := func(topic string) bool { return len(want) == 0 || want[topic] }
	out := &groupv1.DescribeGroupLagResponse{GroupId: req.GetGroupId(), GroupState: Dead.String()}
	rows := map[TP]*groupv1.PartitionLag{}
	owners := map[TP]owner{}
	if g := sh.groups[req.GetGroupId()]; g != nil {
		out.GroupState = g.State.String()
		if g.ProtocolType == ConsumerProtocolType {
			for _, m := range g.Members() {
				tps, _ := DecodeConsumerAssignment(m.Assignment)
				for _, tp := range tps {
					owners[tp] = owner{m.ID, m.InstanceID, m.ClientID, m.ClientHost}
				}
			}
		}
	}
	offs := sh.offsets[req.GetGroupId()]
	if len(offs) > 0 && out.GroupState == Dead.String() {
		out.GroupState = Empty.String()
	}
	for tp, o := range offs {
		if keep(tp.Topic) {
			rows[tp] = &groupv1.PartitionLag{Topic: tp.Topic, Partition: tp.Partition, CommittedOffset: o.Offset}
		}
	}
	for tp := range owners {
		if _, ok := rows[tp]; !ok && keep(tp.Topic) {
			rows[tp] = &groupv1.PartitionLag{Topic: tp.Topic, Partition: tp.Partition, CommittedOffset: -1}
		}
	}
	c.mu.Unlock()

	for _, tp := range sortedTPs(rows) {
		r := rows[tp]
		o := owners[tp]
		r.MemberId, r.GroupInstanceId, r.ClientId, r.ClientHost = o.member, o.instance, o.client, o.host
		r.HighWatermark, r.LogEndOffset, r.Lag = -1, -1, -1
		hw, err := c.host.ListOffsets(ctx, tp, Latest, 0)
		if err != nil {
			r.ErrorCode = commonv1.ErrorCode(kerr.CodeOf(err))
		} else {
			r.HighWatermark = hw
			if r.CommittedOffset >= 0 {
				r.Lag = max(hw-r.CommittedOffset, 0)
			}
		}
		if lo, ok := c.host.LocalOffsets(tp); ok {
			if _, leads := c.host.Leads(tp); leads {
				r.LogEndOffset = lo.LogEnd
			}
		}
		out.Partitions = append(out.Partitions, r)
	}
	return out, nil
}

// ResetGroupOffsets moves a group's committed offsets, like
// kafka-consumer-groups --reset-offsets --execute: only while the group
// has no members.
func (s *Service) ResetGroupOffsets(ctx context.Context, req *groupv1.ResetGroupOffsetsRequest) (*groupv1.ResetGroupOffsetsResponse, error) {
	c := s.C
	spec := req.GetSpec()
	if spec == groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_UNSPECIFIED {
		return nil, kerr.BadField(kerr.InvalidRequest, "spec", "choose EARLIEST, LATEST, OFFSET, TIMESTAMP or SHIFT_BY")
	}
	sh, err := c.lockShard(req.GetGroupId())
	if err != nil {
		return nil, err
	}
	if g := sh.groups[req.GetGroupId()]; g != nil && g.Size() > 0 {
		c.mu.Unlock()
		return nil, kerr.New(kerr.NonEmptyGroup, "group %q has %d members: stop them before resetting its offsets", req.GetGroupId(), g.Size())
	}
	current := map[TP]int64{}
	for tp, o := range sh.offsets[req.GetGroupId()] {
		current[tp] = o.Offset
	}
	c.mu.Unlock()

	var tps []TP
	if len(req.GetTopics()) == 0 {
		for tp := range current {
			tps = append(tps, tp)
		}
	}
	for _, t := range req.GetTopics() {
		parts := t.GetPartitions()
		if len(parts) == 0 {
			n := c.host.PartitionCount(t.GetName())
			if n == 0 {
				return nil, kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.GetName())
			}
			for p := int32(0); p < n; p++ {
				parts = append(parts, p)
			}
		}
		for _, p := range parts {
			tps = append(tps, TP{t.GetName(), p})
		}
	}
	sortTPs(tps)
	out := &groupv1.ResetGroupOffsetsResponse{}
	var entries []commitEntry
	now := c.now()
	for _, tp := range tps {
		r := &groupv1.ResetPartitionResult{Topic: tp.Topic, Partition: tp.Partition, PreviousOffset: -1, NewOffset: -1}
		if cur, ok := current[tp]; ok {
			r.PreviousOffset = cur
		}
		out.Partitions = append(out.Partitions, r)
		if tp.Partition < 0 || !c.knownPartition(tp.Topic, tp.Partition) {
			// Named, not there: a typo, not a missing leader.
			r.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			continue
		}
		target, err := c.resetTarget(ctx, tp, req, r.PreviousOffset)
		if err != nil {
			r.ErrorCode = commonv1.ErrorCode(kerr.CodeOf(err))
			continue
		}
		r.NewOffset = target
		id, _ := c.host.TopicID(tp.Topic)
		entries = append(entries, commitEntry{tp: tp, v: OffsetValue{Offset: target, LeaderEpoch: -1, CommitTimestamp: now.UnixMilli()}, topicID: id})
	}
	if req.GetDryRun() || len(entries) == 0 {
		return out, nil
	}
	if err := c.commit(ctx, req.GetGroupId(), "", "", -1, entries); err != nil {
		if kerr.CodeOf(err) == kerr.UnknownMemberID {
			return nil, kerr.New(kerr.NonEmptyGroup, "group %q gained members: stop them before resetting its offsets", req.GetGroupId())
		}
		return nil, err
	}
	return out, nil
}

func (c *Coordinator) resetTarget(ctx context.Context, tp TP, req *groupv1.ResetGroupOffsetsRequest, current int64) (int64, error) {
	clamp := func(off int64) (int64, error) {
		lo, err := c.host.ListOffsets(ctx, tp, Earliest, 0)
		if err != nil {
			return 0, err
		}
		hi, err := c.host.ListOffsets(ctx, tp, Latest, 0)
		if err != nil {
			return 0, err
		}
		return min(max(off, lo), hi), nil
	}
	switch req.GetSpec() {
	case groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_EARLIEST:
		return c.host.ListOffsets(ctx, tp, Earliest, 0)
	case groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_LATEST:
		return c.host.ListOffsets(ctx, tp, Latest, 0)
	case groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_OFFSET:
		return clamp(req.GetOffset())
	case groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_TIMESTAMP:
		off, err := c.host.ListOffsets(ctx, tp, AtTimestamp, req.GetTimestampMs())
		if err != nil {
			return 0, err
		}
		if off < 0 {
			return c.host.ListOffsets(ctx, tp, Latest, 0)
		}
		return off, nil
	case groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_SHIFT_BY:
		if current < 0 {
			return 0, kerr.New(kerr.InvalidRequest, "no committed offset to shift")
		}
		return clamp(current + req.GetShiftBy())
	}
	return 0, kerr.BadField(kerr.InvalidRequest, "spec", "unknown spec %d", req.GetSpec())
}
