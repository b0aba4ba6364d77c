package ctrl

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/platform/kerr"
)

// AlterPartition commits ISR changes proposed by partition leaders (F10,
// KIP-497): each item is validated in Kafka's order, the accepted ones are
// written with compare-and-set, and every live broker gets the new states.
// A sender that is not the live incarnation of its broker gets
// STALE_BROKER_EPOCH for the whole request.
func (a *Active) AlterPartition(ctx context.Context, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	var resp *controlv1.AlterPartitionResponse
	err := a.call(ctx, func() (err error) {
		a.step(evAlterPartition{req: req, reply: answerTo(&resp, &err)})
		return err
	})
	if err != nil {
		a.noteAlterRefused(req, "", err) // the loop may still be writing resp (call's ctx ended)
		return nil, err
	}
	for _, res := range resp.GetPartitions() {
		if res.GetErrorCode() != 0 {
			a.noteAlterRefused(req, res.GetTopic()+"-"+strconv.Itoa(int(res.GetPartition())),
				kerr.New(kerr.Code(res.GetErrorCode()), "%s", res.GetErrorMessage()))
		}
	}
	return resp, nil
}

// alterRefusalWarnEvery spaces the lines of AlterPartition refusals of one
// broker and code.
const alterRefusalWarnEvery = 10 * time.Second

// noteAlterRefused counts an ISR change refused (a stale leader's
// FENCED_LEADER_EPOCH, a zombie broker's STALE_BROKER_EPOCH, an
// INVALID_UPDATE_VERSION a newer state overtook) by code, and logs it at
// most once per alterRefusalWarnEvery for each broker and code. partition
// is "" when the whole request was refused. A call that ended before its
// answer (the caller gone, the term ending) is no refusal.
func (a *Active) noteAlterRefused(req *controlv1.AlterPartitionRequest, partition string, err error) {
	code := kerr.CodeOf(err)
	if code == kerr.None || code == kerr.NotController || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	a.d.Metrics.alterRefused.WithLabelValues(code.String()).Inc()
	n, ok := a.alterRefusals.Allow(strconv.Itoa(int(req.GetBrokerId())) + " " + code.String())
	if !ok {
		return
	}
	if partition == "" {
		partition = strconv.Itoa(len(req.GetPartitions())) + " partitions"
	}
	a.log.Info("Refused an ISR change", "broker", req.GetBrokerId(), "broker_epoch", req.GetBrokerEpoch(), "partition", partition,
		"code", code.String(), "err", err, "unlogged_since_last", n)
}

func (c *core) alterPartition(req *controlv1.AlterPartitionRequest, reply replyFunc) {
	if err := c.checkBrokerEpoch(req.GetBrokerId(), req.GetBrokerEpoch()); err != nil {
		c.answer(reply, nil, err)
		return
	}
	view := c.view()
	resp := &controlv1.AlterPartitionResponse{Partitions: make([]*controlv1.AlterPartitionResult, len(req.GetPartitions()))}
	var changes []change
	pending := map[*partition]int{}
	seen := map[election.TopicPartition]bool{}
	for i, it := range req.GetPartitions() {
		res := &controlv1.AlterPartitionResult{Topic: it.GetTopic(), Partition: it.GetPartition()}
		resp.Partitions[i] = res
		tp := election.TopicPartition{Topic: it.GetTopic(), Partition: it.GetPartition()}
		p := c.lookup(tp.Topic, tp.Partition)
		switch {
		case seen[tp]:
			setErr(res, kerr.New(kerr.InvalidRequest, "partition %s appears twice in the request", tp))
			continue
		case p == nil || !p.hasState():
			setErr(res, kerr.New(kerr.UnknownTopicOrPartition, "unknown partition %s", tp))
			continue
		}
		seen[tp] = true
		d, err := election.AlterPartition(p.view(), c.viewFor(p, view), alterRequest(req, it))
		if err != nil {
			setErr(res, err)
			continue
		}
		if !d.Changed {
			fillState(res, p) // an identical retry: success (F10 step 4)
			continue
		}
		pending[p] = i
		changes = append(changes, change{p: p, d: d, cause: causeAlter})
	}
	c.commit(changes, func(written []*partition, err error) {
		if err != nil {
			c.answer(reply, nil, c.notControllerFor(err))
			return
		}
		for _, p := range written {
			fillState(resp.Partitions[pending[p]], p)
			delete(pending, p)
		}
		for p, i := range pending {
			setErr(resp.Partitions[i], kerr.New(kerr.InvalidUpdateVersion,
				"partition %s changed while the request was processed (partition epoch now %d)", p.tp(), p.rec.State.PartitionEpoch))
		}
		// ZK mode answers an ISR change with UpdateMetadata to every broker
		// (none for a request that changed nothing: an identical retry).
		if len(written) > 0 {
			c.pushUpdateMetadata(written, nil, false, nil)
		}
		// An ISR that now holds a reassignment's whole target lets it finish.
		c.maybeCompleteReassignments(written, func() { c.answer(reply, resp, nil) })
	})
}

// checkBrokerEpoch refuses a request from anything but the live
// incarnation of a broker (F23, KIP-380).
func (c *core) checkBrokerEpoch(id int32, epoch int64) error {
	b := c.brokers[id]
	if b == nil {
		return kerr.New(kerr.StaleBrokerEpoch, "broker %d has no live registration (epoch %d)", id, epoch)
	}
	if b.info.Epoch != epoch {
		return kerr.New(kerr.StaleBrokerEpoch, "broker %d sent epoch %d; its live registration has epoch %d", id, epoch, b.info.Epoch)
	}
	return nil
}

func alterRequest(req *controlv1.AlterPartitionRequest, it *controlv1.AlterPartitionItem) election.AlterPartitionRequest {
	r := election.AlterPartitionRequest{BrokerID: req.GetBrokerId(), BrokerEpoch: req.GetBrokerEpoch(),
		LeaderEpoch: it.GetLeaderEpoch(), PartitionEpoch: it.GetPartitionEpoch()}
	for _, m := range it.GetNewIsr() {
		e := m.GetBrokerEpoch()
		if e == 0 {
			// Revisions start at 1, so 0 can only mean "not sent": skip the
			// check, as Kafka does for -1 (KIP-903).
			e = election.UnknownBrokerEpoch
		}
		r.NewISR = append(r.NewISR, election.ReplicaState{ID: m.GetBrokerId(), BrokerEpoch: e})
	}
	return r
}

func setErr(res *controlv1.AlterPartitionResult, err error) {
	ke := kerr.As(err)
	res.ErrorCode = commonv1.ErrorCode(ke.Code)
	res.ErrorMessage = ke.Message
}

func fillState(res *controlv1.AlterPartitionResult, p *partition) {
	s := p.rec.State
	res.Leader, res.LeaderEpoch, res.Isr, res.PartitionEpoch = s.Leader, s.LeaderEpoch, slices.Clone(s.ISR), s.PartitionEpoch
}
