package authz

import (
	"strings"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// policy decides one gRPC method. check runs on the unary request, and on a
// stream once when it opens (req nil: only who may call at all) and again on
// every message received, because each message of a stream carries its own
// claims (a replica id, a broker id) that the first one does not vouch for.
type policy struct {
	// describe is the rule in words, for the refusal catalogue in DESIGN.md.
	describe string
	check    func(d decider, req any) error
	// filter, when set, trims a unary answer to req to what the caller may
	// see (listing every topic shows only those it may describe).
	filter func(d decider, req, resp any) any
	// shown, for a list answered in pages, is the names the caller sees
	// when req lists everything (nil: all, or req names what it wants), so
	// that a page is full of them and its token names none it may not
	// see (paging.WithVisible). filter still trims the answer. The
	// function it returns is called inside the handler, so it must not
	// wait: decide with settled. An error refuses the list: the names the
	// caller may see cannot be decided (the stored bindings did not load),
	// and an empty list would say there are none.
	shown func(d decider, req any) (func(name string) bool, error)
}

// openPrefixes are the services every caller may use: health checks (load
// balancers, the controller's liveness probe) and reflection (grpcurl).
var openPrefixes = []string{
	"/grpc.health.v1.Health/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

func isOpen(method string) bool {
	for _, p := range openPrefixes {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// policies is the one table: every method of every tidemark service, and
// nothing else. A method missing here is refused (and Covers fails the
// server's start), never allowed by default.
var policies = map[string]policy{
	// Control requests: only the controller that signs them. Who is active
	// is the broker's own business (controller epochs); the certificate
	// proves the request comes from a controller at all, and from the one
	// it names.
	controlv1.BrokerControlService_LeaderAndIsr_FullMethodName: controllerOnly("LeaderAndIsr", func(m any) int32 {
		return m.(*controlv1.LeaderAndIsrRequest).GetControllerId()
	}),
	controlv1.BrokerControlService_UpdateMetadata_FullMethodName: controllerOnly("UpdateMetadata", func(m any) int32 {
		return m.(*controlv1.UpdateMetadataRequest).GetControllerId()
	}),
	controlv1.BrokerControlService_StopReplica_FullMethodName: controllerOnly("StopReplica", func(m any) int32 {
		return m.(*controlv1.StopReplicaRequest).GetControllerId()
	}),
	controlv1.BrokerControlService_YieldLeadership_FullMethodName: controllerOnly("YieldLeadership", func(m any) int32 {
		return m.(*controlv1.YieldLeadershipRequest).GetControllerId()
	}),

	// Replication: a follower only as itself; replica_id < 0 is a
	// consumer-style read governed by topic ACLs.
	replicationv1.ReplicationService_ReplicaFetch_FullMethodName: {
		describe: "replica_id >= 0: broker-N with N = replica_id, on every message; replica_id < 0: Read on each topic",
		check: func(d decider, m any) error {
			if m == nil {
				return d.authenticated()
			}
			req := m.(*replicationv1.ReplicaFetchRequest)
			if req.GetReplicaId() >= 0 {
				return d.asReplica("fetch", req.GetReplicaId())
			}
			for _, p := range req.GetPartitions() {
				if err := d.need(Read, TopicNamed(p.GetTopic())); err != nil {
					return err
				}
			}
			return nil
		},
	},
	replicationv1.ReplicationService_OffsetForLeaderEpoch_FullMethodName: {
		describe: "replica_id >= 0: broker-N with N = replica_id; replica_id < 0: Describe on each topic",
		check: func(d decider, m any) error {
			req := m.(*replicationv1.OffsetForLeaderEpochRequest)
			if req.GetReplicaId() >= 0 {
				return d.asReplica("ask leader epochs", req.GetReplicaId())
			}
			for _, p := range req.GetPartitions() {
				if err := d.need(Describe, TopicNamed(p.GetTopic())); err != nil {
					return err
				}
			}
			return nil
		},
	},

	// A broker's requests to the controller: only as itself.
	controlv1.ControllerService_BrokerSession_FullMethodName: {
		describe: "broker-N with N = broker_id, on every message",
		check: func(d decider, m any) error {
			if m == nil {
				return d.anyBroker("open a broker session")
			}
			return d.asBroker("BrokerSession", m.(*controlv1.BrokerSessionRequest).GetBrokerId())
		},
	},
	controlv1.ControllerService_AlterPartition_FullMethodName: brokerOnly("AlterPartition", func(m any) int32 {
		return m.(*controlv1.AlterPartitionRequest).GetBrokerId()
	}),
	controlv1.ControllerService_ControlledShutdown_FullMethodName: brokerOnly("ControlledShutdown", func(m any) int32 {
		return m.(*controlv1.ControlledShutdownRequest).GetBrokerId()
	}),
	controlv1.ControllerService_AllocateProducerIds_FullMethodName: brokerOnly("AllocateProducerIds", func(m any) int32 {
		return m.(*controlv1.AllocateProducerIdsRequest).GetBrokerId()
	}),
	controlv1.ControllerService_CreateOffsetsTopic_FullMethodName: brokerOnly("CreateOffsetsTopic", func(m any) int32 {
		return m.(*controlv1.CreateOffsetsTopicRequest).GetBrokerId()
	}),

	// Admin: by ACL.
	adminv1.AdminService_CreateTopics_FullMethodName: {
		describe: "Create on each Topic:NAME (or Create on Cluster)",
		check: func(d decider, m any) error {
			if d.allowed(Create, TheCluster) {
				return nil
			}
			for _, t := range m.(*adminv1.CreateTopicsRequest).GetTopics() {
				if err := d.need(Create, TopicNamed(t.GetName())); err != nil {
					return err
				}
			}
			return nil
		},
	},
	adminv1.AdminService_DeleteTopics_FullMethodName: {
		describe: "Delete on each Topic:NAME",
		check: func(d decider, m any) error {
			for _, t := range m.(*adminv1.DeleteTopicsRequest).GetTopics() {
				if err := d.need(Delete, TopicNamed(t)); err != nil {
					return err
				}
			}
			return nil
		},
	},
	adminv1.AdminService_DescribeTopics_FullMethodName: {
		describe: "any authenticated caller; a named Topic it may not Describe is answered TOPIC_AUTHORIZATION_FAILED alone, and listing all shows only the topics it may Describe",
		check:    func(d decider, _ any) error { return d.authenticated() },
		shown: func(d decider, req any) (func(string) bool, error) {
			return topicsShown(d, len(req.(*adminv1.DescribeTopicsRequest).GetTopics()) > 0)
		},
		filter: func(d decider, req, resp any) any {
			r := resp.(*adminv1.DescribeTopicsResponse)
			named := req.(*adminv1.DescribeTopicsRequest).GetTopics()
			kept := r.Topics[:0]
			answered := map[string]bool{}
			for _, t := range r.Topics {
				switch err := d.need(Describe, TopicNamed(t.GetName())); {
				case err == nil:
					kept = append(kept, t)
				case len(named) > 0:
					kept = append(kept, refusedTopic(t.GetName(), err))
				}
				answered[t.GetName()] = true
			}
			// A named topic the health filters left out is still
			// answered refused: the caller asked for it by name.
			for _, name := range named {
				if err := d.need(Describe, TopicNamed(name)); err != nil && !answered[name] {
					kept = append(kept, refusedTopic(name, err))
					answered[name] = true
				}
			}
			r.Topics = kept
			return r
		},
	},
	adminv1.AdminService_DescribeCluster_FullMethodName: clusterACL(Describe),
	adminv1.AdminService_WatchCluster_FullMethodName:    clusterACL(Describe),
	adminv1.AdminService_ElectLeaders_FullMethodName:    clusterACL(Alter),
	// Kafka: AlterPartitionReassignments needs ALTER on the cluster,
	// ListPartitionReassignments DESCRIBE on the cluster.
	adminv1.AdminService_AlterPartitionReassignments_FullMethodName: clusterACL(Alter),
	adminv1.AdminService_ListPartitionReassignments_FullMethodName:  clusterACL(Describe),
	// Kafka: DescribeAcls needs Describe on the cluster, CreateAcls and
	// DeleteAcls Alter on the cluster.
	adminv1.AdminService_DescribeAcls_FullMethodName: clusterACL(Describe),
	adminv1.AdminService_CreateAcls_FullMethodName:   clusterACL(Alter),
	adminv1.AdminService_DeleteAcls_FullMethodName:   clusterACL(Alter),
	// Kafka: DescribeUserScramCredentials needs DESCRIBE on the cluster,
	// AlterUserScramCredentials ALTER on the cluster.
	adminv1.AdminService_DescribeUserScramCredentials_FullMethodName: clusterACL(Describe),
	adminv1.AdminService_AlterUserScramCredentials_FullMethodName:    clusterACL(Alter),
	// Kafka: DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster,
	// AlterClientQuotas ALTER_CONFIGS on the cluster.
	adminv1.AdminService_DescribeClientQuotas_FullMethodName: clusterACL(DescribeConfigs),
	adminv1.AdminService_AlterClientQuotas_FullMethodName:    clusterACL(AlterConfigs),
	adminv1.AdminService_CreatePartitions_FullMethodName: {
		describe: "Alter on each Topic:NAME (Kafka's CreatePartitions)",
		check: func(d decider, m any) error {
			for _, t := range m.(*adminv1.CreatePartitionsRequest).GetTopics() {
				if err := d.need(Alter, TopicNamed(t.GetName())); err != nil {
					return err
				}
			}
			return nil
		},
	},
	adminv1.AdminService_DescribeConfigs_FullMethodName: {
		describe: "DescribeConfigs on each Topic:NAME, or on Cluster for broker configs",
		check: func(d decider, m any) error {
			for _, r := range m.(*adminv1.DescribeConfigsRequest).GetResources() {
				if err := d.need(DescribeConfigs, configResource(r)); err != nil {
					return err
				}
			}
			return nil
		},
	},
	adminv1.AdminService_AlterConfigs_FullMethodName: {
		describe: "AlterConfigs on each Topic:NAME, or on Cluster for broker configs",
		check: func(d decider, m any) error {
			for _, r := range m.(*adminv1.AlterConfigsRequest).GetResources() {
				if err := d.need(AlterConfigs, configResource(r.GetResource())); err != nil {
					return err
				}
			}
			return nil
		},
	},

	// Clients of a broker.
	brokerv1.BrokerService_Produce_FullMethodName: topicACL(Write, func(m any) string {
		return m.(*brokerv1.ProduceRequest).GetTopic()
	}),
	// Each request of a produce stream is decided by the handler with the
	// Produce policy above (Authorizer.Authorize) and refused on its own
	// answer: one stream carries many topics, and refusing one message here
	// would end the stream and fail the others' writes with it.
	brokerv1.BrokerService_ProduceStream_FullMethodName: {
		describe: "any authenticated caller; each request as Produce, refused on its own answer",
		check:    func(d decider, _ any) error { return d.authenticated() },
	},
	brokerv1.BrokerService_Fetch_FullMethodName: topicACL(Read, func(m any) string {
		return m.(*brokerv1.FetchRequest).GetTopic()
	}),
	brokerv1.BrokerService_Follow_FullMethodName: topicACL(Read, func(m any) string {
		return m.(*brokerv1.FollowRequest).GetTopic()
	}),
	// A broker asks too: the group coordinator reads high watermarks and
	// log start offsets of partitions led elsewhere for the lag view and
	// offset resets (a broker already replicates every topic).
	brokerv1.BrokerService_ListOffsets_FullMethodName: {
		describe: "Describe on Topic:NAME, or any broker",
		check: func(d decider, m any) error {
			if d.p.Role == identity.Broker {
				return nil
			}
			if m == nil {
				return d.authenticated()
			}
			return d.need(Describe, TopicNamed(m.(*brokerv1.ListOffsetsRequest).GetTopic()))
		},
	},
	// Kafka's Metadata: listing every topic shows only those the caller
	// may Describe; a named one it may not is TOPIC_AUTHORIZATION_FAILED,
	// whether it exists or not, so the answer tells nothing of it.
	brokerv1.BrokerService_Metadata_FullMethodName: {
		describe: "any authenticated caller; all topics show only those it may Describe, a named one it may not is TOPIC_AUTHORIZATION_FAILED",
		check:    func(d decider, _ any) error { return d.authenticated() },
		shown: func(d decider, req any) (func(string) bool, error) {
			return topicsShown(d, len(req.(*brokerv1.MetadataRequest).GetTopics()) > 0)
		},
		filter: func(d decider, req, resp any) any {
			r := resp.(*brokerv1.MetadataResponse)
			all := len(req.(*brokerv1.MetadataRequest).GetTopics()) == 0
			kept := r.Topics[:0]
			for _, t := range r.Topics {
				switch {
				case d.allowed(Describe, TopicNamed(t.GetName())):
					kept = append(kept, t)
				case !all:
					refused := d.refuse(Describe, TopicNamed(t.GetName()))
					kept = append(kept, &brokerv1.TopicMetadata{Name: t.GetName(), ErrorCode: commonv1.ErrorCode(kerr.TopicAuthorizationFailed),
						ErrorMessage: kerr.As(refused).Message})
				}
			}
			r.Topics = kept
			return r
		},
	},
	// DeleteRecords: Delete on the topic (Kafka's).
	brokerv1.BrokerService_DeleteRecords_FullMethodName: topicACL(Delete, func(m any) string {
		return m.(*brokerv1.DeleteRecordsRequest).GetTopic()
	}),
	brokerv1.BrokerService_InitProducerId_FullMethodName: {
		describe: "IdempotentWrite on Cluster, or Write on some Topic",
		check: func(d decider, _ any) error {
			if d.allowed(IdempotentWrite, TheCluster) || d.allowedAny(Write, Topic) {
				return nil
			}
			return d.refuse(IdempotentWrite, TheCluster)
		},
	},

	// Consumer groups, as Kafka's ACLs: Read on the group to take part in
	// it or commit (and Read on each topic committed), Describe to look,
	// Delete to delete. FindCoordinator needs Describe on the group.
	groupv1.GroupService_FindCoordinator_FullMethodName: groupACL(Describe, func(m any) string {
		return m.(*groupv1.FindCoordinatorRequest).GetKey()
	}),
	groupv1.GroupService_JoinGroup_FullMethodName: groupACL(Read, func(m any) string {
		return m.(*groupv1.JoinGroupRequest).GetGroupId()
	}),
	groupv1.GroupService_SyncGroup_FullMethodName: groupACL(Read, func(m any) string {
		return m.(*groupv1.SyncGroupRequest).GetGroupId()
	}),
	groupv1.GroupService_Heartbeat_FullMethodName: groupACL(Read, func(m any) string {
		return m.(*groupv1.HeartbeatRequest).GetGroupId()
	}),
	groupv1.GroupService_LeaveGroup_FullMethodName: groupACL(Read, func(m any) string {
		return m.(*groupv1.LeaveGroupRequest).GetGroupId()
	}),
	groupv1.GroupService_OffsetCommit_FullMethodName: {
		describe: "Read on Group:ID and Read on each Topic committed",
		check: func(d decider, m any) error {
			req := m.(*groupv1.OffsetCommitRequest)
			return d.needGroupAndTopics(Read, req.GetGroupId(), topicNames(req.GetTopics(), (*groupv1.OffsetCommitTopic).GetName))
		},
	},
	groupv1.GroupService_OffsetFetch_FullMethodName: {
		describe: "Describe on Group:ID; a named Topic the caller may not Describe is answered TOPIC_AUTHORIZATION_FAILED alone, and all offsets show only the topics it may Describe",
		check: func(d decider, m any) error {
			return d.need(Describe, GroupNamed(m.(*groupv1.OffsetFetchRequest).GetGroupId()))
		},
		filter: func(d decider, req, resp any) any {
			r := resp.(*groupv1.OffsetFetchResponse)
			named := len(req.(*groupv1.OffsetFetchRequest).GetTopics()) > 0
			kept := r.Topics[:0]
			for _, t := range r.Topics {
				switch {
				case d.allowed(Describe, TopicNamed(t.GetName())):
					kept = append(kept, t)
				case named:
					kept = append(kept, refusedOffsets(t, req.(*groupv1.OffsetFetchRequest)))
				}
			}
			r.Topics = kept
			return r
		},
	},
	groupv1.GroupService_ListGroups_FullMethodName: {
		describe: "any authenticated caller; shows only the groups it may Describe (or all with Describe on Cluster)",
		check:    func(d decider, _ any) error { return d.authenticated() },
		shown: func(d decider, _ any) (func(string) bool, error) {
			may, err := d.settled("groups")
			if err != nil || may(Describe, TheCluster) {
				return nil, err
			}
			return func(id string) bool { return may(Describe, GroupNamed(id)) }, nil
		},
		filter: func(d decider, _, resp any) any {
			r := resp.(*groupv1.ListGroupsResponse)
			if d.allowed(Describe, TheCluster) {
				return r
			}
			kept := r.Groups[:0]
			for _, g := range r.Groups {
				if d.allowed(Describe, GroupNamed(g.GetGroupId())) {
					kept = append(kept, g)
				}
			}
			r.Groups = kept
			return r
		},
	},
	groupv1.GroupService_DescribeGroups_FullMethodName: {
		describe: "Describe on each Group:ID",
		check: func(d decider, m any) error {
			for _, g := range m.(*groupv1.DescribeGroupsRequest).GetGroupIds() {
				if err := d.need(Describe, GroupNamed(g)); err != nil {
					return err
				}
			}
			return nil
		},
	},
	groupv1.GroupService_DeleteGroups_FullMethodName: {
		describe: "Delete on each Group:ID",
		check: func(d decider, m any) error {
			for _, g := range m.(*groupv1.DeleteGroupsRequest).GetGroupIds() {
				if err := d.need(Delete, GroupNamed(g)); err != nil {
					return err
				}
			}
			return nil
		},
	},
	groupv1.GroupService_OffsetDelete_FullMethodName: {
		describe: "Delete on Group:ID and Read on each Topic named (as Kafka's OffsetDelete)",
		check: func(d decider, m any) error {
			req := m.(*groupv1.OffsetDeleteRequest)
			if err := d.need(Delete, GroupNamed(req.GetGroupId())); err != nil {
				return err
			}
			for _, t := range req.GetTopics() {
				if err := d.need(Read, TopicNamed(t.GetName())); err != nil {
					return err
				}
			}
			return nil
		},
	},
	groupv1.GroupService_ResetGroupOffsets_FullMethodName: {
		describe: "Read on Group:ID and Read on each Topic named (as an offset commit; Kafka's AlterConsumerGroupOffsets)",
		check: func(d decider, m any) error {
			req := m.(*groupv1.ResetGroupOffsetsRequest)
			return d.needGroupAndTopics(Read, req.GetGroupId(), topicNames(req.GetTopics(), (*groupv1.ResetGroupOffsetsTopic).GetName))
		},
	},
	groupv1.GroupService_DescribeGroupLag_FullMethodName: {
		describe: "Describe on Group:ID and Describe on each Topic named; rows show only topics the caller may Describe",
		check: func(d decider, m any) error {
			req := m.(*groupv1.DescribeGroupLagRequest)
			return d.needGroupAndTopics(Describe, req.GetGroupId(), req.GetTopics())
		},
		filter: func(d decider, _, resp any) any {
			r := resp.(*groupv1.DescribeGroupLagResponse)
			kept := r.Partitions[:0]
			for _, p := range r.Partitions {
				if d.allowed(Describe, TopicNamed(p.GetTopic())) {
					kept = append(kept, p)
				}
			}
			r.Partitions = kept
			return r
		},
	},

	// Fault injection: only on a broker started with it, and only for
	// callers allowed InjectFault.
	faultv1.FaultInjectionService_SetFetchFault_FullMethodName: faultPolicy(),
	faultv1.FaultInjectionService_ClearFaults_FullMethodName:   faultPolicy(),
	faultv1.FaultInjectionService_ListFaults_FullMethodName:    faultPolicy(),
	faultv1.FaultInjectionService_CutLink_FullMethodName:       faultPolicy(),
	faultv1.FaultInjectionService_HealLink_FullMethodName:      faultPolicy(),
	faultv1.FaultInjectionService_Isolate_FullMethodName:       faultPolicy(),
	faultv1.FaultInjectionService_HealIsolation_FullMethodName: faultPolicy(),

	// The dev cluster launcher's control API.
	devclusterv1.DevClusterService_ListNodes_FullMethodName:  clusterACL(Describe),
	devclusterv1.DevClusterService_NodeAction_FullMethodName: clusterACL(Alter),
	// Listing the scenarios shows nothing of the cluster, but a run kills
	// and pauses nodes as NodeAction does.
	devclusterv1.DevClusterService_ListScenarios_FullMethodName: clusterACL(Describe),
	devclusterv1.DevClusterService_RunScenario_FullMethodName:   clusterACL(Alter),
	// Holding the launcher's scenario slot keeps the console from running one.
	devclusterv1.DevClusterService_HoldScenario_FullMethodName: clusterACL(Alter),
}

func controllerOnly(what string, id func(any) int32) policy {
	return policy{
		describe: "controller-N with N = controller_id",
		check: func(d decider, m any) error {
			if m == nil {
				return nil
			}
			want := id(m)
			if d.p.Role == identity.Controller && d.p.ID == want {
				return nil
			}
			return d.denyCluster("%s may not send %s as controller %d", d.p, what, want)
		},
	}
}

func brokerOnly(what string, id func(any) int32) policy {
	return policy{
		describe: "broker-N with N = broker_id",
		check: func(d decider, m any) error {
			if m == nil {
				return nil
			}
			return d.asBroker(what, id(m))
		},
	}
}

func clusterACL(op Operation) policy {
	return policy{
		describe: op.String() + " on Cluster",
		check:    func(d decider, _ any) error { return d.need(op, TheCluster) },
	}
}

func topicACL(op Operation, topic func(any) string) policy {
	return policy{
		describe: op.String() + " on Topic:NAME",
		check: func(d decider, m any) error {
			if m == nil {
				return d.authenticated()
			}
			return d.need(op, TopicNamed(topic(m)))
		},
	}
}

func groupACL(op Operation, group func(any) string) policy {
	return policy{
		describe: op.String() + " on Group:ID",
		check: func(d decider, m any) error {
			if m == nil {
				return d.authenticated()
			}
			return d.need(op, GroupNamed(group(m)))
		},
	}
}

// needGroupAndTopics refuses unless the caller may do op on the group and
// on each topic.
func (d decider) needGroupAndTopics(op Operation, group string, topics []string) error {
	if err := d.need(op, GroupNamed(group)); err != nil {
		return err
	}
	for _, t := range topics {
		if err := d.need(op, TopicNamed(t)); err != nil {
			return err
		}
	}
	return nil
}

// refusedTopic is the description of a named topic the caller may not
// Describe: its name and the refusal, as Kafka's Metadata answers it.
func refusedTopic(name string, err error) *adminv1.TopicDescription {
	e := kerr.As(err)
	return &adminv1.TopicDescription{Name: name, ErrorCode: commonv1.ErrorCode(e.Code), ErrorMessage: e.Message}
}

// refusedOffsets answers a named topic the caller may not Describe as
// Kafka's OffsetFetch does: each partition it named refused, with no
// offset; none named lists none (which ones the group committed is not
// the caller's to see), the topic's own code saying why.
func refusedOffsets(t *groupv1.OffsetFetchTopicResult, req *groupv1.OffsetFetchRequest) *groupv1.OffsetFetchTopicResult {
	const code = commonv1.ErrorCode(kerr.TopicAuthorizationFailed)
	out := &groupv1.OffsetFetchTopicResult{Name: t.GetName(), ErrorCode: code}
	for _, rt := range req.GetTopics() {
		if rt.GetName() != t.GetName() {
			continue
		}
		for _, p := range rt.GetPartitions() {
			out.Partitions = append(out.Partitions, &groupv1.OffsetFetchPartition{Partition: p, CommittedOffset: -1, CommittedLeaderEpoch: -1, ErrorCode: code})
		}
		break
	}
	return out
}

// topicNames lists the names of a request's topic entries.
func topicNames[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}

func faultPolicy() policy {
	return policy{
		describe: "only with --fault.injection.enable, and InjectFault on Cluster",
		check: func(d decider, _ any) error {
			if !d.a.opts.FaultInjection {
				return d.denyCluster("%s may not use the fault-injection API: it is disabled on this broker (start it with --fault.injection.enable)", d.p)
			}
			return d.need(InjectFault, TheCluster)
		},
	}
}

// configResource is the ACL resource of a config resource: the topic, or
// the cluster for broker configs (Kafka guards broker configs by the
// Cluster resource too).
func configResource(r *adminv1.ConfigResource) Resource {
	if r.GetType() == adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC {
		return TopicNamed(r.GetName())
	}
	return TheCluster
}

// decider is one call's principal and the authorizer that judges it.
type decider struct {
	a    *Authorizer
	p    identity.Principal
	host string // the caller's IP, "" if unknown
}

func (d decider) allowed(op Operation, res Resource) bool {
	return d.a.isSuper(d.p) || d.a.awaitStored() && allows(d.a.ruleSets(), d.p, d.host, op, res)
}

// settled decides as allowed does, for the many names of one list (of
// what): the stored bindings' first load is waited for here, once, and the
// rules in force taken now, so each name is then decided at once, without
// a wait or a look at the ACL file: the names of a page are decided inside
// the handler, DescribeTopics' in the controller's event loop. When the
// stored bindings did not load, the list cannot be decided: an error
// (REQUEST_TIMED_OUT, which a client retries) rather than a list showing
// nothing.
func (d decider) settled(what string) (func(op Operation, res Resource) bool, error) {
	if d.a.isSuper(d.p) {
		return func(Operation, Resource) bool { return true }, nil
	}
	if !d.a.awaitStored() {
		return nil, kerr.New(kerr.RequestTimedOut, "the ACL bindings kept in etcd have not loaded yet: which %s %s may see cannot be decided", what, d.p)
	}
	rules := d.a.ruleSets()
	return func(op Operation, res Resource) bool { return allows(rules, d.p, d.host, op, res) }, nil
}

func (d decider) allowedAny(op Operation, t ResourceType) bool {
	return d.a.isSuper(d.p) || d.a.awaitStored() && allowsAny(d.a.ruleSets(), d.p, d.host, op, t)
}

// need refuses unless p may do op on res.
func (d decider) need(op Operation, res Resource) error {
	if d.allowed(op, res) {
		return nil
	}
	return d.refuse(op, res)
}

func (d decider) refuse(op Operation, res Resource) error {
	code := kerr.ClusterAuthorizationFailed
	switch res.Type {
	case Topic:
		code = kerr.TopicAuthorizationFailed
	case Group:
		code = kerr.GroupAuthorizationFailed
	}
	if d.a.storedPending.Load() {
		return kerr.New(code, "%s is not allowed %s on %s: the ACL bindings kept in etcd did not load in time", d.p, op, res)
	}
	return kerr.New(code, "%s is not allowed %s on %s", d.p, op, res)
}

func (d decider) authenticated() error { return nil } // the interceptor refuses anonymous callers first

func (d decider) asReplica(what string, replica int32) error {
	if d.p.Role == identity.Broker && d.p.ID == replica {
		return nil
	}
	return d.denyCluster("%s may not %s as replica %d", d.p, what, replica)
}

func (d decider) asBroker(what string, broker int32) error {
	if d.p.Role == identity.Broker && d.p.ID == broker {
		return nil
	}
	return d.denyCluster("%s may not send %s as broker %d", d.p, what, broker)
}

func (d decider) anyBroker(what string) error {
	if d.p.Role == identity.Broker {
		return nil
	}
	return d.denyCluster("%s may not %s: only brokers may", d.p, what)
}

func (d decider) denyCluster(format string, args ...any) error {
	return kerr.New(kerr.ClusterAuthorizationFailed, format, args...)
}

// Policies maps every guarded method to its rule in words, for
// documentation and tests.
func Policies() map[string]string {
	out := make(map[string]string, len(policies))
	for m, p := range policies {
		out[m] = p.describe
	}
	return out
}

// topicsShown is the topics a caller listing every topic is shown: those
// it may Describe. nil when the request names topics (each is answered,
// refused or not).
func topicsShown(d decider, named bool) (func(string) bool, error) {
	if named {
		return nil, nil
	}
	may, err := d.settled("topics")
	if err != nil {
		return nil, err
	}
	return func(name string) bool { return may(Describe, TopicNamed(name)) }, nil
}
