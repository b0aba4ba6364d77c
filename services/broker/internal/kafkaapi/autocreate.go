package kafkaapi

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// creatingTopics are the topics this broker is asking the controller to
// create for a Metadata request, as Kafka's AutoTopicCreationManager keeps
// its inflightTopics: a second request naming one meanwhile is answered
// UNKNOWN_TOPIC_OR_PARTITION (retriable) instead of asking again.
type creatingTopics struct {
	mu    sync.Mutex
	names map[string]bool
}

// start claims the names not claimed yet; the others are returned apart.
func (c *creatingTopics) start(names []string) (mine, others []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = map[string]bool{}
	}
	for _, n := range names {
		if c.names[n] {
			others = append(others, n)
			continue
		}
		c.names[n] = true
		mine = append(mine, n)
	}
	return mine, others
}

func (c *creatingTopics) done(names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		delete(c.names, n)
	}
}

// answerMissing is the error a Metadata request gets for each topic it
// names that does not exist, creating those it may, as Kafka's
// handleTopicMetadataRequest and AutoTopicCreationManager do. Creation is
// allowed when the broker's auto.create.topics.enable is on and the request
// allows it (v4+'s allow_auto_topic_creation; always before v4). Then a
// topic the caller may not Create (on the topic or on Cluster: the policy
// of CreateTopics) is TOPIC_AUTHORIZATION_FAILED, a name Kafka forbids
// INVALID_TOPIC_EXCEPTION, one another request is creating
// UNKNOWN_TOPIC_OR_PARTITION, and the others are created through the
// active controller (with its num.partitions and default.replication.factor;
// __consumer_offsets as the group coordinator creates it): created, or
// created meanwhile by someone else, they are LEADER_NOT_AVAILABLE, which
// clients retry until the leaders are elected; a refusal is its error.
// Without creation a forbidden name is INVALID_TOPIC_EXCEPTION and any
// other UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) answerMissing(ctx context.Context, req *kmsg.MetadataRequest, missing []string) map[string]int16 {
	allowed := (req.Version < 4 || req.AllowAutoTopicCreation) && s.opts.RM.BrokerConfig().AutoCreateTopicsEnable
	out := make(map[string]int16, len(missing))
	var creatable []string
	for _, name := range missing {
		if _, ok := out[name]; ok {
			continue
		}
		switch {
		case allowed && s.authorize(ctx, adminv1.AdminService_CreateTopics_FullMethodName,
			&adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{{Name: name}}}) != nil:
			out[name] = int16(kerr.TopicAuthorizationFailed)
		case topicconfig.ValidateTopicName(name) != nil:
			out[name] = int16(kerr.InvalidTopicException)
		case !allowed:
			out[name] = int16(kerr.UnknownTopicOrPartition)
		default:
			out[name] = int16(kerr.UnknownTopicOrPartition) // until created below
			creatable = append(creatable, name)
		}
	}
	mine, _ := s.creating.start(creatable)
	if len(mine) == 0 {
		return out
	}
	defer s.creating.done(mine)
	for name, err := range s.createTopics(ctx, mine) {
		switch c := kerr.Code(code(err)); c {
		case kerr.None, kerr.TopicAlreadyExists, kerr.RequestTimedOut:
			out[name] = int16(kerr.LeaderNotAvailable)
		default:
			out[name] = int16(c)
		}
		if err != nil {
			s.log.Debug("automatic topic creation refused", "topic", name, "err", err)
		}
	}
	return out
}

// createTopics asks the active controller to create names with the
// cluster's defaults, speaking for the caller as CreateTopics does, without
// waiting for leaders; __consumer_offsets goes as the group coordinator
// asks for it, with its own partitions, replication and configs. Each
// name's error is nil once created.
func (s *Server) createTopics(ctx context.Context, names []string) map[string]error {
	out := make(map[string]error, len(names))
	greq := &adminv1.CreateTopicsRequest{}
	for _, n := range names {
		if n == topicconfig.OffsetsTopic {
			if s.opts.CreateOffsetsTopic == nil {
				out[n] = kerr.New(kerr.UnknownTopicOrPartition, "%s is created by the group coordinator", n)
				continue
			}
			out[n] = s.opts.CreateOffsetsTopic(ctx)
			continue
		}
		greq.Topics = append(greq.Topics, &adminv1.TopicSpec{Name: n}) // 0: the controller's defaults
	}
	if len(greq.Topics) == 0 {
		return out
	}
	fail := func(err error) map[string]error {
		for _, t := range greq.Topics {
			out[t.GetName()] = err
		}
		return out
	}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	gresp, err := cli.CreateTopics(fctx, greq)
	if err != nil {
		return fail(err)
	}
	for _, r := range gresp.GetResults() {
		if c := protoCode(r.GetErrorCode()); c != 0 {
			out[r.GetName()] = kerr.New(kerr.Code(c), "%s", r.GetErrorMessage())
		} else {
			out[r.GetName()] = nil
		}
	}
	return out
}
