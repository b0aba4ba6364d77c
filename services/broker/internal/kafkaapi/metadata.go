package kafkaapi

import (
	"context"
	"encoding/base64"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

func rackOf(b metadata.Broker) *string {
	if b.Rack == "" {
		return nil
	}
	r := b.Rack
	return &r
}

// topicUUID turns a tidemark topic id (16 bytes, URL-safe base64) into
// Kafka's; an id of another shape is the zero UUID (Kafka's "none").
func topicUUID(id string) [16]byte {
	var out [16]byte
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		raw, err = base64.URLEncoding.DecodeString(id)
	}
	if err == nil && len(raw) == 16 {
		copy(out[:], raw)
	}
	return out
}

// handleMetadata answers from the gRPC Metadata handler (the same topics,
// partitions, ISR, offline replicas and error codes), with each broker's
// address on the listener the request arrived on (a broker without that
// listener is left out, as Kafka does) and topic ids from the metadata
// cache. The
// controller Kafka clients are told of is this broker: it forwards the
// controller's requests (admin.go). A named topic that does not exist may
// be created (answerMissing, auto.create.topics.enable). Topics are named
// by id from v12 on; v10 and v11 doing so are refused (refuseIDsBeforeV12).
//
// Topics are authorized as Kafka's handleTopicMetadataRequest does: all
// topics shows only those the caller may Describe; a named one it may not
// is TOPIC_AUTHORIZATION_FAILED whether it exists or not (named by id: the
// id and no name, ids not being secret), and is neither looked up nor
// created. The authorized-operations fields are filled when asked
// (authorizedOperations).
func (s *Server) handleMetadata(ctx context.Context, rc *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	meta := s.opts.RM.Meta()
	cid := meta.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = s.opts.BrokerID
	for _, b := range meta.Brokers() {
		if host, port, ok := Endpoint(b, rc.listener); ok {
			resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: b.ID, Host: host, Port: port, Rack: rackOf(b)})
		}
	}
	if refuseIDsBeforeV12(req, resp) {
		return resp
	}
	all := req.Topics == nil
	type named struct {
		name string
		id   *[16]byte // when named by id
	}
	var asked []named
	var byID map[[16]byte]string // built on the first id asked for, once per request
	for _, t := range req.Topics {
		if t.Topic != nil {
			asked = append(asked, named{name: *t.Topic})
			continue
		}
		if byID == nil {
			byID = topicsByID(meta)
		}
		name, ok := byID[t.TopicID]
		if !ok {
			// Kafka answers an id it does not know UNKNOWN_TOPIC_ID, which
			// its clients retry after a metadata refresh.
			resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{ErrorCode: int16(kerr.UnknownTopicID), TopicID: t.TopicID,
				AuthorizedOperations: unaskedOperations})
			continue
		}
		id := t.TopicID
		asked = append(asked, named{name: name, id: &id})
	}
	if err := s.authorize(ctx, brokerv1.BrokerService_Metadata_FullMethodName, &brokerv1.MetadataRequest{}); err != nil {
		for _, t := range asked {
			name := t.name
			resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: &name, ErrorCode: code(err), AuthorizedOperations: unaskedOperations})
		}
		return resp
	}
	s.clusterAuthorizedOperations(ctx, req, resp)
	greq := &brokerv1.MetadataRequest{}
	var denied []kmsg.MetadataResponseTopic // answered last, as Kafka orders them
	for _, t := range asked {
		if s.opts.Authorizer.Allowed(ctx, authz.Describe, authz.TopicNamed(t.name)) {
			greq.Topics = append(greq.Topics, t.name)
			continue
		}
		dt := kmsg.NewMetadataResponseTopic()
		dt.ErrorCode = int16(kerr.TopicAuthorizationFailed)
		if t.id != nil {
			dt.TopicID = *t.id
		} else {
			name := t.name
			dt.Topic = &name
		}
		denied = append(denied, dt)
	}
	if (all || len(greq.Topics) > 0) && !s.describeTopics(ctx, rc, req, greq, resp) {
		return nil
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp
}

