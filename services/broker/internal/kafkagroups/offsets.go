package kafkagroups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/kerr"
)

// offsetCommit commits through the gRPC handler, with v2-v4's
// retention_time_ms; a refusal of the whole request (fenced member, not the
// coordinator, no authorization) is every partition's error, as Kafka
// answers it.
func (g *Groups) offsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	greq := &groupv1.OffsetCommitRequest{GroupId: req.Group, GenerationId: req.Generation, MemberId: req.MemberID, GroupInstanceId: str(req.InstanceID)}
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
		// v2-v4 carry the offsets' retention (-1: the broker's); v5
		// dropped it (KIP-211).
		r := req.RetentionTimeMillis
		greq.RetentionTimeMs = &r
	}
	for _, t := range req.Topics {
		gt := &groupv1.OffsetCommitTopic{Name: t.Topic}
		for _, p := range t.Partitions {
			gt.Partitions = append(gt.Partitions, &groupv1.OffsetCommitPartition{Partition: p.Partition, CommittedOffset: p.Offset,
				CommittedLeaderEpoch: p.LeaderEpoch, Metadata: str(p.Metadata)})
		}
		greq.Topics = append(greq.Topics, gt)
	}
	gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_OffsetCommit_FullMethodName, greq, g.Service.OffsetCommit)
	if err != nil {
		for _, t := range req.Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code(err)})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, t := range gresp.GetTopics() {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.GetName()}
		for _, p := range t.GetPartitions() {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.GetPartition(), ErrorCode: int16(p.GetErrorCode())})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fetchedGroup is one group's committed offsets, or its error.
type fetchedGroup struct {
	topics []*groupv1.OffsetFetchTopicResult
	err    error
}

// fetchGroup fetches one group's offsets. As Kafka's handleOffsetFetchRequest,
// a named topic the caller may not Describe does not fail the request (nor
// does it over gRPC): each of its partitions is answered
// TOPIC_AUTHORIZATION_FAILED with no offset, and all topics (none named)
// shows only those it may Describe (the policy's filter). Such topics are
// not asked for, so a v8 group naming only them still gets its own
// refusal or coordinator error first.
func (g *Groups) fetchGroup(ctx context.Context, group string, topics []kmsg.OffsetFetchRequestTopic, stable bool) fetchedGroup {
	greq := &groupv1.OffsetFetchRequest{GroupId: group, RequireStable: stable}
	var refused []*groupv1.OffsetFetchTopicResult
	for _, t := range topics {
		if !g.Authorizer.Allowed(ctx, authz.Describe, authz.TopicNamed(t.Topic)) {
			rt := &groupv1.OffsetFetchTopicResult{Name: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, &groupv1.OffsetFetchPartition{Partition: p, CommittedOffset: -1, CommittedLeaderEpoch: -1,
					ErrorCode: commonv1.ErrorCode(kerr.TopicAuthorizationFailed)})
			}
			refused = append(refused, rt)
			continue
		}
		greq.Topics = append(greq.Topics, &groupv1.OffsetFetchTopic{Name: t.Topic, Partitions: t.Partitions})
	}
	// Every named topic refused: the group is still asked for (none named
	// is all of them, answered to nobody), so its own refusal or
	// coordinator error comes first, as in Kafka.
	onlyRefused := len(topics) > 0 && len(greq.Topics) == 0
	gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_OffsetFetch_FullMethodName, greq, g.Service.OffsetFetch)
	if err != nil {
		return fetchedGroup{err: err}
	}
	if onlyRefused {
		return fetchedGroup{topics: refused}
	}
	return fetchedGroup{topics: append(gresp.GetTopics(), refused...)}
}

// offsetFetch answers one group (v1-7; nil topics, from v2, is all of
// them) or several (v8).
func (g *Groups) offsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []kmsg.OffsetFetchRequestTopic
			for _, t := range rg.Topics {
				topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
			f := g.fetchGroup(ctx, rg.Group, topics, req.RequireStable)
			out := kmsg.OffsetFetchResponseGroup{Group: rg.Group, ErrorCode: code(f.err)}
			for _, t := range f.topics {
				ot := kmsg.OffsetFetchResponseGroupTopic{Topic: t.GetName()}
				for _, p := range t.GetPartitions() {
					ot.Partitions = append(ot.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.GetPartition(), Offset: p.GetCommittedOffset(),
						LeaderEpoch: p.GetCommittedLeaderEpoch(), Metadata: metadataOf(p), ErrorCode: int16(p.GetErrorCode())})
				}
				out.Topics = append(out.Topics, ot)
			}
			resp.Groups = append(resp.Groups, out)
		}
		return resp
	}
	f := g.fetchGroup(ctx, req.Group, req.Topics, req.RequireStable)
	if f.err != nil {
		if req.Version >= 2 {
			resp.ErrorCode = code(f.err)
			return resp
		}
		// v1 has no top-level error: each partition asked carries it.
		for _, t := range req.Topics {
			rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1, ErrorCode: code(f.err)})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, t := range f.topics {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.GetName()}
		for _, p := range t.GetPartitions() {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p.GetPartition(), Offset: p.GetCommittedOffset(),
				LeaderEpoch: p.GetCommittedLeaderEpoch(), Metadata: metadataOf(p), ErrorCode: int16(p.GetErrorCode())})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func metadataOf(p *groupv1.OffsetFetchPartition) *string {
	m := p.GetMetadata()
	return &m
}

// offsetDelete deletes committed offsets through the gRPC handler. As in
// Kafka, a refusal of the group is the answer's error and a refusal of a
// topic is each of its partitions' error.
func (g *Groups) offsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	greq := &groupv1.OffsetDeleteRequest{GroupId: req.Group}
	for _, t := range req.Topics {
		gt := &groupv1.OffsetDeleteTopic{Name: t.Topic}
		for _, p := range t.Partitions {
			gt.Partitions = append(gt.Partitions, p.Partition)
		}
		greq.Topics = append(greq.Topics, gt)
	}
	gresp, err := call(ctx, g.Authorizer, groupv1.GroupService_OffsetDelete_FullMethodName, greq, g.Service.OffsetDelete)
	if err != nil {
		if c := code(err); c != int16(kerr.TopicAuthorizationFailed) {
			resp.ErrorCode = c
			return resp
		}
		for _, t := range req.Topics {
			rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: code(err)})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, t := range gresp.GetTopics() {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.GetName()}
		for _, p := range t.GetPartitions() {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.GetPartition(), ErrorCode: int16(p.GetErrorCode())})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
