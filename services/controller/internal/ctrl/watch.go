package ctrl

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// minWatchGap spaces out WatchCluster messages under a burst of changes.
const minWatchGap = 50 * time.Millisecond

// WatchCluster streams the cluster's state: a snapshot with the recent
// events first, then one after every change (at most every minWatchGap) and
// at least every interval_ms, each with the events since the previous one.
func (a *Active) WatchCluster(ctx context.Context, req *adminv1.WatchClusterRequest, send func(*adminv1.WatchClusterResponse) error) error {
	interval := time.Duration(req.GetIntervalMs()) * time.Millisecond
	if interval <= 0 {
		interval = time.Second
	}
	interval = max(interval, minWatchGap)
	filter := map[string]bool{}
	for _, t := range req.GetTopics() {
		filter[t] = true
	}
	sub := &subscriber{ch: make(chan struct{}, 1)}
	if err := a.callOrUndo(ctx, func() error { a.subs[sub] = struct{}{}; return nil },
		func() { delete(a.subs, sub) }); err != nil {
		return err
	}
	defer a.post(func() { delete(a.subs, sub) })
	var seq uint64
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		var msg *adminv1.WatchClusterResponse
		if err := a.call(ctx, func() error { msg, seq = a.snapshot(filter, seq); return nil }); err != nil {
			return err
		}
		if err := send(msg); err != nil {
			return err
		}
		select {
		case <-sub.ch:
		case <-tick.C:
		case <-ctx.Done():
			return nil
		case <-a.quit:
			return a.notController()
		}
		select {
		case <-time.After(minWatchGap):
		case <-ctx.Done():
			return nil
		}
	}
}

// snapshot builds one WatchCluster message with the events after seq.
func (a *Active) snapshot(filter map[string]bool, seq uint64) (*adminv1.WatchClusterResponse, uint64) {
	msg := &adminv1.WatchClusterResponse{Time: time.Now().UnixMilli(), Cluster: a.describeCluster()}
	msg.Events, seq = a.ring.since(seq)
	for _, t := range a.sortedTopics() {
		if len(filter) > 0 && !filter[t.name] {
			continue
		}
		minISR := a.topicConfig(t).MinInsyncReplicas
		for _, p := range t.parts {
			msg.Partitions = append(msg.Partitions, a.partitionView(p, minISR))
		}
	}
	return msg, seq
}

func (a *Active) partitionView(p *partition, minISR int32) *adminv1.PartitionView {
	pd := a.describePartition(p, minISR)
	h := a.health(p, minISR)
	v := &adminv1.PartitionView{Topic: p.t.name, Partition: p.id, Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch,
		PartitionEpoch: pd.PartitionEpoch, Replicas: pd.Replicas, Isr: pd.Isr, MinInsyncReplicas: minISR,
		UnderReplicated: h.underReplicated, AtMinIsr: h.atMinISR, UnderMinIsr: h.underMinISR, Offline: h.offline,
		AddingReplicas: pd.AddingReplicas, RemovingReplicas: pd.RemovingReplicas}
	leader := p.rec.State.Leader
	lp := a.progressOf(p, leader)
	if lp != nil {
		v.HighWatermark, v.HighWatermarkKnown = lp.GetHighWatermark(), true
	}
	for _, r := range p.replicas {
		rv := &adminv1.ReplicaView{BrokerId: r, Alive: a.registered(r), InIsr: p.state().InISR(r), Leader: r == leader}
		if rp := a.progressOf(p, r); rp != nil {
			rv.LogEndOffset, rv.HighWatermark, rv.LogStartOffset = rp.GetLogEndOffset(), rp.GetHighWatermark(), rp.GetLogStartOffset()
			rv.Reported = true
		}
		if lp != nil && r != leader {
			for _, f := range lp.GetFollowers() {
				if f.GetBrokerId() == r {
					rv.LagMs = f.GetLagMs()
					// Below 0: the leader has had no fetch from it yet.
					if f.GetLogEndOffset() >= 0 {
						rv.LeaderKnownLogEndOffset = proto.Int64(f.GetLogEndOffset())
					}
				}
			}
		}
		v.ReplicaViews = append(v.ReplicaViews, rv)
	}
	return v
}
