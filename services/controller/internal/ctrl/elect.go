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
	var resp *adminv1.ElectLeadersResponse
	var confirm map[int32]leaderConfirmation
	err := a.call(ctx, func() (err error) { resp, confirm, err = a.electLeaders(req); return err })
	if err != nil {
		return nil, err
	}
	if req.GetTimeoutMs() > 0 {
		deadline := time.NewTimer(time.Duration(req.GetTimeoutMs()) * time.Millisecond)
		defer deadline.Stop()
		for _, id := range slices.Sorted(maps.Keys(confirm)) {
			c := confirm[id]
			if !waitAll(ctx, deadline.C, []<-chan error{c.ack}) {
				for _, r := range c.results {
					r.ErrorCode = commonv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
					r.ErrorMessage = fmt.Sprintf("broker %d was elected, but did not confirm its leadership within timeout_ms", id)
				}
			}
		}
	}
	return resp, nil
}

// leaderConfirmation is one new leader's LeaderAndIsr outcome and the
// election results that wait for it.
type leaderConfirmation struct {
	ack     <-chan error
	results []*adminv1.ElectLeadersResult
}

func (a *Active) electLeaders(req *adminv1.ElectLeadersRequest) (*adminv1.ElectLeadersResponse, map[int32]leaderConfirmation, error) {
	var decide func(election.Partition, election.Brokers) (election.Decision, error)
	c := causePreferred
	switch req.GetElectionType() {
	case adminv1.ElectionType_ELECTION_TYPE_PREFERRED:
		decide = election.ElectPreferred
	case adminv1.ElectionType_ELECTION_TYPE_UNCLEAN:
		decide, c = election.ElectUnclean, causeUnclean
	default:
		return nil, nil, kerr.BadField(kerr.InvalidRequest, "election_type", "must be PREFERRED or UNCLEAN")
	}
	var targets []election.TopicPartition
	if req.GetAllPartitions() && len(req.GetPartitions()) == 0 {
		for _, p := range a.allPartitions() {
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
	view := a.view()
	results := map[election.TopicPartition]*adminv1.ElectLeadersResult{}
	var changes []change
	for _, tp := range targets {
		res := &adminv1.ElectLeadersResult{Topic: tp.Topic, Partition: tp.Partition}
		results[tp] = res
		p := a.lookup(tp.Topic, tp.Partition)
		if p == nil || !p.hasState() || p.t.deleting {
			setElectErr(res, kerr.New(kerr.UnknownTopicOrPartition, "unknown partition %s", tp))
			continue
		}
		d, err := decide(p.view(), a.viewFor(p, view))
		if err != nil {
			setElectErr(res, err)
			continue
		}
		changes = append(changes, change{p: p, d: d, cause: c})
	}
	written, err := a.commit(changes)
	if err != nil {
		return nil, nil, a.notControllerFor(err)
	}
	var acks map[int32]<-chan error
	if len(written) > 0 {
		acks = a.pushLeaderAndIsr(written, nil)
		a.pushUpdateMetadata(written, nil, false, nil)
	}
	confirm := map[int32]leaderConfirmation{}
	for _, p := range written {
		leader := p.rec.State.Leader
		c, ok := confirm[leader]
		if !ok {
			ack, sent := acks[leader]
			if !sent {
				continue // no live leader to wait for
			}
			c.ack = ack
		}
		if r := results[p.tp()]; r != nil {
			c.results = append(c.results, r)
		}
		confirm[leader] = c
	}
	resp := &adminv1.ElectLeadersResponse{}
	for _, tp := range targets {
		res := results[tp]
		if p := a.lookup(tp.Topic, tp.Partition); p != nil && p.hasState() {
			res.Leader, res.LeaderEpoch = p.rec.State.Leader, p.rec.State.LeaderEpoch
		}
		if req.GetAllPartitions() && res.ErrorCode == commonv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED {
			continue
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, confirm, nil
}

func setElectErr(res *adminv1.ElectLeadersResult, err error) {
	ke := kerr.As(err)
	res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
}

// armRebalance schedules the next auto leader rebalance check
// (leader.imbalance.check.interval.seconds, F21).
func (a *Active) armRebalance() {
	if a.rebalance != nil {
		a.rebalance.Stop()
	}
	every := time.Duration(a.brokerConfig().LeaderImbalanceCheckIntervalSeconds) * time.Second
	a.rebalance = time.AfterFunc(every, func() { a.post(a.checkRebalance) })
}

// checkRebalance is Kafka's checkAndTriggerAutoLeaderRebalance: brokers that
// lead less than (100 - leader.imbalance.per.broker.percentage) % of the
// partitions they are preferred for get preferred elections where their
// replica is live and in sync (F21).
func (a *Active) checkRebalance() {
	defer a.armRebalance()
	cfg := a.brokerConfig()
	if !cfg.AutoLeaderRebalanceEnable {
		return
	}
	parts := map[election.TopicPartition]election.Partition{}
	byTP := map[election.TopicPartition]*partition{}
	for _, p := range a.allPartitions() {
		if !p.t.deleting {
			parts[p.tp()] = p.view()
			byTP[p.tp()] = p
		}
	}
	view := a.view()
	plan := election.PlanRebalance(parts, view, int(cfg.LeaderImbalancePerBrokerPercentage))
	if len(plan.Elect) == 0 {
		return
	}
	a.log.Info("Leader imbalance over the threshold: starting preferred replica leader elections",
		"imbalanced", plan.Imbalanced, "partitions", len(plan.Elect),
		"threshold_percent", cfg.LeaderImbalancePerBrokerPercentage)
	var changes []change
	for _, tp := range plan.Elect {
		p := byTP[tp]
		if d, err := election.ElectPreferred(p.view(), a.viewFor(p, view)); err == nil {
			changes = append(changes, change{p: p, d: d, cause: causePreferred})
		}
	}
	written, err := a.commit(changes)
	if err != nil {
		return
	}
	a.pushChanges(written)
}
