package gateway

import (
	"context"
	"strings"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// The client quota entities (POST /v1/quotas:describe and /v1/quotas:alter),
// as Kafka's DescribeClientQuotas and AlterClientQuotas.

func (s adminService) DescribeClientQuotas(ctx context.Context, req *adminv1.DescribeClientQuotasRequest, _ ...grpc.CallOption) (*adminv1.DescribeClientQuotasResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.DescribeClientQuotas(ctx, req)
	return checked(resp, err, func(r *adminv1.DescribeClientQuotasResponse) []outcome {
		return []outcome{{r.GetErrorCode(), r.GetErrorMessage(), "client quota filter", ""}}
	})
}

func (s adminService) AlterClientQuotas(ctx context.Context, req *adminv1.AlterClientQuotasRequest, _ ...grpc.CallOption) (*adminv1.AlterClientQuotasResponse, error) {
	ctx, cancel := s.bound(ctx, 0)
	defer cancel()
	resp, err := s.a.AlterClientQuotas(ctx, req)
	return checked(resp, err, alterQuotaOutcomes(req))
}

func alterQuotaOutcomes(req *adminv1.AlterClientQuotasRequest) func(*adminv1.AlterClientQuotasResponse) []outcome {
	keyOf := func(a *adminv1.ClientQuotaAlteration) string { return entityString(a.GetEntity()) }
	return func(r *adminv1.AlterClientQuotasResponse) []outcome {
		var out []outcome
		for _, e := range r.GetResults() {
			entity := entityString(e.GetEntity())
			out = append(out, outcome{e.GetErrorCode(), e.GetErrorMessage(), "client quota entity " + entity, itemFieldBy("entries", req.GetEntries(), keyOf, entity)})
		}
		return out
	}
}

// entityString is an entity as Kafka's tools print it.
func entityString(parts []*adminv1.ClientQuotaEntityPart) string {
	var out []string
	for _, p := range parts {
		name := "<default>"
		if p.EntityName != nil {
			name = p.GetEntityName()
		}
		out = append(out, p.GetEntityType()+"="+name)
	}
	return strings.Join(out, ",")
}
