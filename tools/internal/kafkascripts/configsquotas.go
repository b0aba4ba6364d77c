package kafkascripts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
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

// quotaParts pairs --entity-type users|clients with the --entity-name or
// --entity-default given for it, in command-line order, as Kafka's tool.
func (r *configsRun) quotaParts() []quotaPart {
	var names []*string
	for i := 0; i < len(r.args); i++ {
		a := r.args[i]
		switch {
		case a == "--entity-default":
			names = append(names, nil)
		case a == "--entity-name" && i+1 < len(r.args):
			n := r.args[i+1]
			names = append(names, &n)
			i++
		case strings.HasPrefix(a, "--entity-name="):
			n := strings.TrimPrefix(a, "--entity-name=")
			names = append(names, &n)
		}
	}
	parts := make([]quotaPart, 0, len(r.entityTypes))
	for i, t := range r.entityTypes {
		p := quotaPart{typ: "user"}
		if t == "clients" {
			p.typ = "client-id"
		}
		if i < len(names) {
			p.name, p.named = names[i], true
		}
		parts = append(parts, p)
	}
	return parts
}

// runUsersAndClients serves --entity-type users and clients: SCRAM
// credentials (users alone) and client quotas.
func (r *configsRun) runUsersAndClients(ctx context.Context, adm *seedAdmin, stdout io.Writer) error {
	parts := r.quotaParts()
	scramOnly := len(parts) == 1 && parts[0].typ == "user"
	if !r.alter {
		if err := describeQuotas(ctx, adm, parts, stdout); err != nil {
			return err
		}
		if scramOnly && (!parts[0].named || parts[0].name != nil) {
			var names []string
			if parts[0].named {
				names = []string{*parts[0].name}
			}
			return describeUsers(ctx, adm, names, stdout)
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
	scramKeys, quotaKeys, unknownAdd, unknownDel := 0, 0, []string{}, []string{}
	addNames := make([]string, 0, len(add))
	for k := range add {
		addNames = append(addNames, k)
	}
	sort.Strings(addNames)
	classify := func(k string, unknown *[]string) {
		switch {
		case scramOnly && scram.Known(k):
			scramKeys++
		case containsString(quotaConfigKeys, k):
			quotaKeys++
		default:
			*unknown = append(*unknown, k)
		}
	}
	for _, k := range addNames {
		classify(k, &unknownAdd)
	}
	for _, k := range del {
		classify(k, &unknownDel)
	}
	what := "quota"
	if scramOnly {
		what = "quota and SCRAM credential"
	}
	if len(unknownAdd) > 0 {
		return &configRefusal{fmt.Sprintf("Only %s configs can be added for '%s' using --bootstrap-server. Unexpected config names: Set(%s)", what, r.entityTypes[0], strings.Join(unknownAdd, ", "))}
	}
	if len(unknownDel) > 0 {
		return &configRefusal{fmt.Sprintf("Only %s configs can be deleted for '%s' using --bootstrap-server. Unexpected config names: ArrayBuffer(%s)", what, r.entityTypes[0], strings.Join(unknownDel, ", "))}
	}
	if scramKeys > 0 && quotaKeys > 0 {
		return &configRefusal{"tidemark's kafka-configs.sh alters a user's SCRAM credentials and its quotas in separate commands"}
	}
	if scramKeys > 0 {
		if parts[0].name == nil {
			return &configRefusal{"The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server."}
		}
		return r.alterUsers(ctx, adm, *parts[0].name, stdout)
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
	var names []string
	for _, p := range parts {
		n := "<default>"
		if p.name != nil {
			n = *p.name
		}
		names = append(names, map[string]string{"user": "user", "client-id": "client"}[p.typ]+" "+n)
	}
	fmt.Fprintf(stdout, "Completed updating config for %s.\n", strings.Join(names, ", "))
	return nil
}

// describeQuotas prints the quota entities naming exactly the parts given
// (Kafka's ClientQuotaFilter.containsOnly), one line each, as Kafka's tool.
func describeQuotas(ctx context.Context, adm *seedAdmin, parts []quotaPart, stdout io.Writer) error {
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
		return err
	}
	resp := kresp.(*kmsg.DescribeClientQuotasResponse)
	if resp.ErrorCode != 0 {
		return errors.New(javaExceptionWith(resp.ErrorCode, resp.ErrorMessage))
	}
	for _, e := range resp.Entries {
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
