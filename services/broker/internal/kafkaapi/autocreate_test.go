package kafkaapi

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// creatingAdmin is the active controller as far as automatic topic
// creation reaches it: it records the topics it is asked for and creates
// them (TOPIC_ALREADY_EXISTS the second time). With hold set, each call
// says it arrived on arrived and waits for hold to close.
type creatingAdmin struct {
	adminv1.AdminServiceClient
	mu      sync.Mutex
	asked   []*adminv1.TopicSpec
	exists  map[string]bool
	arrived chan struct{}
	hold    chan struct{}
}

func (f *creatingAdmin) CreateTopics(_ context.Context, in *adminv1.CreateTopicsRequest, _ ...grpc.CallOption) (*adminv1.CreateTopicsResponse, error) {
	if f.hold != nil {
		f.arrived <- struct{}{}
		<-f.hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &adminv1.CreateTopicsResponse{}
	for _, t := range in.GetTopics() {
		f.asked = append(f.asked, t)
		r := &adminv1.CreateTopicResult{Name: t.GetName()}
		if f.exists[t.GetName()] {
			r.ErrorCode = commonv1.ErrorCode(kerr.TopicAlreadyExists)
		}
		if f.exists == nil {
			f.exists = map[string]bool{}
		}
		f.exists[t.GetName()] = true
		out.Results = append(out.Results, r)
	}
	return out, nil
}

func (f *creatingAdmin) askedFor() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, t := range f.asked {
		out = append(out, t.GetName())
	}
	return out
}

// withCreatingAdmin is withLeader (broker configs static) whose controller
// is a creatingAdmin.
func withCreatingAdmin(t *testing.T, static map[string]string) (*Server, *creatingAdmin) {
	t.Helper()
	s := withLeaderConfigured(t, 1, static)
	f := &creatingAdmin{}
	s.opts.Admin = func(context.Context) (adminv1.AdminServiceClient, error) { return f, nil }
	return s, f
}

func metadataOf(t *testing.T, s *Server, ctx context.Context, version int16, allow bool, topics ...string) map[string]kerr.Code {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	req.AllowAutoTopicCreation = allow
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp := s.handleMetadata(ctx, &reqCtx{}, req).(*kmsg.MetadataResponse)
	out := map[string]kerr.Code{}
	for _, rt := range resp.Topics {
		out[*rt.Topic] = kerr.Code(rt.ErrorCode)
	}
	if len(out) != len(topics) {
		t.Fatalf("answered %v for %v", out, topics)
	}
	return out
}

