package ctrl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/platform/kerr"
)

// ElectLeaders runs preferred or unclean elections on request (KIP-460).
// With all_partitions, partitions that need no election are left out of the
// answer, as Kafka does.
//
// With timeout_ms it also waits, outside the loop, for each new leader to
// accept its LeaderAndIsr; a partition whose leader did not confirm in time
// is answered REQUEST_TIMED_OUT (the election itself is written and stands).
func (a *Active) ElectLeaders(ctx context.Context, req *adminv1.ElectLeadersRequest) (*adminv1.ElectLeadersResponse, error) {
	var ans electAnswer
	var confirm map[int32]leaderConfirmation
	var answerErr error
	// The reply runs within the step that pushed the new leaders'
	// LeaderAndIsr (after the leaders yielded), so a.tracked holds their
	// outcomes.
	err := a.ask(ctx, func(m any, e error) {
		ans, _ = m.(electAnswer)
		answerErr = e
		if e != nil {
			return
		}
		confirm = map[int32]leaderConfirmation{}
		for id, results := range ans.confirm {
			confirm[id] = leaderConfirmation{acks: a.tracked[id], results: results}
		}
	}, func(reply replyFunc) event { return evElectLeaders{req: req, reply: reply} })
	if err == nil {
		err = answerErr
	}
	if err != nil {
		return nil, err
	}
	if req.GetTimeoutMs() > 0 {
		// A context, not a timer: its Done stays closed for every wait
		// after the first that times out (a timer fires once, and the
		// next topics' waits had no deadline left).
		wctx, cancel := context.WithTimeout(ctx, time.Duration(req.GetTimeoutMs())*time.Millisecond)
		defer cancel()
		for _, id := range slices.Sorted(maps.Keys(confirm)) {
			c := confirm[id]
			if !waitAll(wctx, c.acks) {
				for _, r := range c.results {
					r.ErrorCode = commonv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
					r.ErrorMessage = fmt.Sprintf("broker %d was elected, but did not confirm its leadership within timeout_ms", id)
				}
			}
		}
	}
	return ans.resp, nil
}

// leaderConfirmation is one new leader's LeaderAndIsr outcome and the
// election results that wait for it.
type leaderConfirmation struct {
	acks    []<-chan error
	results []*adminv1.ElectLeadersResult
}

// electAnswer is the core's answer to ElectLeaders: the response, and for
// each new leader that was sent a LeaderAndIsr (a tracked push) the results
// that wait for its confirmation.
type electAnswer struct {
	resp    *adminv1.ElectLeadersResponse
	confirm map[int32][]*adminv1.ElectLeadersResult
}

func (c *core) electLeaders(req *adminv1.ElectLeadersRequest, reply replyFunc) {
	var decide func(election.Partition, election.Brokers) (election.Decision, error)
	why := causePreferred
	switch req.GetElectionType() {
	case adminv1.ElectionType_ELECTION_TYPE_PREFERRED:
		decide = election.ElectPreferred
	case adminv1.ElectionType_ELECTION_TYPE_UNCLEAN:
		decide, why = election.ElectUnclean, causeUnclean
	default:
		c.answer(reply, nil, kerr.BadField(kerr.InvalidRequest, "election_type", "must be PREFERRED or UNCLEAN"))
		return
	}
	var targets []election.TopicPartition
	if req.GetAllPartitions() && len(req.GetPartitions()) == 0 {
		for _, p := range c.allPartitions() {
			if !p.t.deleting {
				targets = append(targets, p.tp())
			}
		}
	} else {
		seen := map[election.TopicPartition]bool{}
		for _, tp := range req.GetPartitions() {
			k := election.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()}
			if !seen[k] {
				seen[k] = true
				targets = append(targets, k)
			}
		}
	}
	view := c.view()
	results := map[election.TopicPartition]*adminv1.ElectLeadersResult{}
	var changes []change
	for _, tp := range targets {
		res := &adminv1.ElectLeadersResult{Topic: tp.Topic, Partition: tp.Partition}
		results[tp] = res
		p := c.lookup(tp.Topic, tp.Partition)
		if p == nil || !p.hasState() || p.t.deleting {
			setElectErr(res, kerr.New(kerr.UnknownTopicOrPartition, "unknown partition %s", tp))
			continue
		}
		d, err := decide(p.view(), c.viewFor(p, view))
		if err != nil {
			setElectErr(res, err)
			continue
		}
		changes = append(changes, change{p: p, d: d, cause: why})
	}
	// The current leaders yield first (handoff.go); a move whose leader
	// did not is answered with the reason and left undone.
	redecide := func(p *partition) (election.Decision, error) { return decide(p.view(), c.viewFor(p, c.view())) }
	c.commitHandoff(changes, redecide, func(written []*partition, failed map[election.TopicPartition]error, err error) {
		if err != nil {
			c.answer(reply, nil, c.notControllerFor(err))
			return
		}
		for tp, ferr := range failed {
			setElectErr(results[tp], ferr)
		}
		var sent map[int32]bool
		if len(written) > 0 {
			sent = c.pushLeaderAndIsrTracked(written)
			c.pushUpdateMetadata(written, nil, false, nil)
		}
		confirm := map[int32][]*adminv1.ElectLeadersResult{}
		for _, p := range written {
			leader := p.rec.State.Leader
			if !sent[leader] {
				continue // no live leader to wait for
			}
			if r := results[p.tp()]; r != nil {
				confirm[leader] = append(confirm[leader], r)
			} else if _, ok := confirm[leader]; !ok {
				confirm[leader] = nil
			}
		}
		resp := &adminv1.ElectLeadersResponse{}
		for _, tp := range targets {
			res := results[tp]
			if p := c.lookup(tp.Topic, tp.Partition); p != nil && p.hasState() {
				res.Leader, res.LeaderEpoch = p.rec.State.Leader, p.rec.State.LeaderEpoch
			}
			if req.GetAllPartitions() && res.ErrorCode == commonv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED {
				continue
			}
			resp.Results = append(resp.Results, res)
		}
		c.answer(reply, electAnswer{resp: resp, confirm: confirm}, nil)
	})
}