// refuseIDsBeforeV12 answers INVALID_REQUEST for every topic of a v10 or
// v11 request naming one by id or with a null name, as Kafka does (the
// request has the fields, but looking topics up by id came with v12), and
// says whether it did. An empty name is answered for a null one.
func refuseIDsBeforeV12(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) bool {
	if req.Version >= 12 || !slices.ContainsFunc(req.Topics, func(t kmsg.MetadataRequestTopic) bool {
		return t.Topic == nil || t.TopicID != [16]byte{}
	}) {
		return false
	}
	for _, t := range req.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: &name, TopicID: t.TopicID,
			ErrorCode: int16(kerr.InvalidRequest), AuthorizedOperations: unaskedOperations})
	}
	return true
}

// describeTopics answers the topics of greq (all: every topic the caller
// may Describe) into resp, false when the connection is to be closed.
func (s *Server) describeTopics(ctx context.Context, rc *reqCtx, req *kmsg.MetadataRequest, greq *brokerv1.MetadataRequest, resp *kmsg.MetadataResponse) bool {
	all := req.Topics == nil
	meta := s.opts.RM.Meta()
	live := map[int32]metadata.Broker{}
	for _, b := range meta.Brokers() {
		live[b.ID] = b
	}
	gresp, err := s.opts.Broker.Metadata(ctx, greq)
	if err != nil && all {
		// No topic to carry the error (no metadata yet, or this broker is
		// fenced): an answer with none would tell the client every topic
		// is gone. Closing makes it ask another broker, as Kafka's clients
		// do on a lost connection.
		s.log.Debug("closing a connection: cannot describe all topics", "err", err)
		rc.closeConn.Store(true)
		return false
	}
	if err != nil {
		// No metadata yet, or fenced: every topic LEADER_NOT_AVAILABLE with
		// no partitions, what Kafka answers for a topic whose partitions it
		// does not know yet, which clients retry (librdkafka ignores it).
		// The fence's BROKER_NOT_AVAILABLE with no partitions is a permanent
		// topic error to librdkafka: it dropped the topic's partitions and
		// told the application they were gone.
		for _, t := range greq.Topics {
			name := t
			resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: &name, ErrorCode: int16(kerr.LeaderNotAvailable), AuthorizedOperations: unaskedOperations})
		}
		return true
	}
	if all {
		// Which topics the caller may see cannot be told yet (the ACL
		// bindings kept in etcd have not loaded): an answer with none
		// would tell a pattern subscriber every topic is gone, and
		// Metadata has no top-level error code. Closed, as above.
		if _, err := s.opts.Authorizer.Shown(ctx, brokerv1.BrokerService_Metadata_FullMethodName, greq); err != nil {
			s.log.Debug("closing a connection: cannot tell which topics it may see", "err", err)
			rc.closeConn.Store(true)
			return false
		}
	}
	// All topics: only those the caller may Describe, as over gRPC.
	gresp = s.opts.Authorizer.Filter(ctx, brokerv1.BrokerService_Metadata_FullMethodName, greq, gresp).(*brokerv1.MetadataResponse)
	var missing map[string]int16 // the error of each named topic that does not exist
	if !all {
		var names []string
		for _, t := range gresp.GetTopics() {
			// A forbidden name too: a caller that may not create it is
			// told TOPIC_AUTHORIZATION_FAILED first, as Kafka does.
			switch kerr.Code(protoCode(t.GetErrorCode())) {
			case kerr.UnknownTopicOrPartition, kerr.InvalidTopicException:
				names = append(names, t.GetName())
			}
		}
		if len(names) > 0 {
			missing = s.answerMissing(ctx, req, names)
		}
	}
	for _, t := range gresp.GetTopics() {
		name := t.GetName()
		kt := kmsg.NewMetadataResponseTopic()
		kt.Topic, kt.ErrorCode, kt.TopicID = &name, protoCode(t.GetErrorCode()), topicUUID(meta.TopicID(name))
		if c, ok := missing[name]; ok {
			kt.ErrorCode = c
		}
		// A topic refused creation is answered as one refused Describe:
		// Kafka tells it nothing more.
		if req.IncludeTopicAuthorizedOperations && kerr.Code(kt.ErrorCode) != kerr.TopicAuthorizationFailed {
			kt.AuthorizedOperations = s.opts.Authorizer.AuthorizedOperations(ctx, authz.TopicNamed(name))
		}
		kt.IsInternal = topicconfig.IsInternal(name) // __consumer_offsets, as Kafka marks it
		for _, p := range t.GetPartitions() {
			kp := kmsg.MetadataResponseTopicPartition{
				Partition: p.GetPartition(), Leader: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(), ErrorCode: protoCode(p.GetErrorCode()),
				Replicas: p.GetReplicas(), ISR: p.GetIsr(), OfflineReplicas: orEmpty(p.GetOfflineReplicas()),
			}
			if b, ok := live[kp.Leader]; ok && kp.ErrorCode == 0 {
				if _, _, ok := Endpoint(b, rc.listener); !ok {
					kp.Leader, kp.ErrorCode = -1, leaderWithoutListener(req.Version)
				}
			}
			kt.Partitions = append(kt.Partitions, kp)
		}
		resp.Topics = append(resp.Topics, kt)
	}
	return true
}

