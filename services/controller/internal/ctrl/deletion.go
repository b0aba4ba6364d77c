package ctrl

import (
	"context"
	"maps"
	"slices"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// DeleteTopics marks topics for deletion, has their live replicas stopped
// and deleted (StopReplica delete=true), then removes them from etcd. With
// timeout_ms the answer waits for the removal.
func (a *Active) DeleteTopics(ctx context.Context, req *adminv1.DeleteTopicsRequest) (*adminv1.DeleteTopicsResponse, error) {
	var ans deleteAnswer
	err := a.call(ctx, func() (err error) {
		a.step(evDeleteTopics{req: req, reply: answerTo(&ans, &err)})
		return err
	})
	if err != nil {
		return nil, err
	}
	resp, done := ans.resp, ans.done
	if req.GetTimeoutMs() > 0 {
		deadline := time.NewTimer(time.Duration(req.GetTimeoutMs()) * time.Millisecond)
		defer deadline.Stop()
		for i, ch := range done {
			if ch == nil {
				continue
			}
			select {
			case <-ch:
			case <-deadline.C:
				resp.Results[i].ErrorCode = commonv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
				resp.Results[i].ErrorMessage = "topic marked for deletion; not yet deleted within timeout_ms"
			case <-a.quit:
				return nil, a.notController()
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return resp, nil
}

// deleteAnswer is the core's answer to DeleteTopics: the response, and for
// each topic being deleted the channel closed once it is gone.
type deleteAnswer struct {
	resp *adminv1.DeleteTopicsResponse
	done []chan struct{}
}

// deleteTopics marks the topics for deletion one after the other (each an
// awaited fenced write) and starts each deletion.
func (c *core) deleteTopics(req *adminv1.DeleteTopicsRequest, reply replyFunc) {
	count := map[string]int{}
	for _, n := range req.GetTopics() {
		count[n]++
	}
	names := req.GetTopics()
	resp := &adminv1.DeleteTopicsResponse{}
	done := make([]chan struct{}, len(names))
	var next func(i int)
	next = func(i int) {
		if i == len(names) {
			c.answer(reply, deleteAnswer{resp: resp, done: done}, nil)
			return
		}
		name := names[i]
		res := &adminv1.DeleteTopicResult{Name: name}
		resp.Results = append(resp.Results, res)
		finish := func(err error) {
			if err != nil {
				ke := kerr.As(err)
				res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
			}
			next(i + 1)
		}
		t := c.topics[name]
		switch {
		case count[name] > 1:
			finish(kerr.BadField(kerr.InvalidRequest, "topics", "topic %q appears more than once in the request", name))
		case name == OffsetsTopic:
			finish(internalTopicRefusal("deleted"))
		case t == nil:
			finish(kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", name))
		case t.deleting:
			done[i] = t.done
			finish(nil)
		default:
			what := "mark topic " + name + " for deletion"
			c.await(effMarkDeletion{topic: name}, what, func(ev event) {
				r := ev.(evMetaWriteResult)
				if r.err != nil {
					if c.refusedOrFatal(what, r.err, r.resigning) {
						c.answer(reply, nil, c.notControllerFor(r.err))
						return
					}
					finish(r.err)
					return
				}
				t.deleting, t.done = true, make(chan struct{})
				c.stateDirty = true // its partitions leave the offline count
				c.log.Info("Topic marked for deletion", "topic", name)
				c.startDeletion(t)
				done[i] = t.done
				finish(nil)
			})
		}
	}
	next(0)
}

// startDeletion sends StopReplica (delete) to the topic's live replicas and,
// once they answered (or after a bound, for brokers that do not: the shell
// waits off the loop), finishes the deletion. Replicas on dead brokers are
// not waited for: a broker that comes back learns from its full
// UpdateMetadata that the topic is gone.
func (c *core) startDeletion(t *topic) {
	byBroker := map[int32][]*partition{}
	for _, p := range t.parts {
		for _, r := range p.replicas {
			if c.registered(r) {
				byBroker[r] = append(byBroker[r], p)
			}
		}
	}
	c.ackGroup++
	group := c.ackGroup
	c.grouping = group
	for _, id := range slices.Sorted(maps.Keys(byBroker)) {
		c.pushStopReplica(id, byBroker[id], true)
	}
	c.grouping = 0
	c.emit(effAwaitAcks{group: group, then: evDeletionAcked{t: t}})
}

// finishDeletion removes a topic whose replicas were stopped: its keys are
// deleted (an awaited fenced write), then every broker learns it is gone.
func (c *core) finishDeletion(t *topic) {
	if c.topics[t.name] != t {
		return
	}
	what := "delete topic " + t.name
	c.await(effDeleteTopic{topic: t.name}, what, func(ev event) {
		r := ev.(evMetaWriteResult)
		if r.err != nil && c.refusedOrFatal(what, r.err, r.resigning) {
			return
		}
		delete(c.topics, t.name)
		for k := range c.progress {
			if k.tp.Topic == t.name {
				delete(c.progress, k)
			}
		}
		for tp := range c.leaderEnd {
			if tp.Topic == t.name {
				delete(c.leaderEnd, tp)
			}
		}
		c.stateDirty = true
		c.log.Info("Deleted topic", "topic", t.name)
		c.emitEvent(controlv1.EventKind_EVENT_KIND_TOPIC_DELETED, func(ev *controlv1.ClusterEvent) {
			ev.Topic = t.name
			ev.Reason = "topic " + t.name + " deleted"
		})
		c.pushUpdateMetadata(nil, []string{t.name}, false, nil)
		c.emit(effTopicGone{t: t})
	})
}
