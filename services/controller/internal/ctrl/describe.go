package ctrl

import (
	"context"
	"maps"
	"slices"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
)

// DescribeTopics lists topics and their partitions. With health filters set
// only the partitions matching any of them are listed, and topics without
// such partitions are left out (kafka-topics --describe
// --under-replicated-partitions and friends).
//
// Listing all topics answers them in name order, a page at a time when the
// request asks for one (page_size, page_token).
func (a *Active) DescribeTopics(ctx context.Context, req *adminv1.DescribeTopicsRequest) (*adminv1.DescribeTopicsResponse, error) {
	pg, err := paging.ParseUnlessNamed(len(req.GetTopics()) > 0, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	cur := paging.NewCursor(ctx, pg)
	resp := &adminv1.DescribeTopicsResponse{}
	err = a.call(ctx, func() error { resp = a.describeTopics(req, pg, cur); return nil })
	if err != nil {
		return nil, err // the loop may still be writing resp (call's ctx ended)
	}
	return resp, nil
}

func (a *Active) describeTopics(req *adminv1.DescribeTopicsRequest, pg paging.Request, cur *paging.Cursor) *adminv1.DescribeTopicsResponse {
	filtered := req.GetUnderReplicated() || req.GetAtMinIsr() || req.GetUnderMinIsr() || req.GetUnavailable()
	names := req.GetTopics()
	if len(names) == 0 {
		names = pg.From(slices.Sorted(maps.Keys(a.topics)))
	}
	resp := &adminv1.DescribeTopicsResponse{}
	for _, name := range names {
		if cur.Skip(name) {
			continue
		}
		t := a.topics[name]
		if t == nil {
			resp.Topics = append(resp.Topics, &adminv1.TopicDescription{Name: name,
				ErrorCode:    commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
				ErrorMessage: kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", name).Message})
			continue
		}
		td := &adminv1.TopicDescription{Name: name, TopicId: t.id}
		if len(t.parts) > 0 {
			td.ReplicationFactor = int32(len(t.parts[0].replicas))
		}
		minISR := a.topicConfig(t).MinInsyncReplicas
		for _, p := range t.parts {
			pd := a.describePartition(p, minISR)
			h := a.health(p, minISR)
			if filtered && !(req.GetUnderReplicated() && h.underReplicated || req.GetAtMinIsr() && h.atMinISR ||
				req.GetUnderMinIsr() && h.underMinISR || req.GetUnavailable() && h.offline) {
				continue
			}
			td.Partitions = append(td.Partitions, pd)
		}
		if filtered && len(td.Partitions) == 0 {
			continue
		}
		if !cur.Take(name) {
			break
		}
		if req.GetIncludeConfigs() {
			td.Configs = a.topicConfigMap(t, -1)
		}
		resp.Topics = append(resp.Topics, td)
	}
	resp.NextPageToken = cur.Next()
	return resp
}

func (a *Active) describePartition(p *partition, minISR int32) *adminv1.PartitionDescription {
	s := p.rec.State
	pd := &adminv1.PartitionDescription{Partition: p.id, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
		PartitionEpoch: s.PartitionEpoch, Replicas: slices.Clone([]int32(p.replicas)), Isr: slices.Clone(s.ISR),
		MinInsyncReplicas: minISR, AddingReplicas: slices.Clone(p.adding), RemovingReplicas: slices.Clone(p.removing)}
	if !p.hasState() {
		pd.Leader = -1
	}
	for _, r := range p.replicas {
		if !a.registered(r) || a.replicaOffline(p, r) {
			pd.OfflineReplicas = append(pd.OfflineReplicas, r)
		}
	}
	return pd
}

// health is a partition's standing against the DescribeTopics filters.
type health struct {
	underReplicated, atMinISR, underMinISR, offline bool
}

func (a *Active) health(p *partition, minISR int32) health {
	isr := int32(len(p.rec.State.ISR))
	return health{
		// Kafka's replication factor during a move leaves the adding
		// replicas out (OngoingReassignmentState.replicationFactor).
		underReplicated: isr < int32(len(p.replicas)-len(p.adding)),
		atMinISR:        isr == minISR,
		underMinISR:     isr < minISR,
		offline:         !p.hasState() || a.offline(p),
	}
}

// DescribeCluster names the brokers (live ones, and dead ones that hold
// replicas), the controllers and the active one.
func (a *Active) DescribeCluster(ctx context.Context, _ *adminv1.DescribeClusterRequest) (*adminv1.DescribeClusterResponse, error) {
	var resp *adminv1.DescribeClusterResponse
	err := a.call(ctx, func() error { resp = a.describeCluster(); return nil })
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (a *Active) describeCluster() *adminv1.DescribeClusterResponse {
	resp := &adminv1.DescribeClusterResponse{ClusterId: a.clusterID, Controller: a.self, ControllerEpoch: a.epoch}
	ctrls := maps.Clone(a.controllers)
	if _, ok := ctrls[a.self.Id]; !ok {
		resp.Controllers = append(resp.Controllers, &adminv1.ControllerInfo{Node: a.self, Active: true})
	}
	for _, id := range slices.Sorted(maps.Keys(ctrls)) {
		n := ctrls[id]
		resp.Controllers = append(resp.Controllers, &adminv1.ControllerInfo{
			Node: &commonv1.Node{Id: n.ID, Address: n.Address}, Active: id == a.self.Id})
	}
	leaders, replicas := map[int32]int32{}, map[int32]int32{}
	ids := map[int32]bool{}
	for id := range a.brokers {
		ids[id] = true
	}
	for _, t := range a.topics {
		for _, p := range t.parts {
			for _, r := range p.replicas {
				replicas[r]++
				ids[r] = true
			}
			if p.hasState() && p.rec.State.Leader >= 0 {
				leaders[p.rec.State.Leader]++
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		bi := &adminv1.BrokerInfo{Node: a.node(id), LeaderCount: leaders[id], ReplicaCount: replicas[id]}
		if b := a.brokers[id]; b != nil {
			bi.Alive, bi.BrokerEpoch, bi.ShuttingDown = true, b.info.Epoch, b.shuttingDown
			for _, d := range a.offlineDirsOf(id) {
				bi.OfflineLogDirs = append(bi.OfflineLogDirs, &adminv1.OfflineLogDir{Path: d.GetPath(), Error: d.GetError(), Replicas: int32(len(d.GetPartitions()))})
			}
		}
		resp.Brokers = append(resp.Brokers, bi)
	}
	return resp
}
