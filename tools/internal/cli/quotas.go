package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
)

// newQuotasCmd is kafka-configs --entity-type users|clients for quotas:
// the client quota entities every broker throttles by.
func newQuotasCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "quotas",
		Short: "Set, remove and describe client quotas of users and client ids (kafka-configs --entity-type users|clients)",
	}
	c.AddCommand(newQuotasAlterCmd(g), newQuotasDescribeCmd(g))
	return c
}

// quotaEntityFlags name one entity: a user, a client id or both, each
// named or the default.
type quotaEntityFlags struct {
	user, clientID               string
	userDefault, clientIDDefault bool
}

func (e *quotaEntityFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.user, "user", "", "the user (principal name: TLS CN, SASL user or ANONYMOUS)")
	f.BoolVar(&e.userDefault, "user-default", false, "the default user entity (<default>)")
	f.StringVar(&e.clientID, "client-id", "", "the client id")
	f.BoolVar(&e.clientIDDefault, "client-id-default", false, "the default client-id entity (<default>)")
}

// parts is the entity; required: at least one part.
func (e *quotaEntityFlags) parts(cmd *cobra.Command, required bool) ([]*adminv1.ClientQuotaEntityPart, error) {
	var out []*adminv1.ClientQuotaEntityPart
	userSet, clientSet := cmd.Flags().Changed("user"), cmd.Flags().Changed("client-id")
	switch {
	case userSet && e.userDefault:
		return nil, usagef("--user and --user-default name different entities: give one")
	case clientSet && e.clientIDDefault:
		return nil, usagef("--client-id and --client-id-default name different entities: give one")
	case userSet && e.user == "":
		return nil, usagef("--user must not be empty (--user-default is the default entity)")
	case clientSet && e.clientID == "":
		return nil, usagef("--client-id must not be empty (--client-id-default is the default entity)")
	}
	if userSet {
		out = append(out, &adminv1.ClientQuotaEntityPart{EntityType: "user", EntityName: &e.user})
	} else if e.userDefault {
		out = append(out, &adminv1.ClientQuotaEntityPart{EntityType: "user"})
	}
	if clientSet {
		out = append(out, &adminv1.ClientQuotaEntityPart{EntityType: "client-id", EntityName: &e.clientID})
	} else if e.clientIDDefault {
		out = append(out, &adminv1.ClientQuotaEntityPart{EntityType: "client-id"})
	}
	if required && len(out) == 0 {
		return nil, usagef("name the entity: --user, --user-default, --client-id or --client-id-default")
	}
	return out, nil
}

func newQuotasAlterCmd(g *globals) *cobra.Command {
	var (
		ent          quotaEntityFlags
		add, del     []string
		validateOnly bool
	)
	cmd := &cobra.Command{
		Use:   "alter [--user NAME | --user-default] [--client-id ID | --client-id-default] [--add KEY=VALUE,...] [--delete KEY,...] [--validate-only]",
		Short: "Set or remove an entity's quota keys (producer_byte_rate, consumer_byte_rate; bytes/s)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			parts, err := ent.parts(cmd, true)
			if err != nil {
				return err
			}
			if len(add) == 0 && len(del) == 0 {
				return usagef("nothing to do: give --add KEY=VALUE or --delete KEY")
			}
			alt := &adminv1.ClientQuotaAlteration{Entity: parts}
			for _, kv := range add {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("--add %q: want KEY=VALUE", kv)
				}
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return usagef("--add %s: %q is not a number", k, v)
				}
				alt.Ops = append(alt.Ops, &adminv1.ClientQuotaOp{Key: k, Value: f})
			}
			for _, k := range del {
				alt.Ops = append(alt.Ops, &adminv1.ClientQuotaOp{Key: k, Remove: true})
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.AlterClientQuotas(ctx, &adminv1.AlterClientQuotasRequest{Entries: []*adminv1.ClientQuotaAlteration{alt}, ValidateOnly: validateOnly})
				if err != nil {
					return err
				}
				for _, r := range resp.GetResults() {
					if err := client.ItemError(r.GetErrorCode(), r.GetErrorMessage(), "alter client quotas of %s", quotaEntityString(parts)); err != nil {
						return err
					}
				}
				verb := "Altered"
				if validateOnly {
					verb = "Validated (nothing stored)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s client quotas of %s.\n", verb, quotaEntityString(parts))
				return nil
			})
		},
	}
	ent.add(cmd)
	f := cmd.Flags()
	f.StringSliceVar(&add, "add", nil, "KEY=VALUE to set (repeatable or comma-separated)")
	f.StringSliceVar(&del, "delete", nil, "KEY to remove (repeatable or comma-separated)")
	f.BoolVar(&validateOnly, "validate-only", false, "check the change, store nothing")
	return cmd
}

func newQuotasDescribeCmd(g *globals) *cobra.Command {
	var (
		ent    quotaEntityFlags
		strict bool
	)
	cmd := &cobra.Command{
		Use:   "describe [--user NAME | --user-default] [--client-id ID | --client-id-default] [--strict]",
		Short: "List the client quota entities (all, or those naming the user and client id given; --strict: no other part)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			parts, err := ent.parts(cmd, false)
			if err != nil {
				return err
			}
			req := &adminv1.DescribeClientQuotasRequest{Strict: strict}
			for _, p := range parts {
				c := &adminv1.ClientQuotaFilterComponent{EntityType: p.GetEntityType(), MatchType: "DEFAULT"}
				if p.EntityName != nil {
					c.MatchType, c.Match = "EXACT", p.EntityName
				}
				req.Components = append(req.Components, c)
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DescribeClientQuotas(ctx, req)
				if err != nil {
					return err
				}
				if err := client.ItemError(resp.GetErrorCode(), resp.GetErrorMessage(), "describe client quotas"); err != nil {
					return err
				}
				printQuotas(cmd, resp.GetEntries())
				return nil
			})
		},
	}
	ent.add(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "only entities with no part besides those given")
	return cmd
}

func printQuotas(cmd *cobra.Command, entries []*adminv1.ClientQuotaEntry) {
	rows := make([][3]string, 0, len(entries))
	for _, e := range entries {
		row := [3]string{"-", "-", ""}
		for _, p := range e.GetEntity() {
			name := "<default>"
			if p.EntityName != nil {
				name = p.GetEntityName()
			}
			if p.GetEntityType() == "user" {
				row[0] = name
			} else {
				row[1] = name
			}
		}
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(e.GetValues())) {
			kv = append(kv, k+"="+strconv.FormatFloat(e.GetValues()[k], 'f', -1, 64))
		}
		row[2] = strings.Join(kv, ",")
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b [3]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tCLIENT-ID\tQUOTAS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r[0], r[1], r[2])
	}
	_ = tw.Flush()
}

// quotaEntityString is an entity as Kafka's tools print it.
func quotaEntityString(parts []*adminv1.ClientQuotaEntityPart) string {
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
