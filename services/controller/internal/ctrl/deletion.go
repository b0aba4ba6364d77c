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
	var resp *adminv1.DeleteTopicsResponse
	var done []chan struct{}
	err := a.call(ctx, func() (err error) { resp, done, err = a.deleteTopics(req); return err })
	if err != nil {
		return nil, err
	}
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

func (a *Active) deleteTopics(req *adminv1.DeleteTopicsRequest) (*adminv1.DeleteTopicsResponse, []chan struct{}, error) {
	count := map[string]int{}
	for _, n := range req.GetTopics() {
		count[n]++
	}
	resp := &adminv1.DeleteTopicsResponse{}
	done := make([]chan struct{}, len(req.GetTopics()))
	for i, name := range req.GetTopics() {
		res := &adminv1.DeleteTopicResult{Name: name}
		resp.Results = append(resp.Results, res)
		t := a.topics[name]
		var err error
		switch {
		case count[name] > 1:
			err = kerr.BadField(kerr.InvalidRequest, "topics", "topic %q appears more than once in the request", name)
		case name == OffsetsTopic:
			err = internalTopicRefusal("deleted")
		case t == nil:
			err = kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
		case t.deleting:
			done[i] = t.done
		default:
			ctx, cancel := a.writeCtx()
			err = a.sess.MarkTopicForDeletion(ctx, name)
			cancel()
			if err != nil && a.refusedOrFatal("mark topic "+name+" for deletion", err) {
				return nil, nil, a.notControllerFor(err)
			}
			if err == nil {
				t.deleting, t.done = true, make(chan struct{})
				a.log.Info("Topic marked for deletion", "topic", name)
				a.startDeletion(t)
				done[i] = t.done
			}
		}
		if err != nil {
			ke := kerr.As(err)
			res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
		}
	}
	return resp, done, nil
}

// startDeletion sends StopReplica (delete) to the topic's live replicas and,
// once they answered (or after a bound, for brokers that do not), finishes
// the deletion on the loop. Replicas on dead brokers are not waited for: a
// broker that comes back learns from its full UpdateMetadata that the topic
// is gone.
func (a *Active) startDeletion(t *topic) {
	byBroker := map[int32][]*partition{}
	for _, p := range t.parts {
		for _, r := range p.replicas {
			if a.registered(r) {
				byBroker[r] = append(byBroker[r], p)
			}
		}
	}
	var acks []<-chan error
	for _, id := range slices.Sorted(maps.Keys(byBroker)) {
		acks = append(acks, a.pushStopReplica(id, byBroker[id], true))
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		deadline := time.NewTimer(2 * a.d.Settings.RequestTimeout)
		defer deadline.Stop()
		waitAll(a.ctx, deadline.C, acks)
		a.post(func() { a.finishDeletion(t) })
	}()
}

func (a *Active) finishDeletion(t *topic) {
	if a.topics[t.name] != t {
		return
	}
	ctx, cancel := a.writeCtx()
	err := a.sess.DeleteTopic(ctx, t.name)
	cancel()
	if err != nil && a.refusedOrFatal("delete topic "+t.name, err) {
		return
	}
	delete(a.topics, t.name)
	for k := range a.progress {
		if k.tp.Topic == t.name {
			delete(a.progress, k)
		}
	}
	a.stateDirty = true
	a.log.Info("Deleted topic", "topic", t.name)
	a.event(controlv1.EventKind_EVENT_KIND_TOPIC_DELETED, func(ev *controlv1.ClusterEvent) {
		ev.Topic = t.name
		ev.Reason = "topic " + t.name + " deleted"
	})
	a.pushUpdateMetadata(nil, []string{t.name}, false, nil)
	close(t.done)
}
