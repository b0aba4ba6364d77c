package kafkaapi

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
)

// describingAdmin answers DescribeConfigs with retention.ms of a topic set
// in every layer, and records the requests.
type describingAdmin struct {
	fakeAdmin
	described []*adminv1.DescribeConfigsRequest
}

func (f *describingAdmin) DescribeConfigs(_ context.Context, in *adminv1.DescribeConfigsRequest, _ ...grpc.CallOption) (*adminv1.DescribeConfigsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.described = append(f.described, in)
	syn := func(name, value string, src adminv1.ConfigSource) *adminv1.ConfigSynonym {
		return &adminv1.ConfigSynonym{Name: name, Value: value, Source: src}
	}
	return &adminv1.DescribeConfigsResponse{Results: []*adminv1.ConfigDescription{{
		Resource: in.GetResources()[0],
		Entries: []*adminv1.ConfigEntry{{
			Name: "retention.ms", Value: "1000", Source: adminv1.ConfigSource_CONFIG_SOURCE_TOPIC, Dynamic: true, Doc: "How long to keep a closed segment.",
			Synonyms: []*adminv1.ConfigSynonym{
				syn("retention.ms", "1000", adminv1.ConfigSource_CONFIG_SOURCE_TOPIC),
				syn("log.retention.ms", "2000", adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER),
				syn("log.retention.ms", "3000", adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG),
				syn("log.retention.ms", "604800000", adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT),
			},
		}},
	}}}, nil
}

func describeTopic(t *testing.T, s *Server, version int16, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(version)
	req.IncludeSynonyms, req.IncludeDocumentation = synonyms, docs
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = resourceTopic, "t"
	req.Resources = append(req.Resources, r)
	resp := s.handleDescribeConfigs(context.Background(), &reqCtx{}, req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("describe: %+v", resp.Resources)
	}
	return resp.Resources[0].Configs[0]
}

// DescribeConfigs with include_synonyms lists every layer setting a
// config in Kafka's order (the topic's override, then the broker-level
// name's dynamic default, static and default values); without it, none.
// include_documentation (v3+) adds the documentation, and v3+ the type.
// The controller is asked for the topic as this broker resolves it.
func TestDescribeConfigsSynonymsDocumentationAndType(t *testing.T) {
	f := &describingAdmin{}
	s := New(Options{BrokerID: 7, Admin: func(context.Context) (adminv1.AdminServiceClient, error) { return f, nil }})

	c := describeTopic(t, s, 4, true, true)
	type synonym struct {
		name, value string
		src         kmsg.ConfigSource
	}
	var got []synonym
	for _, s := range c.ConfigSynonyms {
		got = append(got, synonym{s.Name, *s.Value, s.Source})
	}
	want := []synonym{
		{"retention.ms", "1000", 1},          // DYNAMIC_TOPIC_CONFIG
		{"log.retention.ms", "2000", 3},      // DYNAMIC_DEFAULT_BROKER_CONFIG
		{"log.retention.ms", "3000", 4},      // STATIC_BROKER_CONFIG
		{"log.retention.ms", "604800000", 5}, // DEFAULT_CONFIG
	}
	if len(got) != len(want) {
		t.Fatalf("synonyms %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("synonyms %v, want %v", got, want)
		}
	}
	if c.Documentation == nil || *c.Documentation != "How long to keep a closed segment." {
		t.Errorf("documentation %v, want the registry's", c.Documentation)
	}
	if c.ConfigType != 5 { // LONG
		t.Errorf("config type %d, want LONG (5)", c.ConfigType)
	}
	if f.described[0].ForBroker == nil || f.described[0].GetForBroker() != 7 {
		t.Errorf("asked for broker %v's view, want 7", f.described[0].ForBroker)
	}

	if c := describeTopic(t, s, 4, false, false); len(c.ConfigSynonyms) != 0 || c.Documentation != nil {
		t.Errorf("without include_synonyms and include_documentation: %d synonyms, documentation %v", len(c.ConfigSynonyms), c.Documentation)
	}
}

func alterConfigsRequest(validateOnly bool, resources ...kmsg.AlterConfigsRequestResource) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.SetVersion(2)
	req.ValidateOnly = validateOnly
	req.Resources = resources
	return req
}

func wholeSet(typ kmsg.ConfigResourceType, name string, kv ...*string) kmsg.AlterConfigsRequestResource {
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = *kv[i], kv[i+1]
		r.Configs = append(r.Configs, c)
	}
	return r
}

// AlterConfigs (API 33) forwards each resource's configs as its whole set
// (replace): the controller removes every key not named in the same write.
// A null value leaves its key out of the set; validate_only is forwarded;
// a resource named twice or a key named twice is INVALID_REQUEST and not
// forwarded.
func TestAlterConfigsForwardsTheWholeSet(t *testing.T) {
	s, f := withFakeAdmin()
	req := alterConfigsRequest(true,
		wholeSet(resourceTopic, "t", str("retention.ms"), str("1000"), str("segment.ms"), nil),
		wholeSet(resourceBroker, "", str("log.retention.ms"), str("5000")),
		wholeSet(resourceTopic, "dup-key", str("retention.ms"), str("1"), str("retention.ms"), str("2")),
		wholeSet(resourceTopic, "twice"), wholeSet(resourceTopic, "twice"),
	)
	resp := s.handleAlterConfigs(context.Background(), &reqCtx{}, req).(*kmsg.AlterConfigsResponse)
	codes := map[string]kerr.Code{}
	for _, rr := range resp.Resources {
		codes[rr.ResourceName] = kerr.Code(rr.ErrorCode)
	}
	if codes["t"] != 0 || codes[""] != 0 || codes["dup-key"] != kerr.InvalidRequest || codes["twice"] != kerr.InvalidRequest || len(resp.Resources) != 5 {
		t.Fatalf("answers %v, want t and the cluster default altered, dup-key and twice refused", codes)
	}
	if len(f.altered) != 2 {
		t.Fatalf("forwarded %v, want t and the cluster default", f.altered)
	}
	for _, ar := range f.altered {
		if !ar.GetReplace() {
			t.Errorf("%v forwarded without replace: its other keys would stay", ar.GetResource())
		}
		for _, op := range ar.GetOps() {
			if op.GetOp() != adminv1.ConfigOpType_CONFIG_OP_TYPE_SET {
				t.Errorf("%v: op %v, want only SETs", ar.GetResource(), op)
			}
		}
	}
	if ops := f.altered[0].GetOps(); len(ops) != 1 || ops[0].GetName() != "retention.ms" || ops[0].GetValue() != "1000" {
		t.Errorf("topic t's set %v, want retention.ms=1000 alone (segment.ms's null left out)", ops)
	}
	if !f.validateOnly {
		t.Errorf("validate_only was not forwarded")
	}
}
