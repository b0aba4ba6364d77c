package kafkaapi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/kerr"
)

// aclAdmin answers the ACL calls as the controller does, with the same
// authorization policy, validation and filter (authz), over bindings held
// in memory instead of etcd.
type aclAdmin struct {
	adminv1.AdminServiceClient
	az *authz.Authorizer
	mu sync.Mutex
	bs []authz.Binding
}

func (f *aclAdmin) CreateAcls(ctx context.Context, in *adminv1.CreateAclsRequest, _ ...grpc.CallOption) (*adminv1.CreateAclsResponse, error) {
	if _, err := f.az.Authorize(ctx, adminv1.AdminService_CreateAcls_FullMethodName, in); err != nil {
		return nil, kerr.ToStatus(err).Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &adminv1.CreateAclsResponse{}
	for _, c := range in.GetCreations() {
		b, r := authz.BindingFromProto(c), &adminv1.AclResult{}
		if err := b.Validate(); err != nil {
			r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(kerr.CodeOf(err)), kerr.As(err).Message
		} else {
			f.bs = append(f.bs, b)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (f *aclAdmin) DescribeAcls(ctx context.Context, in *adminv1.DescribeAclsRequest, _ ...grpc.CallOption) (*adminv1.DescribeAclsResponse, error) {
	if _, err := f.az.Authorize(ctx, adminv1.AdminService_DescribeAcls_FullMethodName, in); err != nil {
		return nil, kerr.ToStatus(err).Err()
	}
	flt := authz.FilterFromProto(in.GetFilter())
	if err := flt.Validate(); err != nil {
		return nil, kerr.ToStatus(err).Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &adminv1.DescribeAclsResponse{}
	for _, b := range f.bs {
		if flt.Matches(b) {
			resp.Bindings = append(resp.Bindings, b.Proto())
		}
	}
	return resp, nil
}

func (f *aclAdmin) DeleteAcls(ctx context.Context, in *adminv1.DeleteAclsRequest, _ ...grpc.CallOption) (*adminv1.DeleteAclsResponse, error) {
	if _, err := f.az.Authorize(ctx, adminv1.AdminService_DeleteAcls_FullMethodName, in); err != nil {
		return nil, kerr.ToStatus(err).Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &adminv1.DeleteAclsResponse{}
	for _, pf := range in.GetFilters() {
		flt, r := authz.FilterFromProto(pf), &adminv1.DeleteAclsResult{}
		kept := f.bs[:0:0]
		for _, b := range f.bs {
			if flt.Matches(b) {
				r.Deleted = append(r.Deleted, b.Proto())
			} else {
				kept = append(kept, b)
			}
		}
		f.bs = kept
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func withACLAdmin(t *testing.T) (*Server, *aclAdmin) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(file, []byte("allow User:ops Alter Cluster\nallow User:viewer Describe Cluster\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Options{Config: authz.Config{ACLFile: file, SuperUsers: []string{"User:admin"}}, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &aclAdmin{az: az}
	return New(Options{Authorizer: az, Admin: func(context.Context) (adminv1.AdminServiceClient, error) { return f, nil }}), f
}

func creation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm
	return c
}

func TestACLAPIsAreAdvertised(t *testing.T) {
	s, _ := withACLAdmin(t)
	for _, k := range []kmsg.Key{kmsg.DescribeACLs, kmsg.CreateACLs, kmsg.DeleteACLs} {
		a, ok := s.table[int16(k)]
		if !ok || a.versions != (VersionRange{1, 3}) {
			t.Errorf("%s: advertised %v (%v), want versions 1-3", k.Name(), a.versions, ok)
		}
	}
}

func TestCreateDescribeDeleteACLsOverKafka(t *testing.T) {
	s, _ := withACLAdmin(t)
	ctx := as("ops")
	create := kmsg.NewPtrCreateACLsRequest()
	create.SetVersion(3)
	create.Creations = []kmsg.CreateACLsRequestCreation{
		creation(kmsg.ACLResourceTypeTopic, "foo", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		creation(kmsg.ACLResourceTypeTopic, "*", kmsg.ACLResourcePatternTypeLiteral, "User:bob", "*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow),
		creation(kmsg.ACLResourceTypeTopic, "fo", kmsg.ACLResourcePatternTypePrefixed, "User:alice", "10.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny),
		creation(kmsg.ACLResourceTypeTopic, "bar", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		creation(kmsg.ACLResourceTypeGroup, "g", kmsg.ACLResourcePatternTypeAny, "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		creation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAllow),
		creation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		creation(kmsg.ACLResourceTypeCluster, "c", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow),
		creation(kmsg.ACLResourceTypeTransactionalId, "tx", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
	}
	cresp := s.handleCreateACLs(ctx, &reqCtx{}, create).(*kmsg.CreateACLsResponse)
	wantCreate := []string{"", "", "", "", "Invalid patternType ANY", "Invalid operation ANY",
		"expected a string in format principalType:principalName but got alice",
		"The only valid name for the CLUSTER resource is kafka-cluster", "Resource type TRANSACTIONAL_ID is not supported"}
	if len(cresp.Results) != len(wantCreate) {
		t.Fatalf("%d results for %d creations", len(cresp.Results), len(wantCreate))
	}
	for i, w := range wantCreate {
		r := cresp.Results[i]
		if w == "" && r.ErrorCode != 0 || w != "" && (r.ErrorCode != int16(kerr.InvalidRequest) || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, w)) {
			t.Errorf("creation %d: code %d message %v, want %q", i, r.ErrorCode, r.ErrorMessage, w)
		}
	}

	describe := func(user string, name *string, pt kmsg.ACLResourcePatternType) *kmsg.DescribeACLsResponse {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.SetVersion(3)
		req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceTypeTopic, name, pt
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return s.handleDescribeACLs(as(user), &reqCtx{}, req).(*kmsg.DescribeACLsResponse)
	}
	// MATCH on "foo": the literal foo, the literal wildcard and the prefix fo.
	d := describe("viewer", str("foo"), kmsg.ACLResourcePatternTypeMatch)
	if d.ErrorCode != 0 || len(d.Resources) != 3 {
		t.Fatalf("MATCH foo: code %d, %d resources, want the 3 patterns that apply: %+v", d.ErrorCode, len(d.Resources), d.Resources)
	}
	names := map[string]kmsg.ACLResourcePatternType{}
	for _, r := range d.Resources {
		names[r.ResourceName] = r.ResourcePatternType
	}
	if names["foo"] != kmsg.ACLResourcePatternTypeLiteral || names["*"] != kmsg.ACLResourcePatternTypeLiteral || names["fo"] != kmsg.ACLResourcePatternTypePrefixed {
		t.Errorf("MATCH foo answered %v", names)
	}
	for _, r := range d.Resources {
		if r.ResourceName == "fo" && (len(r.ACLs) != 1 || r.ACLs[0].Host != "10.0.0.1" || r.ACLs[0].Operation != kmsg.ACLOperationWrite || r.ACLs[0].PermissionType != kmsg.ACLPermissionTypeDeny) {
			t.Errorf("prefixed entry: %+v", r.ACLs)
		}
	}
	if d := describe("viewer", str("foo"), kmsg.ACLResourcePatternTypeAny); len(d.Resources) != 1 || d.Resources[0].ResourceName != "foo" {
		t.Errorf("ANY with a name matches that name exactly: %+v", d.Resources)
	}
	if d := describe("viewer", nil, kmsg.ACLResourcePatternTypeUnknown); d.ErrorCode != int16(kerr.InvalidRequest) {
		t.Errorf("UNKNOWN pattern type in a filter: code %d", d.ErrorCode)
	}
	// Describe needs Describe on the cluster.
	if d := describe("alice", nil, kmsg.ACLResourcePatternTypeAny); d.ErrorCode != int16(kerr.ClusterAuthorizationFailed) || len(d.Resources) != 0 {
		t.Errorf("describe without Describe on Cluster: code %d, %d resources", d.ErrorCode, len(d.Resources))
	}

	// Create and delete need Alter on the cluster, per item.
	deny := kmsg.NewPtrCreateACLsRequest()
	deny.SetVersion(2)
	deny.Creations = create.Creations[:2]
	for _, r := range s.handleCreateACLs(as("viewer"), &reqCtx{}, deny).(*kmsg.CreateACLsResponse).Results {
		if r.ErrorCode != int16(kerr.ClusterAuthorizationFailed) {
			t.Errorf("create without Alter on Cluster: code %d", r.ErrorCode)
		}
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.SetVersion(3)
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, str("foo"), kmsg.ACLResourcePatternTypeMatch
	f.Principal, f.Operation, f.PermissionType = str("User:alice"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	if r := s.handleDeleteACLs(as("viewer"), &reqCtx{}, del).(*kmsg.DeleteACLsResponse).Results; len(r) != 1 || r[0].ErrorCode != int16(kerr.ClusterAuthorizationFailed) {
		t.Errorf("delete without Alter on Cluster: %+v", r)
	}
	r := s.handleDeleteACLs(ctx, &reqCtx{}, del).(*kmsg.DeleteACLsResponse).Results
	if len(r) != 1 || r[0].ErrorCode != 0 || len(r[0].MatchingACLs) != 2 {
		t.Fatalf("delete alice's bindings matching foo: %+v", r)
	}
	if d := describe("viewer", nil, kmsg.ACLResourcePatternTypeAny); len(d.Resources) != 2 {
		t.Errorf("left after the delete: %+v, want * (bob) and bar (alice)", d.Resources)
	}
}

// An anonymous client (a PLAINTEXT listener) is refused any request the
// broker forwards to the controller while authorization is on. Before,
// the call was forwarded with no principal to speak for, and the
// controller authorized it as the forwarding broker: super.users listing
// the brokers, or an ACL granting one, let anyone on that port create
// topics, rewrite ACLs and set passwords.
func TestAnAnonymousClientsAdminRequestIsNotForwarded(t *testing.T) {
	s, f := withACLAdmin(t)
	fa := &fakeAdmin{}
	s.opts.Admin = func(context.Context) (adminv1.AdminServiceClient, error) { return fa, nil }
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "anon", 1, 1
	req.Topics = append(req.Topics, rt)
	resp := s.handleCreateTopics(context.Background(), &reqCtx{}, req).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || kerr.Code(resp.Topics[0].ErrorCode) != kerr.ClusterAuthorizationFailed {
		t.Fatalf("an anonymous CreateTopics answered %+v, want CLUSTER_AUTHORIZATION_FAILED", resp.Topics)
	}
	if len(fa.created) != 0 || len(f.bs) != 0 {
		t.Fatalf("an anonymous CreateTopics was forwarded: %v", fa.created)
	}
}
