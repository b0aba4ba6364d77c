package kafkaapi

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/kerr"
)

// quotaAdmin authorizes the client quota calls as the controller does and
// records what the listener forwarded.
type quotaAdmin struct {
	adminv1.AdminServiceClient
	az       *authz.Authorizer
	describe *adminv1.DescribeClientQuotasRequest
	alter    *adminv1.AlterClientQuotasRequest
}

func (f *quotaAdmin) DescribeClientQuotas(ctx context.Context, in *adminv1.DescribeClientQuotasRequest, _ ...grpc.CallOption) (*adminv1.DescribeClientQuotasResponse, error) {
	if _, err := f.az.Authorize(ctx, adminv1.AdminService_DescribeClientQuotas_FullMethodName, in); err != nil {
		return nil, kerr.ToStatus(err).Err()
	}
	f.describe = in
	return &adminv1.DescribeClientQuotasResponse{Entries: []*adminv1.ClientQuotaEntry{{
		Entity: []*adminv1.ClientQuotaEntityPart{{EntityType: "user", EntityName: str("alice")}, {EntityType: "client-id"}},
		Values: map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048},
	}}}, nil
}

func (f *quotaAdmin) AlterClientQuotas(ctx context.Context, in *adminv1.AlterClientQuotasRequest, _ ...grpc.CallOption) (*adminv1.AlterClientQuotasResponse, error) {
	if _, err := f.az.Authorize(ctx, adminv1.AdminService_AlterClientQuotas_FullMethodName, in); err != nil {
		return nil, kerr.ToStatus(err).Err()
	}
	f.alter = in
	resp := &adminv1.AlterClientQuotasResponse{}
	for i, e := range in.GetEntries() {
		r := &adminv1.AlterClientQuotasResult{Entity: e.GetEntity()}
		if i == 1 {
			r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(kerr.InvalidRequest), "Invalid configuration key bogus"
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func withQuotaAdmin(t *testing.T) (*Server, *quotaAdmin) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte("allow User:ops AlterConfigs Cluster\nallow User:ops DescribeConfigs Cluster\nallow User:viewer DescribeConfigs Cluster\nallow User:alterer Alter Cluster\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Options{Config: authz.Config{ACLFile: file}, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &quotaAdmin{az: az}
	return New(Options{Authorizer: az, Admin: func(context.Context) (adminv1.AdminServiceClient, error) { return f, nil }}), f
}

func TestClientQuotaAPIsAreAdvertised(t *testing.T) {
	s, _ := withQuotaAdmin(t)
	for _, k := range []kmsg.Key{kmsg.DescribeClientQuotas, kmsg.AlterClientQuotas} {
		if a, ok := s.table[int16(k)]; !ok || a.versions != (VersionRange{0, 1}) {
			t.Errorf("%s: advertised %v (%v), want versions 0-1", k.Name(), a.versions, ok)
		}
	}
}

// DescribeClientQuotas reaches the controller with Kafka's match types
// spelled out, and its answer comes back with default names null and the
// values in key order; it needs DescribeConfigs on the cluster.
func TestDescribeClientQuotasOverKafka(t *testing.T) {
	s, f := withQuotaAdmin(t)
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.SetVersion(1)
	req.Strict = true
	for _, c := range []struct {
		typ   string
		match kmsg.QuotasMatchType
		name  *string
	}{{"user", 0, str("alice")}, {"client-id", 1, nil}, {"ip", 2, nil}, {"user", 9, nil}} {
		comp := kmsg.NewDescribeClientQuotasRequestComponent()
		comp.EntityType, comp.MatchType, comp.Match = c.typ, c.match, c.name
		req.Components = append(req.Components, comp)
	}
	resp := s.handleDescribeClientQuotas(as("viewer"), &reqCtx{}, req).(*kmsg.DescribeClientQuotasResponse)
	if resp.ErrorCode != 0 || len(resp.Entries) != 1 {
		t.Fatalf("describe: code %d, %+v", resp.ErrorCode, resp.Entries)
	}
	want := &adminv1.DescribeClientQuotasRequest{Strict: true, Components: []*adminv1.ClientQuotaFilterComponent{
		{EntityType: "user", MatchType: "EXACT", Match: str("alice")}, {EntityType: "client-id", MatchType: "DEFAULT"},
		{EntityType: "ip", MatchType: "SPECIFIED"}, {EntityType: "user", MatchType: "9"}}}
	if !proto.Equal(f.describe, want) {
		t.Errorf("forwarded %v, want %v", f.describe, want)
	}
	e := resp.Entries[0]
	if len(e.Entity) != 2 || e.Entity[0].Type != "user" || e.Entity[0].Name == nil || *e.Entity[0].Name != "alice" || e.Entity[1].Type != "client-id" || e.Entity[1].Name != nil {
		t.Errorf("entity %+v", e.Entity)
	}
	if len(e.Values) != 2 || e.Values[0].Key != "consumer_byte_rate" || e.Values[0].Value != 2048 || e.Values[1].Key != "producer_byte_rate" || e.Values[1].Value != 1024 {
		t.Errorf("values %+v", e.Values)
	}
	// Kafka: DESCRIBE_CONFIGS on the cluster; Alter is not enough.
	if resp := s.handleDescribeClientQuotas(as("alterer"), &reqCtx{}, req).(*kmsg.DescribeClientQuotasResponse); resp.ErrorCode != int16(kerr.ClusterAuthorizationFailed) || len(resp.Entries) != 0 {
		t.Errorf("describe without DescribeConfigs on Cluster: code %d, %d entries", resp.ErrorCode, len(resp.Entries))
	}
}

// AlterClientQuotas reaches the controller op for op (validate_only,
// remove, default entities as absent names) and each entity gets its own
// result; a refused request gives every entity the error.
func TestAlterClientQuotasOverKafka(t *testing.T) {
	s, f := withQuotaAdmin(t)
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.SetVersion(1)
	req.ValidateOnly = true
	entry := func(ops []kmsg.AlterClientQuotasRequestEntryOp, parts ...kmsg.AlterClientQuotasRequestEntryEntity) kmsg.AlterClientQuotasRequestEntry {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity, e.Ops = parts, ops
		return e
	}
	part := func(typ string, name *string) kmsg.AlterClientQuotasRequestEntryEntity {
		p := kmsg.NewAlterClientQuotasRequestEntryEntity()
		p.Type, p.Name = typ, name
		return p
	}
	op := func(key string, v float64, remove bool) kmsg.AlterClientQuotasRequestEntryOp {
		o := kmsg.NewAlterClientQuotasRequestEntryOp()
		o.Key, o.Value, o.Remove = key, v, remove
		return o
	}
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{
		entry([]kmsg.AlterClientQuotasRequestEntryOp{op("producer_byte_rate", 1024, false), op("consumer_byte_rate", 0, true)}, part("user", str("alice")), part("client-id", nil)),
		entry([]kmsg.AlterClientQuotasRequestEntryOp{op("bogus", 1, false)}, part("client-id", str("app"))),
	}
	resp := s.handleAlterClientQuotas(as("ops"), &reqCtx{}, req).(*kmsg.AlterClientQuotasResponse)
	want := &adminv1.AlterClientQuotasRequest{ValidateOnly: true, Entries: []*adminv1.ClientQuotaAlteration{
		{Entity: []*adminv1.ClientQuotaEntityPart{{EntityType: "user", EntityName: str("alice")}, {EntityType: "client-id"}},
			Ops: []*adminv1.ClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "consumer_byte_rate", Remove: true}}},
		{Entity: []*adminv1.ClientQuotaEntityPart{{EntityType: "client-id", EntityName: str("app")}},
			Ops: []*adminv1.ClientQuotaOp{{Key: "bogus", Value: 1}}},
	}}
	if !proto.Equal(f.alter, want) {
		t.Errorf("forwarded %v, want %v", f.alter, want)
	}
	if len(resp.Entries) != 2 || resp.Entries[0].ErrorCode != 0 || resp.Entries[1].ErrorCode != int16(kerr.InvalidRequest) ||
		resp.Entries[1].ErrorMessage == nil || *resp.Entries[1].ErrorMessage != "Invalid configuration key bogus" ||
		len(resp.Entries[0].Entity) != 2 || resp.Entries[0].Entity[1].Name != nil || *resp.Entries[1].Entity[0].Name != "app" {
		t.Fatalf("answer %+v", resp.Entries)
	}
	// Kafka: ALTER_CONFIGS on the cluster; DescribeConfigs is not enough.
	resp = s.handleAlterClientQuotas(as("viewer"), &reqCtx{}, req).(*kmsg.AlterClientQuotasResponse)
	if len(resp.Entries) != 2 {
		t.Fatalf("refused request: %+v", resp.Entries)
	}
	for _, e := range resp.Entries {
		if e.ErrorCode != int16(kerr.ClusterAuthorizationFailed) || len(e.Entity) == 0 {
			t.Errorf("alter without AlterConfigs on Cluster: %+v", e)
		}
	}
}
