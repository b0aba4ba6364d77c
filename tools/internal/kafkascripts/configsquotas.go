package kafkascripts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/scram"
)

// The quota keys Kafka's tool accepts for users and clients; the broker
// refuses request_percentage and controller_mutation_rate, which tidemark
// does not enforce.
var quotaConfigKeys = []string{"consumer_byte_rate", "controller_mutation_rate", "producer_byte_rate", "request_percentage"}

// quotaPart is one entity type of the command and its name: nil for the
// type's default entity, absent (named false) for every entity of it.
type quotaPart struct {
	typ   string // user or client-id
	name  *string
	named bool
}

// quotaParts pairs each entity type (users, clients) with its name, as
// Kafka's tool zips entityTypes with entityNames: "" is the default entity,
// a type past the names every entity of it.
func (r *configsRun) quotaParts() []quotaPart {
	parts := make([]quotaPart, 0, len(r.entityTypes))
	for i, t := range r.entityTypes {
		p := quotaPart{typ: "user"}
		if t == "clients" {
			p.typ = "client-id"
		}
		if i < len(r.entityNames) {
			p.named = true
			if n := r.entityNames[i]; n != "" {
				p.name = &n
			}
		}
		parts = append(parts, p)
	}
	return parts
}

// runUsersAndClients serves --entity-type users and clients: SCRAM
// credentials (users alone) and client quotas, as Kafka's
// describeClientQuotaAndUserScramCredentialConfigs and alterConfig.
func (r *configsRun) runUsersAndClients(ctx context.Context, adm *seedAdmin, stdout io.Writer) error {
	parts := r.quotaParts()
	userAlone := len(r.entityTypes) == 1 && r.entityTypes[0] == "users"
	if !r.alter {
		if len(r.entityNames) > len(r.entityTypes) {
			return &configRefusal{"More entity names specified than entity types"}
		}
		if err := describeQuotas(ctx, adm, parts, stdout); err != nil {
			return err
		}
		// Credentials only for users alone and not their default.
		if userAlone && !containsString(r.entityNames, "") {
			return describeUsers(ctx, adm, r.entityNames, stdout)
		}
		return nil
	}
	add, err := r.configsToAdd()
	if err != nil {
		return err
	}
	var del []string
	for _, d := range r.deleteConfigs {
		del = append(del, strings.TrimSpace(d))
	}
	addNames := sortedConfigNames(add)
	var scramAdd, unknownAdd, scramDel, unknownDel []string
	quotas := false
	split := func(keys []string, scramKeys, unknown *[]string) {
		for _, k := range keys {
			switch {
			case scram.Known(k):
				*scramKeys = append(*scramKeys, k)
			case containsString(quotaConfigKeys, k):
				quotas = true
			default:
				*unknown = append(*unknown, k)
			}
		}
	}
	split(addNames, &scramAdd, &unknownAdd)
	split(del, &scramDel, &unknownDel)
	if !userAlone {
		// A client, or a user and a client: quotas only, and Kafka's
		// messages name 'clients' either way.
		if bad := append(unknownAdd, scramAdd...); len(bad) > 0 {
			return &configRefusal{fmt.Sprintf("Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: Set(%s)", strings.Join(bad, ", "))}
		}
		if bad := append(unknownDel, scramDel...); len(bad) > 0 {
			return &configRefusal{fmt.Sprintf("Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected config names: ArrayBuffer(%s)", strings.Join(bad, ", "))}
		}
	} else {
		if len(unknownAdd) > 0 {
			return &configRefusal{fmt.Sprintf("Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected config names: Set(%s)", strings.Join(unknownAdd, ", "))}
		}
		if len(unknownDel) > 0 {
			return &configRefusal{fmt.Sprintf("Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. Unexpected config names: ArrayBuffer(%s)", strings.Join(unknownDel, ", "))}
		}
		if len(scramAdd) > 0 || len(scramDel) > 0 {
			if containsString(r.entityNames, "") {
				return &configRefusal{"The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server."}
			}
			if quotas {
				return &configRefusal{"Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server."}
			}
		}
	}
	if quotas {
		err = alterQuotas(ctx, adm, parts, len(r.entityNames) == len(r.entityTypes), add, addNames, del)
	} else {
		err = alterUsers(ctx, adm, r.entityNames[0], add, addNames, del)
	}
	if err != nil {
		return err
	}
	if r.entityNames[0] != "" {
		fmt.Fprintf(stdout, "Completed updating config for %s %s.\n", strings.TrimSuffix(r.entityTypes[0], "s"), r.entityNames[0])
	} else {
		fmt.Fprintf(stdout, "Completed updating default config for %s in the cluster.\n", r.entityTypes[0])
	}
	return nil
}

