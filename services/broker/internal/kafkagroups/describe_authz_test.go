package kafkagroups

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// committed holds groups app-1 and billing, each with an offset (7) on
// partitions 0 and 1 of orders and payroll, answering as the coordinator
// does: the partitions named, or every committed one.
type committed struct {
	groupv1.UnimplementedGroupServiceServer
}

func (committed) OffsetFetch(_ context.Context, req *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
	topics := req.GetTopics()
	if len(topics) == 0 {
		topics = []*groupv1.OffsetFetchTopic{{Name: "orders", Partitions: []int32{0, 1}}, {Name: "payroll", Partitions: []int32{0, 1}}}
	}
	out := &groupv1.OffsetFetchResponse{}
	for _, t := range topics {
		rt := &groupv1.OffsetFetchTopicResult{Name: t.GetName()}
		for _, p := range t.GetPartitions() {
			rt.Partitions = append(rt.Partitions, &groupv1.OffsetFetchPartition{Partition: p, CommittedOffset: 7, CommittedLeaderEpoch: 1})
		}
		out.Topics = append(out.Topics, rt)
	}
	return out, nil
}

func (committed) ListGroups(context.Context, *groupv1.ListGroupsRequest) (*groupv1.ListGroupsResponse, error) {
	return &groupv1.ListGroupsResponse{Groups: []*groupv1.ListedGroup{{GroupId: "app-1", GroupState: "Stable"}, {GroupId: "billing", GroupState: "Stable"}}}, nil
}

func (committed) DescribeGroups(_ context.Context, req *groupv1.DescribeGroupsRequest) (*groupv1.DescribeGroupsResponse, error) {
	out := &groupv1.DescribeGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		out.Groups = append(out.Groups, &groupv1.DescribedGroup{GroupId: id, GroupState: "Stable", ProtocolType: "consumer"})
	}
	return out, nil
}

