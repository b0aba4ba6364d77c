package kafkaapi

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// Controller-only requests (topics, configs, elections) are forwarded to the
// active controller's AdminService by this broker, speaking for the Kafka
// client's principal (identity.Forward): the controller authorizes the
// client, not the broker, with the same ACLs as a gRPC caller, and does the
// work in its one implementation. A controller that cannot be reached, or a
// standby, gives each item NOT_CONTROLLER or the transport's code, which
// Kafka's admin clients retry.

// forwardTimeout bounds one forwarded call: the wait the request asks for
// plus the request timeout the gateway uses for one attempt.
func forwardTimeout(askedMs int32) time.Duration {
	return time.Duration(max(askedMs, 0))*time.Millisecond + 5*time.Second
}

func (s *Server) admin(ctx context.Context, askedMs int32) (adminv1.AdminServiceClient, context.Context, context.CancelFunc, error) {
	return s.adminFor(ctx, forwardTimeout(askedMs))
}

// adminFor is admin with the forwarded call bounded by d. A client with no
// identity (a PLAINTEXT listener) is refused while authorization is on:
// forwarded without a principal to speak for, its call would reach the
// controller as this broker's own, which super.users or an ACL may allow.
func (s *Server) adminFor(ctx context.Context, d time.Duration) (adminv1.AdminServiceClient, context.Context, context.CancelFunc, error) {
	p := identity.FromContext(ctx)
	if p.Role == identity.Anonymous && s.opts.Authorizer != nil && s.opts.Authorizer.Enabled() {
		return nil, nil, nil, kerr.New(kerr.ClusterAuthorizationFailed,
			"a client with no identity (a PLAINTEXT listener) may not change the cluster while authorization is on: connect with SASL or TLS")
	}
	if p.Role != identity.Anonymous {
		ctx = identity.ForwardFrom(ctx, p.Name, authz.ClientHost(ctx))
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	cli, err := s.opts.Admin(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return cli, ctx, cancel, nil
}

// handleCreateTopics forwards CreateTopics. -1 partitions or replication
// factor mean the cluster's defaults, as 0 does in tidemark's request; any
// other count below 1 is refused here, as Kafka does, not taken as the
// default, and so is a topic with a config of null value (checkTopic).
func (s *Server) handleCreateTopics(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	arrived := time.Now()
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	greq := &adminv1.CreateTopicsRequest{ValidateOnly: req.ValidateOnly, TimeoutMs: req.TimeoutMillis}
	var refused []kmsg.CreateTopicsResponseTopic
	forwarded := req.Topics[:0:0]
	for _, t := range req.Topics {
		if err := checkTopic(t); err != nil {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code(err), message(err)
			refused = append(refused, rt)
			continue
		}
		forwarded = append(forwarded, t)
		spec := &adminv1.TopicSpec{Name: t.Topic, NumPartitions: max(t.NumPartitions, 0), ReplicationFactor: int32(max(t.ReplicationFactor, 0))}
		for _, a := range t.ReplicaAssignment {
			spec.Assignments = append(spec.Assignments, &adminv1.ReplicaAssignment{Partition: a.Partition, Replicas: a.Replicas})
		}
		for _, c := range t.Configs {
			if spec.Configs == nil {
				spec.Configs = map[string]string{}
			}
			spec.Configs[c.Name] = *c.Value // checkTopic refused a null one
		}
		greq.Topics = append(greq.Topics, spec)
	}
	resp.Topics = refused
	if len(greq.Topics) == 0 {
		return resp
	}
	fail := func(err error) kmsg.Response {
		for _, t := range forwarded {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code(err), message(err)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	cli, fctx, cancel, err := s.admin(ctx, req.TimeoutMillis)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	gresp, err := cli.CreateTopics(fctx, greq)
	if err != nil {
		return fail(err)
	}
	meta := s.opts.RM.Meta()
	// timeout_ms counts from the request's arrival, the controller's part
	// included (the forwarded call has more, for the way there).
	announced, stopWaiting := context.WithDeadline(ctx, arrived.Add(time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond))
	defer stopWaiting()
	for _, r := range gresp.GetResults() {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = r.GetName(), protoCode(r.GetErrorCode()), optMessage(r.GetErrorMessage())
		// As Kafka's broker, answer a created topic once this broker's
		// metadata has it led, within timeout_ms: a client asking this
		// broker next finds it (and the answer carries its id).
		if rt.ErrorCode == 0 && !req.ValidateOnly && req.TimeoutMillis > 0 &&
			!meta.WaitAnnounced(announced, r.GetName(), r.GetNumPartitions()) {
			rt.ErrorCode = int16(kerr.RequestTimedOut)
			rt.ErrorMessage = optMessage(fmt.Sprintf("topic %s was created, but this broker did not learn its partition leaders within timeout_ms %d", r.GetName(), req.TimeoutMillis))
		}
		rt.TopicID = topicUUID(meta.TopicID(r.GetName()))
		if rt.ErrorCode == 0 {
			rt.NumPartitions, rt.ReplicationFactor = r.GetNumPartitions(), int16(r.GetReplicationFactor())
			for k, v := range r.GetConfigs() {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name, c.Value, c.Source = k, &v, -1 // UNKNOWN: the answer does not say which are overrides (DescribeConfigs does)
				rt.Configs = append(rt.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// checkTopic refuses what Kafka refuses in a topic to create before it
// is forwarded: counts other than -1 (the cluster's default) below 1
// (INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR), and a config with a
// null value (INVALID_CONFIG naming the key; dropping it created the topic
// without the setting the client asked for).
func checkTopic(t kmsg.CreateTopicsRequestTopic) error {
	for _, c := range t.Configs {
		if c.Value == nil {
			return kerr.New(kerr.InvalidConfig, "Null value not supported for topic configs: %s", c.Name)
		}
	}
	if n := t.NumPartitions; n != -1 && n < 1 {
		return kerr.BadField(kerr.InvalidPartitions, "num_partitions", "%d is not a partition count: -1 for the default or at least 1", n)
	}
	if n := t.ReplicationFactor; n != -1 && n < 1 {
		return kerr.BadField(kerr.InvalidReplicationFactor, "replication_factor", "%d is not a replication factor: -1 for the default or at least 1", n)
	}
	return nil
}

// handleDeleteTopics forwards DeleteTopics (by name; ids from v6 on are not
// advertised).
func (s *Server) handleDeleteTopics(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	greq := &adminv1.DeleteTopicsRequest{Topics: req.TopicNames, TimeoutMs: req.TimeoutMillis}
	fail := func(err error) kmsg.Response {
		for _, t := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			name := t
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = &name, code(err), message(err)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	cli, fctx, cancel, err := s.admin(ctx, req.TimeoutMillis)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	gresp, err := cli.DeleteTopics(fctx, greq)
	if err != nil {
		return fail(err)
	}
	for _, r := range gresp.GetResults() {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		name := r.GetName()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = &name, protoCode(r.GetErrorCode()), optMessage(r.GetErrorMessage())
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// handleElectLeaders forwards a preferred or unclean election (KIP-460).
func (s *Server) handleElectLeaders(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	greq := &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED, TimeoutMs: req.TimeoutMillis}
	var err error
	switch req.ElectionType {
	case 0:
	case 1:
		greq.ElectionType = adminv1.ElectionType_ELECTION_TYPE_UNCLEAN
	default:
		// Kafka refuses a type it does not know; running a preferred
		// election instead would do what nobody asked.
		err = kerr.New(kerr.InvalidRequest, "election type %d: 0 (preferred) or 1 (unclean)", req.ElectionType)
	}
	if req.Topics == nil {
		greq.AllPartitions = true
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			greq.Partitions = append(greq.Partitions, &commonv1.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	var cli adminv1.AdminServiceClient
	var fctx context.Context
	var cancel context.CancelFunc
	if err == nil {
		cli, fctx, cancel, err = s.admin(ctx, req.TimeoutMillis)
	}
	if err == nil {
		defer cancel()
		var gresp *adminv1.ElectLeadersResponse
		if gresp, err = cli.ElectLeaders(fctx, greq); err == nil {
			byTopic := map[string]int{}
			for _, r := range gresp.GetResults() {
				i, ok := byTopic[r.GetTopic()]
				if !ok {
					rt := kmsg.NewElectLeadersResponseTopic()
					rt.Topic = r.GetTopic()
					resp.Topics = append(resp.Topics, rt)
					i = len(resp.Topics) - 1
					byTopic[r.GetTopic()] = i
				}
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = r.GetPartition(), protoCode(r.GetErrorCode()), optMessage(r.GetErrorMessage())
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
			}
			return resp
		}
	}
	if req.Version >= 1 {
		resp.ErrorCode = code(err)
		return resp
	}
	for _, t := range req.Topics { // v0 has no top-level code
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code(err), message(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// handleCreatePartitions forwards CreatePartitions (kafka-topics.sh
// --alter --partitions, kadm's CreatePartitions): each topic's new total
// count, optionally the replicas of each new partition in order.
func (s *Server) handleCreatePartitions(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	greq := &adminv1.CreatePartitionsRequest{ValidateOnly: req.ValidateOnly, TimeoutMs: req.TimeoutMillis}
	for _, t := range req.Topics {
		gt := &adminv1.CreatePartitionsTopic{Name: t.Topic, Count: t.Count}
		for i, a := range t.Assignment {
			gt.Assignments = append(gt.Assignments, &adminv1.ReplicaAssignment{Partition: int32(i), Replicas: a.Replicas})
		}
		greq.Topics = append(greq.Topics, gt)
	}
	fail := func(err error) kmsg.Response {
		for _, t := range req.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code(err), message(err)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	cli, fctx, cancel, err := s.admin(ctx, req.TimeoutMillis)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	gresp, err := cli.CreatePartitions(fctx, greq)
	if err != nil {
		return fail(err)
	}
	for _, r := range gresp.GetResults() {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = r.GetName(), protoCode(r.GetErrorCode()), optMessage(r.GetErrorMessage())
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
