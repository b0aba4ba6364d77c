package ctrl

import (
	"context"
	"strconv"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// OffsetsTopic is the internal topic holding consumer groups' committed
// offsets and metadata. Only the controller creates it (on a broker's
// request) and nobody may delete it.
const OffsetsTopic = topicconfig.OffsetsTopic

// offsetsTopicSegmentBytes keeps its segments small so the cleaner, which
// never touches the active segment, can compact it.
const offsetsTopicSegmentBytes = 100 << 20

// CreateOffsetsTopic creates __consumer_offsets unless it exists (the core
// decides: createOffsetsTopic). It answers once the new partitions' leaders
// have accepted their LeaderAndIsr (or after the request timeout, with the
// topic created all the same).
func (a *Active) CreateOffsetsTopic(ctx context.Context, req *controlv1.CreateOffsetsTopicRequest) (*controlv1.CreateOffsetsTopicResponse, error) {
	var ans offsetsAnswer
	var acks []<-chan error
	err := a.call(ctx, func() error {
		err := errNoOutcome
		a.step(evCreateOffsetsTopic{req: req, reply: answerTo(&ans, &err)})
		acks = a.takeGroups([]uint64{ans.group})[0]
		return err
	})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, a.d.Settings.RequestTimeout)
	defer cancel()
	waitAll(wctx, acks)
	return ans.resp, nil
}

// offsetsAnswer is the core's answer to CreateOffsetsTopic: the response and
// the ack group of the new leaders' LeaderAndIsr (0: nothing to wait for).
type offsetsAnswer struct {
	resp  *controlv1.CreateOffsetsTopicResponse
	group uint64
}

// createOffsetsTopic creates __consumer_offsets unless it exists, with
// offsets.topic.num.partitions partitions, offsets.topic.replication.factor
// replicas capped at the live brokers, min.insync.replicas 2 (or the
// replication factor when smaller) and cleanup.policy=compact.
func (c *core) createOffsetsTopic(req *controlv1.CreateOffsetsTopicRequest, reply replyFunc) {
	resp := &controlv1.CreateOffsetsTopicResponse{}
	if err := c.checkBrokerEpoch(req.GetBrokerId(), req.GetBrokerEpoch()); err != nil {
		c.answer(reply, nil, err)
		return
	}
	if t := c.topics[OffsetsTopic]; t != nil {
		if t.deleting {
			c.answer(reply, nil, kerr.New(kerr.CoordinatorNotAvailable, "%s is being deleted", OffsetsTopic))
			return
		}
		resp.NumPartitions = int32(len(t.parts))
		if len(t.parts) > 0 {
			resp.ReplicationFactor = int32(len(t.parts[0].replicas))
		}
		c.answer(reply, offsetsAnswer{resp: resp}, nil)
		return
	}
	cfg := c.brokerConfig()
	live := int32(0)
	for _, b := range c.brokers {
		if !b.shuttingDown {
			live++
		}
	}
	rf := min(cfg.OffsetsTopicReplicationFactor, live)
	if rf < 1 {
		c.answer(reply, nil, kerr.New(kerr.CoordinatorNotAvailable, "no live broker to host %s", OffsetsTopic))
		return
	}
	spec := &adminv1.TopicSpec{Name: OffsetsTopic, NumPartitions: cfg.OffsetsTopicNumPartitions, ReplicationFactor: rf,
		Configs: map[string]string{
			"cleanup.policy":      "compact",
			"min.insync.replicas": strconv.Itoa(int(min(2, rf))),
			"segment.bytes":       strconv.Itoa(offsetsTopicSegmentBytes),
		}}
	res := &adminv1.CreateTopicResult{}
	c.createTopic(spec, false, res, func(group uint64, err error) {
		if err != nil {
			if c.stopping() {
				err = c.notControllerFor(err)
			}
			c.answer(reply, nil, err)
			return
		}
		resp.NumPartitions, resp.ReplicationFactor, resp.Created = res.NumPartitions, res.ReplicationFactor, true
		c.answer(reply, offsetsAnswer{resp: resp, group: group}, nil)
	})
}

// internalTopicRefusal is the answer to a user creating or deleting the
// internal topic (INVALID_TOPIC_EXCEPTION, as Kafka refuses writes to it).
func internalTopicRefusal(verb string) error {
	return kerr.New(kerr.InvalidTopicException, "%s is an internal topic: it cannot be %s by clients", OffsetsTopic, verb)
}
