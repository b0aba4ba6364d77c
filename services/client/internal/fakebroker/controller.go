package fakebroker

import (
	"cmp"
	"context"
	"slices"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// adminService is one controller's AdminService. Only the active one
// answers; the others say NOT_CONTROLLER, naming the active one.
type adminService struct {
	adminv1.UnimplementedAdminServiceServer
	c     *Cluster
	n     *node
	index int
}

var _ adminv1.AdminServiceServer = (*adminService)(nil)

// enter counts the call, applies faults, and refuses it on a standby. On
// success it returns with c.mu held.
func (s *adminService) enter(ctx context.Context, method string) error {
	if f := s.c.intercept(ctx, s.n, method, "", -1); f != nil {
		return kerr.New(f.Code, "injected by the test on controller %d", s.n.id)
	}
	s.c.mu.Lock()
	if s.c.active == s.index {
		return nil
	}
	defer s.c.mu.Unlock()
	e := kerr.New(kerr.NotController, "controller %d is not active", s.n.id)
	if !s.c.noCtlHints {
		a := s.c.controllers[s.c.active]
		e.Controller = &kerr.NodeHint{ID: a.id, Address: a.addr}
	}
	return e
}

func code(e *kerr.Error) commonv1.ErrorCode {
	if e == nil {
		return commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED
	}
	return commonv1.ErrorCode(e.Code)
}

func (s *adminService) CreateTopics(ctx context.Context, req *adminv1.CreateTopicsRequest) (*adminv1.CreateTopicsResponse, error) {
	if err := s.enter(ctx, "CreateTopics"); err != nil {
		return nil, err
	}
	c := s.c
	defer c.mu.Unlock()
	resp := &adminv1.CreateTopicsResponse{}
	for _, spec := range req.GetTopics() {
		r := &adminv1.CreateTopicResult{Name: spec.GetName()}
		parts, rf := int(spec.GetNumPartitions()), int(spec.GetReplicationFactor())
		if parts == 0 {
			parts = 1
		}
		if rf == 0 {
			rf = min(3, len(c.brokers))
		}
		var e *kerr.Error
		switch {
		case c.topics[spec.GetName()] != nil:
			e = kerr.New(kerr.TopicAlreadyExists, "topic %q already exists", spec.GetName())
		case rf > len(c.brokers):
			e = kerr.New(kerr.InvalidReplicationFactor, "replication factor %d is larger than %d brokers", rf, len(c.brokers))
		case parts < 0:
			e = kerr.New(kerr.InvalidPartitions, "%d partitions", parts)
		}
		if e != nil {
			r.ErrorCode, r.ErrorMessage = code(e), e.Message
		} else if !req.GetValidateOnly() {
			n := len(c.brokers)
			c.createTopicLocked(spec.GetName(), parts, func(p int) []int32 {
				out := make([]int32, rf)
				for j := range out {
					out[j] = int32((p+j)%n + 1)
				}
				return out
			})
			c.topics[spec.GetName()].configs = spec.GetConfigs()
			r.NumPartitions, r.ReplicationFactor = int32(parts), int32(rf)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (s *adminService) DeleteTopics(ctx context.Context, req *adminv1.DeleteTopicsRequest) (*adminv1.DeleteTopicsResponse, error) {
	if err := s.enter(ctx, "DeleteTopics"); err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	resp := &adminv1.DeleteTopicsResponse{}
	for _, name := range req.GetTopics() {
		r := &adminv1.DeleteTopicResult{Name: name}
		if _, ok := s.c.topics[name]; !ok {
			r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "no topic "+name
		} else {
			s.c.deleteTopicLocked(name)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (s *adminService) DescribeTopics(ctx context.Context, req *adminv1.DescribeTopicsRequest) (*adminv1.DescribeTopicsResponse, error) {
	if err := s.enter(ctx, "DescribeTopics"); err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	resp := &adminv1.DescribeTopicsResponse{}
	for _, name := range s.c.topicNamesLocked(req.GetTopics()) {
		td := &adminv1.TopicDescription{Name: name}
		t, ok := s.c.topics[name]
		if !ok {
			td.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			resp.Topics = append(resp.Topics, td)
			continue
		}
		td.TopicId = t.id
		for i, p := range t.parts {
			offline := p.leader <= 0 || s.c.brokers[p.leader-1].down
			if req.GetUnavailable() && !offline {
				continue
			}
			td.Partitions = append(td.Partitions, &adminv1.PartitionDescription{
				Partition: int32(i), Leader: p.leader, LeaderEpoch: p.epoch,
				Replicas: slices.Clone(p.replicas), Isr: slices.Clone(p.replicas),
			})
		}
		td.ReplicationFactor = int32(len(t.parts[0].replicas))
		if req.GetIncludeConfigs() {
			td.Configs = t.configs
		}
		resp.Topics = append(resp.Topics, td)
	}
	return resp, nil
}

func (c *Cluster) topicNamesLocked(asked []string) []string {
	if len(asked) > 0 {
		return asked
	}
	var out []string
	for n := range c.topics {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (s *adminService) DescribeCluster(ctx context.Context, _ *adminv1.DescribeClusterRequest) (*adminv1.DescribeClusterResponse, error) {
	if err := s.enter(ctx, "DescribeCluster"); err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	return s.c.describeLocked(), nil
}

func (c *Cluster) describeLocked() *adminv1.DescribeClusterResponse {
	a := c.controllers[c.active]
	resp := &adminv1.DescribeClusterResponse{ClusterId: "fake", Controller: &commonv1.Node{Id: a.id, Address: a.addr}}
	for i, n := range c.controllers {
		resp.Controllers = append(resp.Controllers, &adminv1.ControllerInfo{Node: &commonv1.Node{Id: n.id, Address: n.addr}, Active: i == c.active})
	}
	for _, b := range c.brokers {
		resp.Brokers = append(resp.Brokers, &adminv1.BrokerInfo{Node: &commonv1.Node{Id: b.id, Address: b.addr, Rack: b.rack}, Alive: !b.down})
	}
	return resp
}

func (s *adminService) DescribeConfigs(ctx context.Context, req *adminv1.DescribeConfigsRequest) (*adminv1.DescribeConfigsResponse, error) {
	if err := s.enter(ctx, "DescribeConfigs"); err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	resp := &adminv1.DescribeConfigsResponse{}
	for _, r := range req.GetResources() {
		d := &adminv1.ConfigDescription{Resource: r}
		if t, ok := s.c.topics[r.GetName()]; ok && r.GetType() == adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC {
			for k, v := range t.configs {
				d.Entries = append(d.Entries, &adminv1.ConfigEntry{Name: k, Value: v, Source: adminv1.ConfigSource_CONFIG_SOURCE_TOPIC})
			}
			slices.SortFunc(d.Entries, func(a, b *adminv1.ConfigEntry) int { return cmp.Compare(a.GetName(), b.GetName()) })
		} else {
			d.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		}
		resp.Results = append(resp.Results, d)
	}
	return resp, nil
}

func (s *adminService) AlterConfigs(ctx context.Context, req *adminv1.AlterConfigsRequest) (*adminv1.AlterConfigsResponse, error) {
	if err := s.enter(ctx, "AlterConfigs"); err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	resp := &adminv1.AlterConfigsResponse{}
	for _, r := range req.GetResources() {
		res := &adminv1.AlterConfigsResult{Resource: r.GetResource()}
		t, ok := s.c.topics[r.GetResource().GetName()]
		if !ok {
			res.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		} else if !req.GetValidateOnly() {
			if t.configs == nil {
				t.configs = map[string]string{}
			}
			for _, op := range r.GetOps() {
				if op.GetOp() == adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE {
					delete(t.configs, op.GetName())
				} else {
					t.configs[op.GetName()] = op.GetValue()
				}
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func (s *adminService) ElectLeaders(ctx context.Context, req *adminv1.ElectLeadersRequest) (*adminv1.ElectLeadersResponse, error) {
	if err := s.enter(ctx, "ElectLeaders"); err != nil {
		return nil, err
	}
	defer s.c.mu.Unlock()
	resp := &adminv1.ElectLeadersResponse{}
	for _, tp := range req.GetPartitions() {
		r := &adminv1.ElectLeadersResult{Topic: tp.GetTopic(), Partition: tp.GetPartition()}
		p, err := s.c.partLocked(tp.GetTopic(), tp.GetPartition())
		switch {
		case err != nil:
			r.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		case p.leader == p.replicas[0]:
			r.ErrorCode = commonv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED
		default:
			p.leader = p.replicas[0]
			p.epoch++
			p.notifyLocked()
		}
		if p != nil {
			r.Leader, r.LeaderEpoch = p.leader, p.epoch
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// WatchCluster sends a snapshot at once and then every interval, until the
// client goes or this controller stops being the active one.
func (s *adminService) WatchCluster(req *adminv1.WatchClusterRequest, stream adminv1.AdminService_WatchClusterServer) error {
	ctx := stream.Context()
	interval := time.Duration(req.GetIntervalMs()) * time.Millisecond
	if interval <= 0 {
		interval = time.Second
	}
	for {
		if err := s.enter(ctx, "WatchCluster"); err != nil {
			return err
		}
		msg := &adminv1.WatchClusterResponse{Time: time.Now().UnixMilli(), Cluster: s.c.describeLocked()}
		for _, name := range s.c.topicNamesLocked(req.GetTopics()) {
			if t, ok := s.c.topics[name]; ok {
				for i, p := range t.parts {
					msg.Partitions = append(msg.Partitions, &adminv1.PartitionView{
						Topic: name, Partition: int32(i), Leader: p.leader, LeaderEpoch: p.epoch,
						Replicas: slices.Clone(p.replicas), Isr: slices.Clone(p.replicas), HighWatermark: p.hw,
					})
				}
			}
		}
		s.c.mu.Unlock()
		if err := stream.Send(msg); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
