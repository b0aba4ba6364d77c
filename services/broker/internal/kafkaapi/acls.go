package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// Kafka's ACL APIs are forwarded to the active controller's AdminService
// like the other admin requests: it authorizes the client (Describe on
// Cluster to list, Alter on Cluster to change: CLUSTER_AUTHORIZATION_FAILED
// otherwise), validates each creation and writes the bindings to etcd, from
// which every broker's authorizer takes them. Kafka's enums travel as
// their names (kmsg spells them as Kafka does); one tidemark has no code
// for (INJECT_FAULT) is shown as UNKNOWN.

func optString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

func (s *Server) handleCreateACLs(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	greq := &adminv1.CreateAclsRequest{}
	for _, c := range req.Creations {
		greq.Creations = append(greq.Creations, &adminv1.AclBinding{
			ResourceType: c.ResourceType.String(), ResourceName: c.ResourceName, PatternType: c.ResourcePatternType.String(),
			Principal: c.Principal, Host: c.Host, Operation: c.Operation.String(), PermissionType: c.PermissionType.String(),
		})
	}
	fail := func(err error) kmsg.Response {
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = code(err), message(err)
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	if len(req.Creations) == 0 {
		return resp
	}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	gresp, err := cli.CreateAcls(fctx, greq)
	if err != nil {
		return fail(err)
	}
	for _, g := range gresp.GetResults() {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = protoCode(g.GetErrorCode()), optMessage(g.GetErrorMessage())
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func (s *Server) handleDescribeACLs(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	greq := &adminv1.DescribeAclsRequest{Filter: &adminv1.AclBindingFilter{
		ResourceType: req.ResourceType.String(), ResourceName: optString(req.ResourceName), PatternType: req.ResourcePatternType.String(),
		Principal: optString(req.Principal), Host: optString(req.Host), Operation: req.Operation.String(), PermissionType: req.PermissionType.String(),
	}}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		return resp
	}
	defer cancel()
	gresp, err := cli.DescribeAcls(fctx, greq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
		return resp
	}
	// One resource entry per pattern, its entries under it, as Kafka answers.
	type pattern struct{ typ, name, pt string }
	at := map[pattern]int{}
	for _, b := range gresp.GetBindings() {
		p := pattern{b.GetResourceType(), b.GetResourceName(), b.GetPatternType()}
		i, ok := at[p]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = resourceType(p.typ), p.name, patternType(p.pt)
			resp.Resources = append(resp.Resources, r)
			i = len(resp.Resources) - 1
			at[p] = i
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.GetPrincipal(), b.GetHost(), operation(b.GetOperation()), permissionType(b.GetPermissionType())
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp
}

func (s *Server) handleDeleteACLs(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	greq := &adminv1.DeleteAclsRequest{}
	for _, f := range req.Filters {
		greq.Filters = append(greq.Filters, &adminv1.AclBindingFilter{
			ResourceType: f.ResourceType.String(), ResourceName: optString(f.ResourceName), PatternType: f.ResourcePatternType.String(),
			Principal: optString(f.Principal), Host: optString(f.Host), Operation: f.Operation.String(), PermissionType: f.PermissionType.String(),
		})
	}
	fail := func(err error) kmsg.Response {
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = code(err), message(err)
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	if len(req.Filters) == 0 {
		return resp
	}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	gresp, err := cli.DeleteAcls(fctx, greq)
	if err != nil {
		return fail(err)
	}
	for _, g := range gresp.GetResults() {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = protoCode(g.GetErrorCode()), optMessage(g.GetErrorMessage())
		for _, b := range g.GetDeleted() {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = resourceType(b.GetResourceType()), b.GetResourceName(), patternType(b.GetPatternType())
			m.Principal, m.Host, m.Operation, m.PermissionType = b.GetPrincipal(), b.GetHost(), operation(b.GetOperation()), permissionType(b.GetPermissionType())
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// The parse functions fall back to UNKNOWN (0) for a name Kafka has no
// code for.
func resourceType(s string) kmsg.ACLResourceType {
	v, _ := kmsg.ParseACLResourceType(s)
	return v
}

func patternType(s string) kmsg.ACLResourcePatternType {
	v, _ := kmsg.ParseACLResourcePatternType(s)
	return v
}

func operation(s string) kmsg.ACLOperation {
	v, _ := kmsg.ParseACLOperation(s)
	return v
}

func permissionType(s string) kmsg.ACLPermissionType {
	v, _ := kmsg.ParseACLPermissionType(s)
	return v
}
