package kafkaapi

import (
	"context"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// Kafka's DescribeClientQuotas match types, as the controller spells them.
var quotaMatchTypes = map[kmsg.QuotasMatchType]string{0: "EXACT", 1: "DEFAULT", 2: "SPECIFIED"}

// handleDescribeClientQuotas forwards DescribeClientQuotas to the active
// controller (authorized there: DescribeConfigs on Cluster).
func (s *Server) handleDescribeClientQuotas(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	greq := &adminv1.DescribeClientQuotasRequest{Strict: req.Strict}
	for _, c := range req.Components {
		mt, ok := quotaMatchTypes[c.MatchType]
		if !ok {
			mt = strconv.Itoa(int(c.MatchType)) // refused by the controller as unknown
		}
		greq.Components = append(greq.Components, &adminv1.ClientQuotaFilterComponent{EntityType: c.EntityType, MatchType: mt, Match: c.Match})
	}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err == nil {
		defer cancel()
		var gresp *adminv1.DescribeClientQuotasResponse
		if gresp, err = cli.DescribeClientQuotas(fctx, greq); err == nil {
			resp.ErrorCode, resp.ErrorMessage = protoCode(gresp.GetErrorCode()), optMessage(gresp.GetErrorMessage())
			for _, e := range gresp.GetEntries() {
				ke := kmsg.NewDescribeClientQuotasResponseEntry()
				for _, p := range e.GetEntity() {
					ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
					ent.Type, ent.Name = p.GetEntityType(), p.EntityName
					ke.Entity = append(ke.Entity, ent)
				}
				keys := make([]string, 0, len(e.GetValues()))
				for k := range e.GetValues() {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					v := kmsg.NewDescribeClientQuotasResponseEntryValue()
					v.Key, v.Value = k, e.GetValues()[k]
					ke.Values = append(ke.Values, v)
				}
				resp.Entries = append(resp.Entries, ke)
			}
			return resp
		}
	}
	resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
	return resp
}

// handleAlterClientQuotas forwards AlterClientQuotas to the active
// controller (authorized there: AlterConfigs on Cluster).
func (s *Server) handleAlterClientQuotas(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	greq := &adminv1.AlterClientQuotasRequest{ValidateOnly: req.ValidateOnly}
	for _, e := range req.Entries {
		alt := &adminv1.ClientQuotaAlteration{}
		for _, p := range e.Entity {
			alt.Entity = append(alt.Entity, &adminv1.ClientQuotaEntityPart{EntityType: p.Type, EntityName: p.Name})
		}
		for _, op := range e.Ops {
			alt.Ops = append(alt.Ops, &adminv1.ClientQuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		greq.Entries = append(greq.Entries, alt)
	}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err == nil {
		defer cancel()
		var gresp *adminv1.AlterClientQuotasResponse
		if gresp, err = cli.AlterClientQuotas(fctx, greq); err == nil {
			for _, r := range gresp.GetResults() {
				ke := kmsg.NewAlterClientQuotasResponseEntry()
				ke.ErrorCode, ke.ErrorMessage = protoCode(r.GetErrorCode()), optMessage(r.GetErrorMessage())
				ke.Entity = alterEntity(r.GetEntity())
				resp.Entries = append(resp.Entries, ke)
			}
			return resp
		}
	}
	// The request failed whole (not authorized, no controller): every
	// entity named gets the error, as the answer has no top-level one.
	for _, alt := range greq.Entries {
		ke := kmsg.NewAlterClientQuotasResponseEntry()
		ke.ErrorCode, ke.ErrorMessage = code(err), message(err)
		ke.Entity = alterEntity(alt.Entity)
		resp.Entries = append(resp.Entries, ke)
	}
	return resp
}

func alterEntity(parts []*adminv1.ClientQuotaEntityPart) []kmsg.AlterClientQuotasResponseEntryEntity {
	out := make([]kmsg.AlterClientQuotasResponseEntryEntity, 0, len(parts))
	for _, p := range parts {
		ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
		ent.Type, ent.Name = p.GetEntityType(), p.EntityName
		out = append(out, ent)
	}
	return out
}
