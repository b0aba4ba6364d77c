package kafkaapi

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
)

// fakeAdmin is the active controller's AdminService as far as the tests
// below reach it: it records what is forwarded. CreateTopics answers
// NOT_CONTROLLER (so no metadata is needed to answer), AlterConfigs
// succeeds.
type fakeAdmin struct {
	adminv1.AdminServiceClient
	mu      sync.Mutex
	created []*adminv1.TopicSpec
	altered []*adminv1.AlterConfigsResource
	// validateOnly is the last AlterConfigs call's validate_only.
	validateOnly bool
	elected      []*adminv1.ElectLeadersRequest
}

func (f *fakeAdmin) CreateTopics(_ context.Context, in *adminv1.CreateTopicsRequest, _ ...grpc.CallOption) (*adminv1.CreateTopicsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, in.GetTopics()...)
	return nil, kerr.New(kerr.NotController, "no controller in this test")
}

func (f *fakeAdmin) AlterConfigs(_ context.Context, in *adminv1.AlterConfigsRequest, _ ...grpc.CallOption) (*adminv1.AlterConfigsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.altered = append(f.altered, in.GetResources()...)
	f.validateOnly = in.GetValidateOnly()
	resp := &adminv1.AlterConfigsResponse{}
	for _, r := range in.GetResources() {
		resp.Results = append(resp.Results, &adminv1.AlterConfigsResult{Resource: r.GetResource()})
	}
	return resp, nil
}

func (f *fakeAdmin) ElectLeaders(_ context.Context, in *adminv1.ElectLeadersRequest, _ ...grpc.CallOption) (*adminv1.ElectLeadersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.elected = append(f.elected, in)
	return &adminv1.ElectLeadersResponse{}, nil
}

func withFakeAdmin() (*Server, *fakeAdmin) {
	f := &fakeAdmin{}
	return New(Options{Admin: func(context.Context) (adminv1.AdminServiceClient, error) { return f, nil }}), f
}

// CreateTopics refuses the counts Kafka refuses, naming the value: -1 is
// the default, anything else below 1 is INVALID_PARTITIONS or
// INVALID_REPLICATION_FACTOR, and the topic is not forwarded. Before, any
// negative count was taken as the default and the topic created.
func TestCreateTopicsRefusesCountsBelowOneOtherThanDefault(t *testing.T) {
	s, f := withFakeAdmin()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	for _, c := range []struct {
		name string
		np   int32
		rf   int16
	}{{"defaults", -1, -1}, {"np-5", -5, 1}, {"np0", 0, 1}, {"rf-3", 1, -3}, {"rf0", 3, 0}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.name, c.np, c.rf
		req.Topics = append(req.Topics, rt)
	}
	resp := s.handleCreateTopics(context.Background(), &reqCtx{}, req).(*kmsg.CreateTopicsResponse)
	want := map[string]struct {
		code kerr.Code
		says string
	}{
		"defaults": {kerr.NotController, ""}, // forwarded, the fake's answer
		"np-5":     {kerr.InvalidPartitions, "-5"},
		"np0":      {kerr.InvalidPartitions, "0"},
		"rf-3":     {kerr.InvalidReplicationFactor, "-3"},
		"rf0":      {kerr.InvalidReplicationFactor, "0"},
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), len(want))
	}
	for _, rt := range resp.Topics {
		w := want[rt.Topic]
		msg := ""
		if rt.ErrorMessage != nil {
			msg = *rt.ErrorMessage
		}
		if kerr.Code(rt.ErrorCode) != w.code || !strings.Contains(msg, w.says) {
			t.Errorf("%s: %s %q, want %s naming %q", rt.Topic, kerr.Code(rt.ErrorCode), msg, w.code, w.says)
		}
	}
	if len(f.created) != 1 || f.created[0].GetName() != "defaults" || f.created[0].GetNumPartitions() != 0 || f.created[0].GetReplicationFactor() != 0 {
		t.Fatalf("forwarded %v, want only the topic with -1 counts, as the defaults (0)", f.created)
	}
}

// A CreateTopics config with a null value is INVALID_CONFIG naming the
// key, as in Kafka, for that topic only; the others are forwarded. Before,
// the entry was dropped and the topic created without it.
func TestCreateTopicsRefusesANullConfigValue(t *testing.T) {
	s, f := withFakeAdmin()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	for _, name := range []string{"null", "set"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = "retention.ms", str("1000")
		if name == "null" {
			c.Value = nil
		}
		rt.Configs = append(rt.Configs, c)
		req.Topics = append(req.Topics, rt)
	}
	resp := s.handleCreateTopics(context.Background(), &reqCtx{}, req).(*kmsg.CreateTopicsResponse)
	got := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt
	}
	if rt := got["null"]; kerr.Code(rt.ErrorCode) != kerr.InvalidConfig || rt.ErrorMessage == nil ||
		*rt.ErrorMessage != "Null value not supported for topic configs: retention.ms" {
		t.Errorf("null value: %s %v, want INVALID_CONFIG naming retention.ms", kerr.Code(rt.ErrorCode), rt.ErrorMessage)
	}
	if rt, ok := got["set"]; !ok || kerr.Code(rt.ErrorCode) != kerr.NotController {
		t.Errorf("the other topic: %s, want forwarded (the fake's NOT_CONTROLLER)", kerr.Code(rt.ErrorCode))
	}
	if len(f.created) != 1 || f.created[0].GetName() != "set" || f.created[0].GetConfigs()["retention.ms"] != "1000" {
		t.Fatalf("forwarded %v, want only the topic whose config has a value", f.created)
	}
}

