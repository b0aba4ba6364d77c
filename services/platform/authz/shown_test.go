package authz

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// A listing of every topic or group, by a user, while the bindings kept in
// etcd have not loaded, is refused with REQUEST_TIMED_OUT naming why (a
// client asks again), and its handler is not run. Before, the list came
// back empty and successful: "there are no topics" where the truth was
// "cannot tell yet". Once they load, the names are decided inside the
// handler (DescribeTopics' inside the controller's event loop) without a
// wait and on the rules of one moment.
func TestAListIsRefusedNotEmptiedUntilTheStoredBindingsLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte("allow User:alice Describe Topic:orders\nallow User:alice Describe Group:billing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Config: Config{ACLFile: file}, TLS: true, StoredBindings: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.SetStored(RulesOf(nil, nil)) // ends any wait still going
	a.storedWait = 10 * time.Millisecond
	lists := []struct {
		method string
		req    any
		answer func() any // every name, as the handler lists them
		names  func(any) []string
		shown  string // the one name alice may Describe
	}{
		{adminv1.AdminService_DescribeTopics_FullMethodName, &adminv1.DescribeTopicsRequest{},
			func() any {
				return &adminv1.DescribeTopicsResponse{Topics: []*adminv1.TopicDescription{{Name: "orders"}, {Name: "payroll"}}}
			},
			func(r any) (out []string) {
				for _, t := range r.(*adminv1.DescribeTopicsResponse).GetTopics() {
					out = append(out, t.GetName())
				}
				return out
			}, "orders"},
		{brokerv1.BrokerService_Metadata_FullMethodName, &brokerv1.MetadataRequest{},
			func() any {
				return &brokerv1.MetadataResponse{Topics: []*brokerv1.TopicMetadata{{Name: "orders"}, {Name: "payroll"}}}
			},
			func(r any) (out []string) {
				for _, t := range r.(*brokerv1.MetadataResponse).GetTopics() {
					out = append(out, t.GetName())
				}
				return out
			}, "orders"},
		{groupv1.GroupService_ListGroups_FullMethodName, &groupv1.ListGroupsRequest{},
			func() any {
				return &groupv1.ListGroupsResponse{Groups: []*groupv1.ListedGroup{{GroupId: "billing"}, {GroupId: "payroll"}}}
			},
			func(r any) (out []string) {
				for _, g := range r.(*groupv1.ListGroupsResponse).GetGroups() {
					out = append(out, g.GetGroupId())
				}
				return out
			}, "billing"},
	}
	call := func(method string, req any, answer func() any) (resp any, ran bool, err error) {
		resp, err = a.Unary()(forwardedBy("gateway", "alice", ""), req, &grpc.UnaryServerInfo{FullMethod: method},
			func(context.Context, any) (any, error) {
				ran = true
				return answer(), nil
			})
		return resp, ran, err
	}
	for _, l := range lists {
		resp, ran, err := call(l.method, l.req, l.answer)
		if err == nil || kerr.FromStatus(err).Code != kerr.RequestTimedOut {
			t.Errorf("%s before the stored bindings loaded: answer %v, error %v; want REQUEST_TIMED_OUT", l.method, l.names(resp), err)
		}
		if ran {
			t.Errorf("%s before the stored bindings loaded: the handler ran", l.method)
		}
	}

	a.SetStored(RulesOf(nil, nil))
	a.storedWait = time.Hour
	for _, l := range lists {
		resp, _, err := call(l.method, l.req, l.answer)
		if err != nil || !slices.Equal(l.names(resp), []string{l.shown}) {
			t.Errorf("%s once the bindings loaded: %v, %v; want only %s", l.method, l.names(resp), err, l.shown)
		}
	}
}

// The stored bindings' first load is waited for until one deadline, the
// same for every request: once it has passed, a user's request is refused
// at once while they are still missing. Before, each check waited the
// whole storedWait again, so a Kafka Metadata naming a hundred topics
// while etcd was out of reach took a hundred waits.
func TestTheStoredBindingsAreWaitedForUntilOneDeadlineNotPerCheck(t *testing.T) {
	a, err := New(Options{Config: Config{}, TLS: true, StoredBindings: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.SetStored(RulesOf(nil, nil))
	a.storedSince, a.storedWait = time.Now().Add(-time.Hour), time.Minute
	alice := identity.With(context.Background(), identity.ForUser("alice"))
	decided := make(chan bool, 1)
	go func() {
		for i := range 100 {
			if a.Allowed(alice, Describe, TopicNamed("t"+string(rune('a'+i%26)))) {
				decided <- true
				return
			}
		}
		decided <- false
	}()
	select {
	case ok := <-decided:
		if ok {
			t.Error("a user was allowed before the stored bindings loaded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("checks after the deadline for the stored bindings' load still wait for it")
	}
}