// alterQuotas is Kafka's alterQuotaConfigs: the entity needs a name (or
// default) for every type, a key to delete must be set now, then one
// AlterClientQuotas.
func alterQuotas(ctx context.Context, adm *seedAdmin, parts []quotaPart, everyTypeNamed bool, add map[string]string, addNames, del []string) error {
	if !everyTypeNamed {
		return &configRefusal{"Exactly one entity name must be specified for every entity type"}
	}
	current, err := quotaEntities(ctx, adm, parts)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	for _, e := range current {
		for _, v := range e.Values {
			set[v.Key] = true
		}
		break // the entity itself: strict match of every part
	}
	var invalid []string
	for _, k := range del {
		if !set[k] {
			invalid = append(invalid, k)
		}
	}
	if len(invalid) > 0 {
		return &configRefusal{"Invalid config(s): " + strings.Join(invalid, ",")}
	}
	entry := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range parts {
		e := kmsg.NewAlterClientQuotasRequestEntryEntity()
		e.Type, e.Name = p.typ, p.name
		entry.Entity = append(entry.Entity, e)
	}
	for _, k := range addNames {
		v, err := strconv.ParseFloat(add[k], 64)
		if err != nil {
			return &configRefusal{fmt.Sprintf("Cannot parse quota configuration value for %s: %s", k, add[k])}
		}
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = k, v
		entry.Ops = append(entry.Ops, op)
	}
	for _, k := range del {
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Remove = k, true
		entry.Ops = append(entry.Ops, op)
	}
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = append(req.Entries, entry)
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	for _, e := range kresp.(*kmsg.AlterClientQuotasResponse).Entries {
		if e.ErrorCode != 0 {
			return errors.New(javaExceptionWith(e.ErrorCode, e.ErrorMessage))
		}
	}
	return nil
}

// describeQuotas prints the quota entities naming exactly the parts given
// (Kafka's ClientQuotaFilter.containsOnly), one line each, as Kafka's tool.
func describeQuotas(ctx context.Context, adm *seedAdmin, parts []quotaPart, stdout io.Writer) error {
	entries, err := quotaEntities(ctx, adm, parts)
	if err != nil {
		return err
	}
	for _, e := range entries {
		var ent []string
		for _, typ := range []string{"user", "client-id"} {
			for _, p := range e.Entity {
				if p.Type != typ {
					continue
				}
				label := map[string]string{"user": "user-principal", "client-id": "client-id"}[typ]
				if p.Name == nil {
					ent = append(ent, "the default "+label)
				} else {
					ent = append(ent, fmt.Sprintf("%s '%s'", label, *p.Name))
				}
			}
		}
		var vals []string
		for _, v := range e.Values {
			vals = append(vals, v.Key+"="+javaDouble(v.Value))
		}
		fmt.Fprintf(stdout, "Quota configs for %s are %s\n", strings.Join(ent, ", "), strings.Join(vals, ", "))
	}
	return nil
}

// quotaEntities are the quota entities naming exactly the parts given
// (Kafka's ClientQuotaFilter.containsOnly).
func quotaEntities(ctx context.Context, adm *seedAdmin, parts []quotaPart) ([]kmsg.DescribeClientQuotasResponseEntry, error) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Strict = true
	for _, p := range parts {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType = p.typ
		switch {
		case !p.named:
			c.MatchType = 2 // any entity of the type
		case p.name == nil:
			c.MatchType = 1 // the default entity
		default:
			c.MatchType, c.Match = 0, p.name
		}
		req.Components = append(req.Components, c)
	}
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeClientQuotasResponse)
	if resp.ErrorCode != 0 {
		return nil, errors.New(javaExceptionWith(resp.ErrorCode, resp.ErrorMessage))
	}
	return resp.Entries, nil
}

// javaDouble is v as Java's Double.toString writes it: 1024.0, 1.5E7.
func javaDouble(v float64) string {
	if a := math.Abs(v); a != 0 && (a < 1e-3 || a >= 1e7) {
		m, exp, _ := strings.Cut(strconv.FormatFloat(v, 'E', -1, 64), "E")
		if !strings.Contains(m, ".") {
			m += ".0"
		}
		n, _ := strconv.Atoi(exp)
		return m + "E" + strconv.Itoa(n)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