func alterRequest(resources ...kmsg.IncrementalAlterConfigsRequestResource) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(1)
	req.Resources = resources
	return req
}

func alterResource(typ kmsg.ConfigResourceType, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = typ, name, ops
	return r
}

func setOp(name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, 0, value
	return c
}

func deleteOp(name string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = name, 1
	return c
}

func str(s string) *string { return &s }

// IncrementalAlterConfigs refuses, as Kafka's ConfigAdminManager does, a
// resource named twice in one request (every copy, INVALID_REQUEST), a
// resource naming a key twice (INVALID_REQUEST, "duplicate key"), and
// forwards the rest. Before, every copy was forwarded and applied in turn.
func TestIncrementalAlterConfigsRefusesDuplicates(t *testing.T) {
	s, f := withFakeAdmin()
	req := alterRequest(
		alterResource(2, "twice", setOp("retention.ms", str("1000"))),
		alterResource(2, "ok", setOp("retention.ms", str("1000"))),
		alterResource(2, "twice", deleteOp("retention.ms")),
		alterResource(4, "twice", setOp("log.retention.ms", str("1000"))), // a broker: another resource
		alterResource(2, "keys", setOp("retention.ms", str("1000")), deleteOp("retention.ms")),
	)
	resp := s.handleIncrementalAlterConfigs(context.Background(), &reqCtx{}, req).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 5 {
		t.Fatalf("%d resources answered, want 5", len(resp.Resources))
	}
	for i, w := range []struct {
		code kerr.Code
		says string
	}{{kerr.InvalidRequest, "more than once"}, {0, ""}, {kerr.InvalidRequest, "more than once"}, {0, ""}, {kerr.InvalidRequest, "duplicate key"}} {
		rr := resp.Resources[i]
		msg := ""
		if rr.ErrorMessage != nil {
			msg = *rr.ErrorMessage
		}
		if kerr.Code(rr.ErrorCode) != w.code || !strings.Contains(msg, w.says) {
			t.Errorf("resource %d (%d %q): %s %q, want %s with %q", i, rr.ResourceType, rr.ResourceName, kerr.Code(rr.ErrorCode), msg, w.code, w.says)
		}
	}
	var forwarded []string
	for _, r := range f.altered {
		forwarded = append(forwarded, r.GetResource().GetType().String()+"/"+r.GetResource().GetName())
	}
	if strings.Join(forwarded, ",") != "CONFIG_RESOURCE_TYPE_TOPIC/ok,CONFIG_RESOURCE_TYPE_BROKER/twice" {
		t.Fatalf("forwarded %v, want only topic ok and broker twice", forwarded)
	}
}

// A SET without a value is refused (INVALID_REQUEST, as Kafka's "Null
// value not supported"), not forwarded as the empty string. Before, it set
// the key to "".
func TestIncrementalAlterConfigsRefusesANullSet(t *testing.T) {
	s, f := withFakeAdmin()
	req := alterRequest(alterResource(2, "t", setOp("cleanup.policy", nil)))
	resp := s.handleIncrementalAlterConfigs(context.Background(), &reqCtx{}, req).(*kmsg.IncrementalAlterConfigsResponse)
	rr := resp.Resources[0]
	if kerr.Code(rr.ErrorCode) != kerr.InvalidRequest || rr.ErrorMessage == nil || !strings.Contains(*rr.ErrorMessage, "cleanup.policy") {
		t.Fatalf("null SET answered %s %v, want INVALID_REQUEST naming the key", kerr.Code(rr.ErrorCode), rr.ErrorMessage)
	}
	if len(f.altered) != 0 {
		t.Fatalf("forwarded %v", f.altered)
	}
}

// An election type Kafka does not know is INVALID_REQUEST, not a preferred
// election nobody asked for.
func TestElectLeadersRefusesAnUnknownElectionType(t *testing.T) {
	s, f := withFakeAdmin()
	for _, typ := range []int8{0, 1, 2, -1} {
		req := kmsg.NewPtrElectLeadersRequest()
		req.SetVersion(2)
		req.ElectionType = typ
		resp := s.handleElectLeaders(context.Background(), &reqCtx{}, req).(*kmsg.ElectLeadersResponse)
		want := kerr.None
		if typ > 1 || typ < 0 {
			want = kerr.InvalidRequest
		}
		if got := kerr.Code(resp.ErrorCode); got != want {
			t.Fatalf("election type %d answered %s, want %s", typ, got, want)
		}
	}
	if len(f.elected) != 2 || f.elected[0].GetElectionType() != adminv1.ElectionType_ELECTION_TYPE_PREFERRED ||
		f.elected[1].GetElectionType() != adminv1.ElectionType_ELECTION_TYPE_UNCLEAN {
		t.Fatalf("forwarded %v, want one preferred and one unclean election", f.elected)
	}
}
