package kafkaapi

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// Kafka's AclOperation codes, the bits of an authorized-operations field.
const (
	opRead     = 1 << 3
	opWrite    = 1 << 4
	opDescribe = 1 << 8
)

// withDescribeACL leads orders and payroll (one partition each) with
// authorization on under acl; its controller is a creatingAdmin.
func withDescribeACL(t *testing.T, acl string) (*Server, *creatingAdmin) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte(acl), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(authz.Options{Config: authz.Config{ACLFile: file, SuperUsers: []string{"User:admin"}}, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	s := withLeaderOfTopics(t, 1, nil, "orders", "payroll")
	s.opts.Authorizer = a
	s.opts.Replication = &grpcapi.Replication{RM: s.opts.RM}
	f := &creatingAdmin{}
	s.opts.Admin = func(context.Context) (adminv1.AdminServiceClient, error) { return f, nil }
	return s, f
}

func as(user string) context.Context {
	return identity.With(context.Background(), identity.ForUser(user))
}

func metadataRequest(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func topicNamesOf(resp *kmsg.MetadataResponse) []string {
	var out []string
	for _, rt := range resp.Topics {
		if rt.Topic != nil {
			out = append(out, *rt.Topic)
		}
	}
	slices.Sort(out)
	return out
}

// Metadata authorizes each topic as Kafka's handleTopicMetadataRequest:
// all topics lists only those the caller may Describe; a named topic it
// may not is TOPIC_AUTHORIZATION_FAILED with no partitions or id, whether
// it exists or not, and is never created; named by id it is answered with
// the id and no name. Before, every authenticated caller saw every topic.
func TestMetadataAnswersOnlyTopicsTheCallerMayDescribe(t *testing.T) {
	s, f := withDescribeACL(t, "allow User:alice Describe Topic:orders\nallow User:alice Create Cluster\n")
	alice := as("alice")

	for _, v := range []int16{1, 9, 12} {
		resp := s.handleMetadata(alice, &reqCtx{}, metadataRequest(v)).(*kmsg.MetadataResponse)
		if got := topicNamesOf(resp); !slices.Equal(got, []string{"orders"}) || len(resp.Topics) != 1 {
			t.Errorf("v%d all topics as alice: %v, want only orders", v, got)
		}
	}
	if got := topicNamesOf(s.handleMetadata(as("admin"), &reqCtx{}, metadataRequest(12)).(*kmsg.MetadataResponse)); !slices.Equal(got, []string{"orders", "payroll"}) {
		t.Errorf("all topics as the super user: %v, want orders and payroll", got)
	}

	req := metadataRequest(9, "orders", "payroll", "ghost")
	req.AllowAutoTopicCreation = true
	resp := s.handleMetadata(alice, &reqCtx{}, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 3 {
		t.Fatalf("named three topics, answered %+v", resp.Topics)
	}
	for _, rt := range resp.Topics {
		switch *rt.Topic {
		case "orders":
			if rt.ErrorCode != 0 || len(rt.Partitions) != 1 {
				t.Errorf("orders: %s with %d partitions, want its metadata", kerr.Code(rt.ErrorCode), len(rt.Partitions))
			}
		default: // payroll exists, ghost does not: the answer must not tell
			if kerr.Code(rt.ErrorCode) != kerr.TopicAuthorizationFailed || len(rt.Partitions) != 0 || rt.TopicID != ([16]byte{}) || rt.IsInternal {
				t.Errorf("%s: %s, %d partitions, id %x; want TOPIC_AUTHORIZATION_FAILED and nothing else", *rt.Topic, kerr.Code(rt.ErrorCode), len(rt.Partitions), rt.TopicID)
			}
		}
	}
	if asked := f.askedFor(); len(asked) != 0 {
		t.Errorf("the controller was asked to create %v for topics alice may not Describe", asked)
	}

	byID := kmsg.NewPtrMetadataRequest()
	byID.SetVersion(12)
	payrollID := topicsByID(s.opts.RM.Meta())
	for id, name := range payrollID {
		if name == "payroll" {
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = id
			byID.Topics = append(byID.Topics, rt)
		}
	}
	resp = s.handleMetadata(alice, &reqCtx{}, byID).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || kerr.Code(resp.Topics[0].ErrorCode) != kerr.TopicAuthorizationFailed || resp.Topics[0].Topic != nil ||
		resp.Topics[0].TopicID != byID.Topics[0].TopicID {
		t.Errorf("payroll by id as alice: %+v, want TOPIC_AUTHORIZATION_FAILED with the id and no name", resp.Topics)
	}
}

// A Kafka Metadata of every topic by a user while the ACL bindings kept in
// etcd have not loaded closes the connection, as a broker without metadata
// does: Metadata has no top-level error code, and the empty answer it got
// told a pattern subscriber every topic was gone. A named topic is refused
// on its own meanwhile; once the bindings load, the user sees what it may.
func TestAKafkaMetadataOfEveryTopicBeforeTheStoredBindingsLoadClosesTheConnection(t *testing.T) {
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte("allow User:alice Describe Topic:orders\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(authz.Options{Config: authz.Config{ACLFile: file}, TLS: true, StoredBindings: true, StoredWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := withLeaderOfTopics(t, 1, nil, "orders", "payroll")
	s.opts.Authorizer = a
	alice := as("alice")

	rc := &reqCtx{}
	if resp := s.handleMetadata(alice, rc, metadataRequest(12)); resp != nil || !rc.closeConn.Load() {
		t.Errorf("every topic before the stored bindings loaded: answered %+v, connection closed %t; want no answer and the connection closed", resp, rc.closeConn.Load())
	}
	rc = &reqCtx{}
	named := s.handleMetadata(alice, rc, metadataRequest(12, "orders")).(*kmsg.MetadataResponse)
	if len(named.Topics) != 1 || named.Topics[0].ErrorCode == 0 || rc.closeConn.Load() {
		t.Errorf("orders named before the stored bindings loaded: %+v, connection closed %t; want it refused on its own", named.Topics, rc.closeConn.Load())
	}

	a.SetStored(authz.RulesOf(nil, nil))
	rc = &reqCtx{}
	resp, ok := s.handleMetadata(alice, rc, metadataRequest(12)).(*kmsg.MetadataResponse)
	if !ok || rc.closeConn.Load() || !slices.Equal(topicNamesOf(resp), []string{"orders"}) {
		t.Errorf("every topic once the stored bindings loaded: %v, connection closed %t; want orders only", resp, rc.closeConn.Load())
	}
}

// The authorized-operations fields are Kafka's: filled only when asked,
// for the topics answered (the others keep -2147483648), and the
// cluster's (v8-v10) is 0 without Describe on the cluster. Before, they
// were never filled.
func TestMetadataAuthorizedOperationsWhenAsked(t *testing.T) {
	s, _ := withDescribeACL(t, "allow User:alice Describe Topic:orders\nallow User:carol Write Topic:*\nallow User:carol Describe Cluster\n")
	ask := func(user string, version int16, topics ...string) *kmsg.MetadataResponse {
		req := metadataRequest(version, topics...)
		req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
		return s.handleMetadata(as(user), &reqCtx{}, req).(*kmsg.MetadataResponse)
	}
	resp := ask("alice", 9, "orders", "payroll")
	ops := map[string]int32{}
	for _, rt := range resp.Topics {
		ops[*rt.Topic] = rt.AuthorizedOperations
	}
	if ops["orders"] != opDescribe || ops["payroll"] != unaskedOperations {
		t.Errorf("alice's topic operations %v, want orders Describe only and payroll unset", ops)
	}
	if resp.AuthorizedOperations != 0 {
		t.Errorf("alice's cluster operations %b, want 0 (no Describe on the cluster)", resp.AuthorizedOperations)
	}
	resp = ask("carol", 10)
	if resp.AuthorizedOperations != opDescribe {
		t.Errorf("carol's cluster operations %b, want Describe", resp.AuthorizedOperations)
	}
	for _, rt := range resp.Topics {
		if rt.AuthorizedOperations != opWrite|opDescribe {
			t.Errorf("carol's operations on %s %b, want Write and Describe", *rt.Topic, rt.AuthorizedOperations)
		}
	}
	if resp := ask("carol", 11); resp.AuthorizedOperations != unaskedOperations {
		t.Errorf("v11 has no cluster field: %d", resp.AuthorizedOperations)
	}
	req := metadataRequest(9)
	for _, rt := range s.handleMetadata(as("carol"), &reqCtx{}, req).(*kmsg.MetadataResponse).Topics {
		if rt.AuthorizedOperations != unaskedOperations {
			t.Errorf("not asked, %s: %d", *rt.Topic, rt.AuthorizedOperations)
		}
	}
	for _, rt := range ask("admin", 9, "payroll").Topics {
		if rt.AuthorizedOperations&(opRead|opWrite|opDescribe) != opRead|opWrite|opDescribe {
			t.Errorf("the super user's operations on payroll %b, want every topic operation", rt.AuthorizedOperations)
		}
	}
}

// ListOffsets and OffsetForLeaderEpoch from a consumer need Describe on
// the topic, as in Kafka: a partition of a topic the caller may not
// Describe is TOPIC_AUTHORIZATION_FAILED with no offset, the others are
// answered.
func TestOffsetLookupsNeedDescribe(t *testing.T) {
	s, _ := withDescribeACL(t, "allow User:alice Describe Topic:orders\n")
	alice := as("alice")
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(6)
	lo.ReplicaID = -1
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.SetVersion(4)
	oe.ReplicaID = -1
	for _, topic := range []string{"orders", "payroll"} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = listLatest
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
		et := kmsg.NewOffsetForLeaderEpochRequestTopic()
		et.Topic = topic
		ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		ep.CurrentLeaderEpoch, ep.LeaderEpoch = 1, 1
		et.Partitions = append(et.Partitions, ep)
		oe.Topics = append(oe.Topics, et)
	}
	lr := s.handleListOffsets(alice, nil, lo).(*kmsg.ListOffsetsResponse)
	er := s.handleOffsetForLeaderEpoch(alice, nil, oe).(*kmsg.OffsetForLeaderEpochResponse)
	if len(lr.Topics) != 2 || len(er.Topics) != 2 {
		t.Fatalf("answered %+v and %+v, want both topics", lr.Topics, er.Topics)
	}
	for i, topic := range []string{"orders", "payroll"} {
		lp, ep := lr.Topics[i].Partitions[0], er.Topics[i].Partitions[0]
		want := kerr.None
		if topic == "payroll" {
			want = kerr.TopicAuthorizationFailed
		}
		if kerr.Code(lp.ErrorCode) != want || (want != kerr.None && lp.Offset != -1) {
			t.Errorf("ListOffsets %s: %s offset %d, want %s", topic, kerr.Code(lp.ErrorCode), lp.Offset, want)
		}
		if kerr.Code(ep.ErrorCode) != want || (want != kerr.None && (ep.EndOffset != -1 || ep.LeaderEpoch != -1)) {
			t.Errorf("OffsetForLeaderEpoch %s: %s end %d epoch %d, want %s", topic, kerr.Code(ep.ErrorCode), ep.EndOffset, ep.LeaderEpoch, want)
		}
	}
}