// withGroupACL is Groups over committed with authorization on under acl,
// and the context of user.
func withGroupACL(t *testing.T, acl, user string) (*Groups, context.Context) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte(acl), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(authz.Options{Config: authz.Config{ACLFile: file, SuperUsers: []string{"User:admin"}}, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	return &Groups{Service: committed{}, Authorizer: a}, identity.With(context.Background(), identity.ForUser(user))
}

const aliceDescribes = "allow User:alice Describe Group:app-*\nallow User:alice Describe Topic:orders\n"

// ListGroups answers only the groups the caller may Describe (all with
// Describe on the cluster); DescribeGroups refuses each other group on its
// own with GROUP_AUTHORIZATION_FAILED and fills the authorized operations
// of the others when asked (v3+), as Kafka does. Before, the operations
// were never filled.
func TestGroupListingsAnswerOnlyWhatTheCallerMayDescribe(t *testing.T) {
	g, alice := withGroupACL(t, aliceDescribes+"allow User:carol Describe Cluster\n", "alice")
	list := func(ctx context.Context) []string {
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(4)
		var out []string
		for _, lg := range g.Handle(ctx, identity.Anon, req).(*kmsg.ListGroupsResponse).Groups {
			out = append(out, lg.Group)
		}
		return out
	}
	if got := list(alice); len(got) != 1 || got[0] != "app-1" {
		t.Errorf("alice lists %v, want only app-1", got)
	}
	if got := list(identity.With(context.Background(), identity.ForUser("carol"))); len(got) != 2 {
		t.Errorf("carol (Describe on the cluster) lists %v, want both groups", got)
	}

	req := kmsg.NewPtrDescribeGroupsRequest()
	req.SetVersion(5)
	req.Groups = []string{"app-1", "billing"}
	req.IncludeAuthorizedOperations = true
	resp := g.Handle(alice, identity.Anon, req).(*kmsg.DescribeGroupsResponse)
	if len(resp.Groups) != 2 {
		t.Fatalf("answered %+v, want both groups", resp.Groups)
	}
	app, billing := resp.Groups[0], resp.Groups[1]
	if app.ErrorCode != 0 || app.State != "Stable" || app.AuthorizedOperations != 1<<8 {
		t.Errorf("app-1: %s %q operations %b, want Stable with Describe (bit 8)", kerr.Code(app.ErrorCode), app.State, app.AuthorizedOperations)
	}
	if kerr.Code(billing.ErrorCode) != kerr.GroupAuthorizationFailed || billing.State != "" || billing.AuthorizedOperations != -2147483648 {
		t.Errorf("billing: %s %q operations %d, want GROUP_AUTHORIZATION_FAILED and nothing else", kerr.Code(billing.ErrorCode), billing.State, billing.AuthorizedOperations)
	}
	req.IncludeAuthorizedOperations = false
	if resp := g.Handle(alice, identity.Anon, req).(*kmsg.DescribeGroupsResponse); resp.Groups[0].AuthorizedOperations != -2147483648 {
		t.Errorf("operations not asked: %d", resp.Groups[0].AuthorizedOperations)
	}
}

// OffsetFetch as Kafka's handleOffsetFetchRequest: a named topic the caller
// may not Describe does not fail the request, each of its partitions is
// TOPIC_AUTHORIZATION_FAILED with no offset (v1-v7 and v8's groups alike);
// all topics leaves it out; a group it may not Describe is
// GROUP_AUTHORIZATION_FAILED whatever the topics. Before, one refused
// topic refused the whole request (top-level TOPIC_AUTHORIZATION_FAILED).
func TestOffsetFetchRefusesTopicsPerPartition(t *testing.T) {
	g, alice := withGroupACL(t, aliceDescribes, "alice")
	named := []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{0}}, {Topic: "payroll", Partitions: []int32{0, 1}}}
	check := func(what string, errorCode int16, topics map[string][]kmsg.OffsetFetchResponseTopicPartition, want map[string]kerr.Code) {
		t.Helper()
		if errorCode != 0 {
			t.Fatalf("%s: top-level %s, want none", what, kerr.Code(errorCode))
		}
		if len(topics) != len(want) {
			t.Fatalf("%s: answered %v, want %v", what, topics, want)
		}
		for name, c := range want {
			for _, p := range topics[name] {
				if kerr.Code(p.ErrorCode) != c || (c == kerr.None) != (p.Offset == 7) {
					t.Errorf("%s: %s-%d %s offset %d, want %s", what, name, p.Partition, kerr.Code(p.ErrorCode), p.Offset, c)
				}
			}
		}
	}
	byTopic := func(r *kmsg.OffsetFetchResponse) map[string][]kmsg.OffsetFetchResponseTopicPartition {
		out := map[string][]kmsg.OffsetFetchResponseTopicPartition{}
		for _, rt := range r.Topics {
			out[rt.Topic] = rt.Partitions
		}
		return out
	}

	for _, v := range []int16{1, 7} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(v)
		req.Group, req.Topics = "app-1", named
		r := g.Handle(alice, identity.Anon, req).(*kmsg.OffsetFetchResponse)
		check("named", r.ErrorCode, byTopic(r), map[string]kerr.Code{"orders": kerr.None, "payroll": kerr.TopicAuthorizationFailed})
		if got := len(byTopic(r)["payroll"]); got != 2 {
			t.Errorf("v%d: payroll answered for %d partitions, want the 2 named", v, got)
		}
	}
	all := kmsg.NewPtrOffsetFetchRequest()
	all.SetVersion(7)
	all.Group = "app-1"
	r := g.Handle(alice, identity.Anon, all).(*kmsg.OffsetFetchResponse)
	check("all topics", r.ErrorCode, byTopic(r), map[string]kerr.Code{"orders": kerr.None})

	onlyRefused := kmsg.NewPtrOffsetFetchRequest()
	onlyRefused.SetVersion(7)
	onlyRefused.Group, onlyRefused.Topics = "app-1", named[1:]
	r = g.Handle(alice, identity.Anon, onlyRefused).(*kmsg.OffsetFetchResponse)
	check("only payroll", r.ErrorCode, byTopic(r), map[string]kerr.Code{"payroll": kerr.TopicAuthorizationFailed})
	onlyRefused.Group = "billing"
	if r := g.Handle(alice, identity.Anon, onlyRefused).(*kmsg.OffsetFetchResponse); kerr.Code(r.ErrorCode) != kerr.GroupAuthorizationFailed || len(r.Topics) != 0 {
		t.Errorf("billing, only payroll: %s %v, want GROUP_AUTHORIZATION_FAILED alone", kerr.Code(r.ErrorCode), r.Topics)
	}

	v8 := kmsg.NewPtrOffsetFetchRequest()
	v8.SetVersion(8)
	v8.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "app-1", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}, {Topic: "payroll", Partitions: []int32{1}}}},
		{Group: "billing"},
	}
	r8 := g.Handle(alice, identity.Anon, v8).(*kmsg.OffsetFetchResponse)
	if len(r8.Groups) != 2 {
		t.Fatalf("v8 answered %+v, want both groups", r8.Groups)
	}
	got := map[string][]kmsg.OffsetFetchResponseTopicPartition{}
	for _, rt := range r8.Groups[0].Topics {
		for _, p := range rt.Partitions {
			got[rt.Topic] = append(got[rt.Topic], kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset, ErrorCode: p.ErrorCode})
		}
	}
	check("v8 app-1", r8.Groups[0].ErrorCode, got, map[string]kerr.Code{"orders": kerr.None, "payroll": kerr.TopicAuthorizationFailed})
	if kerr.Code(r8.Groups[1].ErrorCode) != kerr.GroupAuthorizationFailed {
		t.Errorf("v8 billing: %s, want GROUP_AUTHORIZATION_FAILED", kerr.Code(r8.Groups[1].ErrorCode))
	}
}

// A Kafka ListGroups by a user while the ACL bindings kept in etcd have not
// loaded is answered REQUEST_TIMED_OUT (an admin client asks again), as the
// gRPC listing is, not with an empty list: which groups the user may see
// cannot be decided yet. Before, the list came back empty and without an
// error. Once they load, the user sees the groups it may Describe.
func TestAKafkaGroupListingBeforeTheStoredBindingsLoadIsRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte(aliceDescribes), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(authz.Options{Config: authz.Config{ACLFile: file}, TLS: true, StoredBindings: true, StoredWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	g, alice := &Groups{Service: committed{}, Authorizer: a}, identity.With(context.Background(), identity.ForUser("alice"))
	list := func() *kmsg.ListGroupsResponse {
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(4)
		return g.Handle(alice, identity.Anon, req).(*kmsg.ListGroupsResponse)
	}
	if r := list(); r.ErrorCode != int16(kerr.RequestTimedOut) {
		t.Errorf("listing before the stored bindings loaded: error code %d, groups %v; want REQUEST_TIMED_OUT", r.ErrorCode, r.Groups)
	}
	a.SetStored(authz.RulesOf(nil, nil))
	if r := list(); r.ErrorCode != 0 || len(r.Groups) != 1 || r.Groups[0].Group != "app-1" {
		t.Errorf("listing once the stored bindings loaded: error code %d, groups %v; want app-1 only", r.ErrorCode, r.Groups)
	}
}
