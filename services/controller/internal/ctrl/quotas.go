package ctrl

import (
	"context"
	"errors"
	"maps"
	"math"

	"unicode/utf8"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// Client quota entities (Kafka's /config/users and /config/clients) are
// kept in etcd under <p>/quotas/, one key an entity, written here fenced
// by this term; every broker follows them (services/quotasync). They are
// not part of the model the loop keeps: an alteration reads and writes
// etcd on the loop, so two alterations of one entity never interleave, and
// a listing reads etcd, so it shows a change made just before.

// The client quota entity types and keys, as Kafka spells them.
const (
	quotaTypeUser     = "user"
	quotaTypeClientID = "client-id"
	quotaTypeIP       = "ip"

	producerByteRate       = "producer_byte_rate"
	consumerByteRate       = "consumer_byte_rate"
	requestPercentage      = "request_percentage"
	controllerMutationRate = "controller_mutation_rate"
)

// maxQuotaName bounds an entity's name (etcd keys should stay small).
const maxQuotaName = 256

// DescribeClientQuotas lists the entities the filter matches, as Kafka's
// DescribeClientQuotas: a filter Kafka refuses is answered with its error
// at the top of the response.
func (a *Active) DescribeClientQuotas(ctx context.Context, req *adminv1.DescribeClientQuotasRequest) (*adminv1.DescribeClientQuotasResponse, error) {
	resp := &adminv1.DescribeClientQuotasResponse{}
	f, err := parseQuotaFilter(req)
	if err != nil {
		ke := kerr.As(err)
		resp.ErrorCode, resp.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
		return resp, nil
	}
	stored, _, err := a.d.Store.ClientQuotas(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range stored {
		if f.matches(q.Entity) && len(q.Values) > 0 {
			resp.Entries = append(resp.Entries, &adminv1.ClientQuotaEntry{Entity: entityParts(q.Entity), Values: q.Values})
		}
	}
	return resp, nil
}

// quotaFilter is a DescribeClientQuotas filter: per entity type, an exact
// name (nil: the default entity) or any name.
type quotaFilter struct {
	exact  map[string]*string
	typed  map[string]bool
	strict bool
	ipOnly bool
}

func parseQuotaFilter(req *adminv1.DescribeClientQuotasRequest) (*quotaFilter, error) {
	f := &quotaFilter{exact: map[string]*string{}, typed: map[string]bool{}, strict: req.GetStrict()}
	for _, c := range req.GetComponents() {
		t := c.GetEntityType()
		_, dupExact := f.exact[t]
		switch {
		case t == "":
			return nil, kerr.New(kerr.InvalidRequest, "Invalid empty entity type.")
		case dupExact || f.typed[t]:
			return nil, kerr.New(kerr.InvalidRequest, "Entity type %s cannot appear more than once in the filter.", t)
		case t != quotaTypeUser && t != quotaTypeClientID && t != quotaTypeIP:
			return nil, kerr.New(kerr.UnsupportedVersion, "Unsupported entity type %s", t)
		}
		switch c.GetMatchType() {
		case "EXACT":
			if c.Match == nil {
				return nil, kerr.New(kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			m := c.GetMatch()
			f.exact[t] = &m
		case "DEFAULT":
			if c.Match != nil {
				return nil, kerr.New(kerr.InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			f.exact[t] = nil
		case "SPECIFIED":
			if c.Match != nil {
				return nil, kerr.New(kerr.InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			f.typed[t] = true
		default:
			return nil, kerr.New(kerr.InvalidRequest, "Unknown match type %s", c.GetMatchType())
		}
	}
	_, ipExact := f.exact[quotaTypeIP]
	if ipExact || f.typed[quotaTypeIP] {
		if len(f.exact)+len(f.typed) > 1 {
			return nil, kerr.New(kerr.InvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
		}
		f.ipOnly = true // tidemark keeps no ip entities: nothing matches
	}
	return f, nil
}

func (f *quotaFilter) matches(e metastore.QuotaEntity) bool {
	if f.ipOnly {
		return false
	}
	parts := map[string]*string{}
	if e.HasUser() {
		parts[quotaTypeUser] = namePtr(e.User, e.DefaultUser)
	}
	if e.HasClientID() {
		parts[quotaTypeClientID] = namePtr(e.ClientID, e.DefaultClientID)
	}
	if f.strict && len(parts) != len(f.exact)+len(f.typed) {
		return false
	}
	for t, want := range f.exact {
		got, ok := parts[t]
		if !ok || (got == nil) != (want == nil) || got != nil && *got != *want {
			return false
		}
	}
	for t := range f.typed {
		if _, ok := parts[t]; !ok {
			return false
		}
	}
	return true
}

func namePtr(name string, def bool) *string {
	if def {
		return nil
	}
	return &name
}

// entityParts is e as the API names it: user first, then client-id.
func entityParts(e metastore.QuotaEntity) []*adminv1.ClientQuotaEntityPart {
	var out []*adminv1.ClientQuotaEntityPart
	if e.HasUser() {
		out = append(out, &adminv1.ClientQuotaEntityPart{EntityType: quotaTypeUser, EntityName: namePtr(e.User, e.DefaultUser)})
	}
	if e.HasClientID() {
		out = append(out, &adminv1.ClientQuotaEntityPart{EntityType: quotaTypeClientID, EntityName: namePtr(e.ClientID, e.DefaultClientID)})
	}
	return out
}

// AlterClientQuotas validates each entity's alteration as Kafka does and
// stores the valid ones (none with validate_only), one result per
// alteration in request order; an entity with any refused op gets none of
// its changes.
func (a *Active) AlterClientQuotas(ctx context.Context, req *adminv1.AlterClientQuotasRequest) (*adminv1.AlterClientQuotasResponse, error) {
	resp := &adminv1.AlterClientQuotasResponse{}
	err := a.call(ctx, func() error {
		stored, _, err := a.d.Store.ClientQuotas(ctx)
		if err != nil {
			return err
		}
		cur := make(map[metastore.QuotaEntity]metastore.ClientQuotaValues, len(stored))
		for _, q := range stored {
			cur[q.Entity] = q.Values
		}
		var writes []metastore.StoredClientQuota
		var writtenBy []*adminv1.AlterClientQuotasResult
		at := map[metastore.QuotaEntity]int{}
		for _, alt := range req.GetEntries() {
			r := &adminv1.AlterClientQuotasResult{Entity: alt.GetEntity()}
			resp.Results = append(resp.Results, r)
			e, next, err := planQuotaAlteration(alt, cur)
			if err != nil {
				ke := kerr.As(err)
				r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
				continue
			}
			if req.GetValidateOnly() || maps.Equal(next, cur[e]) {
				continue
			}
			cur[e] = next
			writtenBy = append(writtenBy, r)
			if i, ok := at[e]; ok { // named twice: one write, the last values
				writes[i].Values = next
				continue
			}
			at[e] = len(writes)
			writes = append(writes, metastore.StoredClientQuota{Entity: e, Values: next})
		}
		if len(writes) == 0 {
			return nil
		}
		wctx, cancel := a.writeCtx()
		err = a.sess.PutClientQuotas(wctx, writes)
		cancel()
		if errors.Is(err, metastore.ErrControllerMoved) {
			a.stepDown(err)
			return a.notControllerFor(err)
		}
		if err != nil {
			ke := kerr.As(err)
			if ke == nil {
				ke = kerr.New(kerr.UnknownServerError, "%v", err)
			}
			for _, r := range writtenBy {
				r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
			}
			return nil
		}
		for _, w := range writes {
			a.log.Info("Client quota entity altered", "entity", w.Entity.String(), "quotas", w.Values)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// planQuotaAlteration is an entity and its values once alt's ops are
// applied to cur, or why alt is refused.
func planQuotaAlteration(alt *adminv1.ClientQuotaAlteration, cur map[metastore.QuotaEntity]metastore.ClientQuotaValues) (metastore.QuotaEntity, metastore.ClientQuotaValues, error) {
	e, err := quotaEntityOf(alt.GetEntity())
	if err != nil {
		return e, nil, err
	}
	next := maps.Clone(cur[e])
	if next == nil {
		next = metastore.ClientQuotaValues{}
	}
	for _, op := range alt.GetOps() {
		if op.GetRemove() {
			delete(next, op.GetKey())
			continue
		}
		if err := checkQuotaValue(op.GetKey(), op.GetValue()); err != nil {
			return e, nil, err
		}
		next[op.GetKey()] = op.GetValue()
	}
	return e, next, nil
}

// quotaEntityOf checks an entity as Kafka's controller does: user and
// client-id parts, each at most once, none empty; tidemark keeps no ip
// entities.
func quotaEntityOf(parts []*adminv1.ClientQuotaEntityPart) (metastore.QuotaEntity, error) {
	var e metastore.QuotaEntity
	if len(parts) == 0 {
		return e, kerr.New(kerr.InvalidRequest, "Invalid empty client quota entity")
	}
	seen := map[string]bool{}
	for _, p := range parts {
		t := p.GetEntityType()
		if seen[t] {
			return e, kerr.New(kerr.InvalidRequest, "Invalid empty client quota entity, duplicate entity entry %s", t)
		}
		seen[t] = true
		name, def := p.GetEntityName(), p.EntityName == nil
		switch t {
		case quotaTypeUser:
			e.User, e.DefaultUser = name, def
		case quotaTypeClientID:
			e.ClientID, e.DefaultClientID = name, def
		case quotaTypeIP:
			return e, kerr.New(kerr.InvalidRequest, "ip quota entities (connection_creation_rate) are not supported: tidemark keeps user and client-id quotas only")
		default:
			return e, kerr.New(kerr.InvalidRequest, "Unhandled client quota entity type: %s", t)
		}
		switch {
		case !def && name == "":
			return e, kerr.New(kerr.InvalidRequest, "Empty %s not supported", t)
		case len(name) > maxQuotaName || !utf8.ValidString(name):
			return e, kerr.New(kerr.InvalidRequest, "%s name must be at most %d bytes of UTF-8", t, maxQuotaName)
		}
	}
	return e, nil
}

// checkQuotaValue refuses a key tidemark does not enforce and a rate that
// is not a positive whole number of bytes per second.
func checkQuotaValue(key string, v float64) error {
	switch key {
	case producerByteRate, consumerByteRate:
	case requestPercentage, controllerMutationRate:
		return kerr.New(kerr.InvalidRequest, "Quota %s is not supported: tidemark enforces %s and %s only", key, producerByteRate, consumerByteRate)
	default:
		return kerr.New(kerr.InvalidRequest, "Invalid configuration key %s", key)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return kerr.New(kerr.InvalidRequest, "Quota %s must be a positive number, not %v", key, v)
	}
	// Kafka's test for a LONG key: the value within 1e-6 of a whole number.
	if n := math.Floor(v + 1e-6); math.Abs(n-v) > 1e-6 || n > math.MaxInt64 {
		return kerr.New(kerr.InvalidRequest, "Configuration %s must be a Long value", key)
	}
	return nil
}