// unaskedOperations is Kafka's value of an authorized-operations field
// nobody asked for (or of a topic refused).
const unaskedOperations = -2147483648

// clusterAuthorizedOperations fills Metadata v8-10's cluster field when
// asked, as Kafka does: the cluster's operations the caller may do, or
// none without Describe on the cluster (v11 moved it to DescribeCluster).
func (s *Server) clusterAuthorizedOperations(ctx context.Context, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if req.Version < 8 || req.Version > 10 || !req.IncludeClusterAuthorizedOperations {
		return
	}
	resp.AuthorizedOperations = 0
	if s.opts.Authorizer.Allowed(ctx, authz.Describe, authz.TheCluster) {
		resp.AuthorizedOperations = s.opts.Authorizer.AuthorizedOperations(ctx, authz.TheCluster)
	}
}

// leaderWithoutListener is the error of a partition whose live leader has
// no endpoint on the request's listener: Kafka's LISTENER_NOT_FOUND from
// Metadata v6, LEADER_NOT_AVAILABLE before, with no leader named. Replicas
// and ISR stay as they are (Kafka filters them only for Metadata v0, which
// is not served).
func leaderWithoutListener(version int16) int16 {
	if version >= 6 {
		return listenerNotFound
	}
	return int16(kerr.LeaderNotAvailable)
}

func orEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// topicsByID indexes the known topics by Kafka topic id. A topic whose id
// is unknown or not 16 bytes has none: the zero UUID names no topic.
func topicsByID(meta *metadata.Cache) map[[16]byte]string {
	topics := meta.Topics()
	out := make(map[[16]byte]string, len(topics))
	for _, t := range topics {
		if id := topicUUID(meta.TopicID(t)); id != ([16]byte{}) {
			out[id] = t
		}
	}
	return out
}

// handleDescribeCluster answers from the metadata cache, authorized as the
// AdminService's DescribeCluster (Describe on Cluster).
func (s *Server) handleDescribeCluster(ctx context.Context, rc *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterAuthorizedOperations = unaskedOperations
	if err := s.authorize(ctx, adminv1.AdminService_DescribeCluster_FullMethodName, &adminv1.DescribeClusterRequest{}); err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		return resp
	}
	if req.EndpointType > 1 {
		resp.ErrorCode = int16(kerr.UnsupportedVersion) // tidemark's controllers do not speak Kafka
		m := "only broker endpoints are served"
		resp.ErrorMessage = &m
		return resp
	}
	resp.EndpointType = 1
	meta := s.opts.RM.Meta()
	resp.ClusterID = meta.ClusterID()
	resp.ControllerID = s.opts.BrokerID
	for _, b := range meta.Brokers() {
		if host, port, ok := Endpoint(b, rc.listener); ok {
			resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: b.ID, Host: host, Port: port, Rack: rackOf(b)})
		}
	}
	return resp
}