// A Metadata request naming a topic that does not exist creates it when
// the request allows it (v4+'s allow_auto_topic_creation, and every
// request before v4) and auto.create.topics.enable is on (the default),
// through the controller with the cluster's defaults, and answers
// LEADER_NOT_AVAILABLE, as Kafka does; a request that does not allow it
// gets UNKNOWN_TOPIC_OR_PARTITION, and so does every request with the
// setting off. A name Kafka forbids is INVALID_TOPIC_EXCEPTION and never
// forwarded. Before, nothing was created and every unknown or invalid
// name was UNKNOWN_TOPIC_OR_PARTITION.
func TestMetadataCreatesTopicsItNames(t *testing.T) {
	ctx := context.Background()
	s, f := withCreatingAdmin(t, nil)
	if got := metadataOf(t, s, ctx, 9, false, "kept-out"); got["kept-out"] != kerr.UnknownTopicOrPartition {
		t.Errorf("allow_auto_topic_creation=false: %v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	got := metadataOf(t, s, ctx, 9, true, "orders", "t", "bad name", "..")
	want := map[string]kerr.Code{"orders": kerr.LeaderNotAvailable, "t": kerr.None,
		"bad name": kerr.InvalidTopicException, "..": kerr.InvalidTopicException}
	for name, c := range want {
		if got[name] != c {
			t.Errorf("v9 allowing creation, %q: %s, want %s", name, got[name], c)
		}
	}
	if got := metadataOf(t, s, ctx, 3, false, "legacy"); got["legacy"] != kerr.LeaderNotAvailable {
		t.Errorf("v3 (no allow flag: always allowed): %v, want LEADER_NOT_AVAILABLE", got)
	}
	if got := metadataOf(t, s, ctx, 9, false, "bad/name"); got["bad/name"] != kerr.InvalidTopicException {
		t.Errorf("an invalid name not to be created: %v, want INVALID_TOPIC_EXCEPTION", got)
	}
	asked := f.askedFor()
	if len(asked) != 2 || asked[0] != "orders" || asked[1] != "legacy" {
		t.Fatalf("controller asked to create %v, want [orders legacy]", asked)
	}
	for _, spec := range f.asked {
		if spec.GetNumPartitions() != 0 || spec.GetReplicationFactor() != 0 || len(spec.GetConfigs()) != 0 {
			t.Errorf("asked for %v, want the controller's defaults (0, 0, no configs)", spec)
		}
	}

	off, fo := withCreatingAdmin(t, map[string]string{"auto.create.topics.enable": "false"})
	if got := metadataOf(t, off, ctx, 9, true, "orders"); got["orders"] != kerr.UnknownTopicOrPartition {
		t.Errorf("auto.create.topics.enable=false: %v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	if got := metadataOf(t, off, ctx, 3, false, "orders"); got["orders"] != kerr.UnknownTopicOrPartition {
		t.Errorf("auto.create.topics.enable=false, v3: %v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	if asked := fo.askedFor(); len(asked) != 0 {
		t.Errorf("auto.create.topics.enable=false: controller asked to create %v", asked)
	}
}

// A topic another Metadata request is having created is not asked for
// again: the second request is answered UNKNOWN_TOPIC_OR_PARTITION
// (retriable) while the first waits for the controller, as Kafka's
// inflightTopics does; once it is done, a request asks again and the
// controller's TOPIC_ALREADY_EXISTS is LEADER_NOT_AVAILABLE too.
func TestMetadataCreatesATopicOnceForRequestsAtOnce(t *testing.T) {
	ctx := context.Background()
	s, f := withCreatingAdmin(t, nil)
	f.arrived, f.hold = make(chan struct{}), make(chan struct{})
	first := make(chan map[string]kerr.Code, 1)
	go func() { first <- metadataOf(t, s, ctx, 9, true, "orders") }()
	select {
	case <-f.arrived:
	case got := <-first:
		t.Fatalf("first request answered %v without asking the controller", got)
	}
	if got := metadataOf(t, s, ctx, 9, true, "orders"); got["orders"] != kerr.UnknownTopicOrPartition {
		t.Errorf("second request while the first creates: %v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	close(f.hold)
	if got := <-first; got["orders"] != kerr.LeaderNotAvailable {
		t.Errorf("first request: %v, want LEADER_NOT_AVAILABLE", got)
	}
	if asked := f.askedFor(); len(asked) != 1 {
		t.Fatalf("controller asked %v, want orders once", asked)
	}
	f.hold = nil
	if got := metadataOf(t, s, ctx, 9, true, "orders"); got["orders"] != kerr.LeaderNotAvailable {
		t.Errorf("a request after the creation (TOPIC_ALREADY_EXISTS): %v, want LEADER_NOT_AVAILABLE", got)
	}
}

// With authorization on, creating needs Create on the topic or on Cluster,
// as CreateTopics does and as Kafka's Metadata checks it (after Describe,
// which every named topic needs first): without it the topic is
// TOPIC_AUTHORIZATION_FAILED and not forwarded; with it the topic is
// created; without creation allowed the ACLs are not asked.
func TestMetadataCreatesOnlyWhatTheCallerMayCreate(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	rules := "allow User:alice Create Topic:alice-*\nallow User:carol Create Cluster\n" +
		"allow User:alice Describe Topic:*\nallow User:carol Describe Topic:*\n"
	if err := os.WriteFile(acl, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(authz.Options{Config: authz.Config{ACLFile: acl, SuperUsers: []string{"User:admin"}}, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	s, f := withCreatingAdmin(t, nil)
	s.opts.Authorizer = a
	alice := identity.With(context.Background(), identity.ForUser("alice"))
	got := metadataOf(t, s, alice, 9, true, "alice-1", "bob-1", "bad name")
	want := map[string]kerr.Code{"alice-1": kerr.LeaderNotAvailable, "bob-1": kerr.TopicAuthorizationFailed, "bad name": kerr.TopicAuthorizationFailed}
	for name, c := range want {
		if got[name] != c {
			t.Errorf("alice, %q: %s, want %s", name, got[name], c)
		}
	}
	if got := metadataOf(t, s, alice, 9, false, "bob-2"); got["bob-2"] != kerr.UnknownTopicOrPartition {
		t.Errorf("alice, bob-2 not to be created: %v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	carol := identity.With(context.Background(), identity.ForUser("carol"))
	if got := metadataOf(t, s, carol, 9, true, "bob-1"); got["bob-1"] != kerr.LeaderNotAvailable {
		t.Errorf("carol (Create on Cluster), bob-1: %v, want LEADER_NOT_AVAILABLE", got)
	}
	if asked := f.askedFor(); len(asked) != 2 || asked[0] != "alice-1" || asked[1] != "bob-1" {
		t.Fatalf("controller asked to create %v, want [alice-1 bob-1]", asked)
	}
}

// __consumer_offsets named by a Metadata request that may create it is
// created as the group coordinator creates it (its own partitions,
// replication and configs), not with the cluster's topic defaults, as
// Kafka's AutoTopicCreationManager makes it, and is marked internal.
func TestMetadataCreatesTheOffsetsTopicAsTheCoordinatorDoes(t *testing.T) {
	s, f := withCreatingAdmin(t, nil)
	asked := 0
	s.opts.CreateOffsetsTopic = func(context.Context) error { asked++; return nil }
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("__consumer_offsets")
	req.Topics = append(req.Topics, rt)
	resp := s.handleMetadata(context.Background(), &reqCtx{}, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || kerr.Code(resp.Topics[0].ErrorCode) != kerr.LeaderNotAvailable || !resp.Topics[0].IsInternal {
		t.Fatalf("answered %+v, want __consumer_offsets LEADER_NOT_AVAILABLE, internal", resp.Topics)
	}
	if asked != 1 || len(f.askedFor()) != 0 {
		t.Fatalf("offsets topic asked for %d times, CreateTopics for %v; want once, none", asked, f.askedFor())
	}
}
