package ctrl

import (
	"context"
	"errors"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/kerr"
)

// ACL bindings are not part of the model the loop keeps: they are written
// to etcd here, fenced by this term like every controller write, and every
// broker and controller follows them from etcd (services/aclsync). Reads
// go to etcd too, so a listing right after a change shows it.

// CreateAcls validates each creation (Kafka's messages) and writes the
// valid ones in fenced transactions.
func (a *Active) CreateAcls(ctx context.Context, req *adminv1.CreateAclsRequest) (*adminv1.CreateAclsResponse, error) {
	resp := &adminv1.CreateAclsResponse{Results: make([]*adminv1.AclResult, len(req.GetCreations()))}
	var valid []authz.Binding
	var validAt []int
	for i, c := range req.GetCreations() {
		resp.Results[i] = &adminv1.AclResult{}
		b := authz.BindingFromProto(c)
		if err := b.Validate(); err != nil {
			setACLError(resp.Results[i], err)
			continue
		}
		valid, validAt = append(valid, b), append(validAt, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}
	if err := a.d.Session.CreateACLs(ctx, valid); err != nil {
		if err = a.aclWriteFailed(err); kerr.CodeOf(err) == kerr.NotController {
			return nil, err
		}
		for _, i := range validAt {
			setACLError(resp.Results[i], err)
		}
		return resp, nil
	}
	for _, b := range valid {
		a.log.Info("ACL binding created", "binding", b.String())
	}
	return resp, nil
}

// DescribeAcls lists the bindings the filter matches.
func (a *Active) DescribeAcls(ctx context.Context, req *adminv1.DescribeAclsRequest) (*adminv1.DescribeAclsResponse, error) {
	f := authz.FilterFromProto(req.GetFilter())
	if err := f.Validate(); err != nil {
		return nil, err
	}
	stored, _, err := a.d.Store.ACLs(ctx)
	if err != nil {
		return nil, err
	}
	resp := &adminv1.DescribeAclsResponse{}
	for _, s := range stored {
		if f.Matches(s.Binding) {
			resp.Bindings = append(resp.Bindings, s.Binding.Proto())
		}
	}
	return resp, nil
}

// DeleteAcls deletes, for each filter, the bindings it matches, and
// answers them.
func (a *Active) DeleteAcls(ctx context.Context, req *adminv1.DeleteAclsRequest) (*adminv1.DeleteAclsResponse, error) {
	stored, _, err := a.d.Store.ACLs(ctx)
	if err != nil {
		return nil, err
	}
	resp := &adminv1.DeleteAclsResponse{Results: make([]*adminv1.DeleteAclsResult, len(req.GetFilters()))}
	var keys []string
	seen := map[string]bool{}
	for i, pf := range req.GetFilters() {
		res := &adminv1.DeleteAclsResult{}
		resp.Results[i] = res
		f := authz.FilterFromProto(pf)
		if err := f.Validate(); err != nil {
			res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(kerr.CodeOf(err)), kerr.As(err).Message
			continue
		}
		for _, s := range stored {
			if f.Matches(s.Binding) {
				res.Deleted = append(res.Deleted, s.Binding.Proto())
				if !seen[s.Key] {
					seen[s.Key] = true
					keys = append(keys, s.Key)
				}
			}
		}
	}
	if len(keys) == 0 {
		return resp, nil
	}
	if err := a.d.Session.DeleteACLs(ctx, keys); err != nil {
		return nil, a.aclWriteFailed(err)
	}
	a.log.Info("ACL bindings deleted", "bindings", len(keys))
	return resp, nil
}

// aclWriteFailed: a fenced write refused means another controller was
// elected: this term ends, and the caller is told who is active now.
func (a *Active) aclWriteFailed(err error) error {
	if errors.Is(err, metastore.ErrControllerMoved) {
		a.post(func() { a.stepDown(err) })
		return a.notControllerFor(err)
	}
	return err
}

func setACLError(r *adminv1.AclResult, err error) {
	ke := kerr.As(err)
	if ke == nil {
		ke = kerr.New(kerr.UnknownServerError, "%v", err)
	}
	r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
}
