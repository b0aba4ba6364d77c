package ctrl

import (
	"context"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/platform/kerr"
)

// ControlledShutdown is Kafka's doControlledShutdown: the broker is marked
// shutting down (it may no longer lead or join an ISR), its leaderships move
// to other live ISR members in assignment order, it leaves the ISRs it
// follows in (and gets StopReplica for them), and the answer lists the
// replicated partitions it still leads; the broker retries until none are
// left. A later registration of the broker clears the mark.
//
// The leaderships move as voluntary moves (handoff.go): the broker yields
// them first, once their next leaders have every record it took, so a
// rolling restart loses no acknowledged write, acks=1 included.
func (a *Active) ControlledShutdown(ctx context.Context, req *controlv1.ControlledShutdownRequest) (*controlv1.ControlledShutdownResponse, error) {
	var resp *controlv1.ControlledShutdownResponse
	var answerErr error
	err := a.ask(ctx, answerTo(&resp, &answerErr), func(reply replyFunc) event {
		return evControlledShutdown{req: req, reply: reply}
	})
	if err != nil {
		return nil, err // unanswered: the loop may answer later, into resp
	}
	if answerErr != nil {
		return nil, answerErr
	}
	return resp, nil
}

// checkShutdownEpoch is checkBrokerEpoch for a controlled shutdown, except
// that an incarnation newer than any the controller has seen is asked to
// retry (BROKER_NOT_AVAILABLE, as Kafka answers a broker it does not know):
// its registration is still on its way through the watch. The broker takes
// STALE_BROKER_EPOCH to mean its leaderships were moved already and stops
// without a controlled shutdown, so a broker stopped right after it
// registered again must not get it.
func (c *core) checkShutdownEpoch(id int32, epoch int64) error {
	b := c.brokers[id]
	if epoch > c.departedEpoch[id] && (b == nil || epoch > b.info.Epoch) {
		return kerr.New(kerr.BrokerNotAvailable,
			"broker %d epoch %d: its registration has not reached the controller yet; retry", id, epoch)
	}
	return c.checkBrokerEpoch(id, epoch)
}

func (c *core) controlledShutdown(req *controlv1.ControlledShutdownRequest, reply replyFunc) {
	id := req.GetBrokerId()
	if err := c.checkShutdownEpoch(id, req.GetBrokerEpoch()); err != nil {
		c.answer(reply, nil, err)
		return
	}
	b := c.brokers[id]
	if !b.shuttingDown {
		c.log.Info("Shutting down broker", "broker_id", id, "broker_epoch", b.info.Epoch)
		b.shuttingDown = true
		c.stateDirty = true
		// Every broker learns the mark before a leadership moves (the
		// senders keep each broker's order): a new leader must not propose
		// the stopping broker, which now fetches from it, into the ISR.
		c.pushUpdateMetadata(nil, nil, false, nil)
	}
	view := c.view()
	var changes []change
	followed := map[*partition]bool{}
	for _, p := range c.partitionsOf(id) {
		if p.t.deleting {
			continue
		}
		d, err := election.OnControlledShutdown(p.view(), c.viewFor(p, view), id)
		if err != nil || !d.Changed {
			continue // it stays leader; reported below as remaining
		}
		if p.rec.State.Leader != id {
			followed[p] = true
		}
		changes = append(changes, change{p: p, d: d, cause: causeShutdown})
	}
	redecide := func(p *partition) (election.Decision, error) {
		return election.OnControlledShutdown(p.view(), c.viewFor(p, c.view()), id)
	}
	c.commitHandoff(changes, redecide, func(written []*partition, _ map[election.TopicPartition]error, err error) {
		if err != nil {
			c.answer(reply, nil, c.notControllerFor(err))
			return
		}
		var led, stopped []*partition
		for _, p := range written {
			if followed[p] {
				stopped = append(stopped, p)
			} else {
				led = append(led, p)
			}
		}
		// The moved leaderships go to every replica, the shutting-down broker
		// included (it becomes a follower); where it only followed, the others
		// learn the smaller ISR and it stops its replica.
		c.pushLeaderAndIsr(led, nil)
		c.pushLeaderAndIsr(stopped, except(id))
		c.pushStopReplica(id, stopped, false)
		if len(written) > 0 {
			c.pushUpdateMetadata(written, nil, false, nil)
		}

		resp := &controlv1.ControlledShutdownResponse{}
		for _, p := range c.partitionsOf(id) {
			if p.rec.State.Leader == id && len(p.replicas) > 1 && !p.t.deleting {
				resp.RemainingPartitions = append(resp.RemainingPartitions,
					&commonv1.TopicPartition{Topic: p.t.name, Partition: p.id})
			}
		}
		c.log.Info("Controlled shutdown step done", "broker_id", id, "moved", len(led), "left_isr", len(stopped),
			"remaining", len(resp.RemainingPartitions))
		c.answer(reply, resp, nil)
	})
}