func setElectErr(res *adminv1.ElectLeadersResult, err error) {
	ke := kerr.As(err)
	res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
}

// armRebalance schedules the next auto leader rebalance check
// (leader.imbalance.check.interval.seconds, F21).
func (c *core) armRebalance() {
	c.emit(effArmTimer{key: timerKey{kind: timerRebalance}, after: c.rebalancePolicy().every})
}

// firstRebalanceDelay is how soon after taking over a controller runs its
// first auto leader rebalance check, as Kafka's onControllerFailover
// schedules it 5 s after failover; the interval applies from then on. A
// cluster restarted whole comes back led by the brokers that registered
// first: armed at the full interval, it stayed so for 5 minutes.
const firstRebalanceDelay = 5 * time.Second

// armFirstRebalance schedules a new term's first rebalance check.
func (c *core) armFirstRebalance() {
	c.emit(effArmTimer{key: timerKey{kind: timerRebalance}, after: min(firstRebalanceDelay, c.rebalancePolicy().every)})
}

func (c *core) rebalancePolicy() rebalancePolicy {
	if c.pol.rebalance == nil {
		return rebalancePolicy{every: 300 * time.Second}
	}
	return c.pol.rebalance()
}

// checkRebalance is Kafka's checkAndTriggerAutoLeaderRebalance: brokers that
// lead less than (100 - leader.imbalance.per.broker.percentage) % of the
// partitions they are preferred for get preferred elections where their
// replica is live and in sync (F21). The timer is armed again once done.
func (c *core) checkRebalance() {
	cfg := c.rebalancePolicy()
	if !cfg.enabled {
		c.armRebalance()
		return
	}
	parts := map[election.TopicPartition]election.Partition{}
	byTP := map[election.TopicPartition]*partition{}
	for _, p := range c.allPartitions() {
		// A moving partition's head is its target's: a preferred election
		// would hand the leadership to a replica still being added (Kafka
		// runs no auto rebalance during reassignments).
		if !p.t.deleting && !p.reassigning() {
			parts[p.tp()] = p.view()
			byTP[p.tp()] = p
		}
	}
	view := c.view()
	plan := election.PlanRebalance(parts, view, cfg.percent)
	if len(plan.Elect) == 0 {
		c.armRebalance()
		return
	}
	c.log.Info("Leader imbalance over the threshold: starting preferred replica leader elections",
		"imbalanced", plan.Imbalanced, "partitions", len(plan.Elect),
		"threshold_percent", cfg.percent)
	var changes []change
	for _, tp := range plan.Elect {
		p := byTP[tp]
		if d, err := election.ElectPreferred(p.view(), c.viewFor(p, view)); err == nil {
			changes = append(changes, change{p: p, d: d, cause: causePreferred})
		}
	}
	redecide := func(p *partition) (election.Decision, error) {
		return election.ElectPreferred(p.view(), c.viewFor(p, c.view()))
	}
	c.commitHandoff(changes, redecide, func(written []*partition, failed map[election.TopicPartition]error, err error) {
		if err == nil {
			c.pushChanges(written)
		}
		if len(failed) > 0 {
			c.log.Info("Auto leader rebalance left partitions with their leaders; the next check tries again",
				"partitions", len(failed), "next_check", c.rebalancePolicy().every)
		}
		c.armRebalance()
	})
}
