package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/authz"
)

// newACLsCmd manages the ACL bindings stored in etcd (in force on every
// broker and controller besides each one's --acl.file), as kafka-acls does.
func newACLsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acls",
		Short: "List, add and remove the ACL bindings stored in etcd (kafka-acls)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newACLsListCmd(g), newACLsAddCmd(g), newACLsRemoveCmd(g))
	return cmd
}

// aclResource is the resource flags every acls subcommand shares.
type aclResource struct {
	topic, group, pattern string
	cluster               bool
}

func (r *aclResource) flags(cmd *cobra.Command, patternDefault string) {
	f := cmd.Flags()
	f.StringVar(&r.topic, "topic", "", "the topic (a prefix with --resource-pattern-type prefixed; * is every topic)")
	f.StringVar(&r.group, "group", "", "the consumer group (a prefix with --resource-pattern-type prefixed; * is every group)")
	f.BoolVar(&r.cluster, "cluster", false, "the cluster")
	f.StringVar(&r.pattern, "resource-pattern-type", patternDefault, "literal or prefixed; to list or remove also any or match")
}

// resource is the resource type and name named, "" (ANY) and nil when none.
func (r *aclResource) resource(required bool) (string, *string, error) {
	n := 0
	typ, name := "", (*string)(nil)
	if r.topic != "" {
		n, typ, name = n+1, "TOPIC", &r.topic
	}
	if r.group != "" {
		n, typ, name = n+1, "GROUP", &r.group
	}
	if r.cluster {
		c := authz.KafkaClusterName
		n, typ, name = n+1, "CLUSTER", &c
	}
	switch {
	case n > 1:
		return "", nil, usagef("give one of --topic, --group and --cluster")
	case n == 0 && required:
		return "", nil, usagef("give one of --topic, --group and --cluster")
	}
	return typ, name, nil
}

func newACLsListCmd(g *globals) *cobra.Command {
	var res aclResource
	var principal string
	cmd := &cobra.Command{
		Use:   "list [--topic T | --group G | --cluster] [--principal User:NAME]",
		Short: "List the stored ACL bindings, by resource",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			typ, name, err := res.resource(false)
			if err != nil {
				return err
			}
			f := &adminv1.AclBindingFilter{ResourceType: typ, ResourceName: name, PatternType: strings.ToUpper(res.pattern)}
			if principal != "" {
				f.Principal = &principal
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DescribeAcls(ctx, &adminv1.DescribeAclsRequest{Filter: f})
				if err != nil {
					return err
				}
				printByResource(cmd.OutOrStdout(), "Current ACLs for resource", resp.GetBindings())
				return nil
			})
		},
	}
	res.flags(cmd, "any")
	cmd.Flags().StringVar(&principal, "principal", "", "only the bindings of this principal")
	return cmd
}

// aclEntries is the entry flags of add and remove.
type aclEntries struct {
	allow, deny, ops []string
	host             string
}

func (e *aclEntries) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&e.allow, "allow-principal", nil, "User:NAME or User:* to allow (repeatable)")
	f.StringArrayVar(&e.deny, "deny-principal", nil, "User:NAME or User:* to deny (repeatable)")
	f.StringArrayVar(&e.ops, "operation", nil, "Read, Write, Create, Delete, Alter, Describe, AlterConfigs, DescribeConfigs, IdempotentWrite or All (repeatable)")
	f.StringVar(&e.host, "host", "*", "the client address the bindings apply to: * or an IP")
}

// bindings are the bindings the flags name, one per principal and operation.
func (e *aclEntries) bindings(typ, name, pattern string) ([]authz.Binding, error) {
	if len(e.allow)+len(e.deny) == 0 {
		return nil, usagef("give --allow-principal or --deny-principal")
	}
	if len(e.ops) == 0 {
		return nil, usagef("give --operation")
	}
	var out []authz.Binding
	for _, perm := range []struct {
		principals []string
		typ        string
	}{{e.allow, authz.AllowPT}, {e.deny, authz.DenyPT}} {
		for _, p := range perm.principals {
			for _, op := range e.ops {
				o, err := authz.ParseOperation(op)
				if err != nil {
					return nil, usagef("--operation: %v", err)
				}
				out = append(out, authz.Binding{ResourceType: typ, ResourceName: name, PatternType: strings.ToUpper(pattern),
					Principal: p, Host: e.host, Operation: o.KafkaName(), PermissionType: perm.typ})
			}
		}
	}
	return out, nil
}

func newACLsAddCmd(g *globals) *cobra.Command {
	var res aclResource
	var ent aclEntries
	cmd := &cobra.Command{
		Use:   "add (--allow-principal P | --deny-principal P) --operation OP (--topic T | --group G | --cluster)",
		Short: "Store ACL bindings; every broker and controller applies them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			typ, name, err := res.resource(true)
			if err != nil {
				return err
			}
			bs, err := ent.bindings(typ, *name, res.pattern)
			if err != nil {
				return err
			}
			req := &adminv1.CreateAclsRequest{}
			for _, b := range bs {
				req.Creations = append(req.Creations, b.Proto())
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.CreateAcls(ctx, req)
				if err != nil {
					return err
				}
				var added []*adminv1.AclBinding
				var failed []string
				for i, r := range resp.GetResults() {
					if r.GetErrorCode() != 0 {
						failed = append(failed, fmt.Sprintf("%s: %s: %s", bs[i], r.GetErrorCode(), r.GetErrorMessage()))
						continue
					}
					added = append(added, req.Creations[i])
				}
				printByResource(cmd.OutOrStdout(), "Adding ACLs for resource", added)
				if len(failed) > 0 {
					return fmt.Errorf("%d of %d bindings refused:\n%s", len(failed), len(bs), strings.Join(failed, "\n"))
				}
				return nil
			})
		},
	}
	res.flags(cmd, "literal")
	ent.flags(cmd)
	return cmd
}

func newACLsRemoveCmd(g *globals) *cobra.Command {
	var res aclResource
	var ent aclEntries
	cmd := &cobra.Command{
		Use:   "remove [--allow-principal P | --deny-principal P] [--operation OP] (--topic T | --group G | --cluster)",
		Short: "Remove the stored ACL bindings that match",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			typ, name, err := res.resource(true)
			if err != nil {
				return err
			}
			req := &adminv1.DeleteAclsRequest{}
			if len(ent.allow)+len(ent.deny) == 0 {
				// Every binding of the resource, as kafka-acls --remove without principals.
				req.Filters = append(req.Filters, &adminv1.AclBindingFilter{ResourceType: typ, ResourceName: name, PatternType: strings.ToUpper(res.pattern)})
			} else {
				if len(ent.ops) == 0 {
					ent.ops = []string{"All"}
				}
				bs, err := ent.bindings(typ, *name, res.pattern)
				if err != nil {
					return err
				}
				for _, b := range bs {
					f := &adminv1.AclBindingFilter{ResourceType: b.ResourceType, ResourceName: name, PatternType: b.PatternType,
						Principal: &b.Principal, Host: &b.Host, Operation: b.Operation, PermissionType: b.PermissionType}
					if b.Operation == "ALL" && !cmd.Flags().Changed("operation") {
						f.Operation = ""
					}
					req.Filters = append(req.Filters, f)
				}
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DeleteAcls(ctx, req)
				if err != nil {
					return err
				}
				var removed []*adminv1.AclBinding
				for _, r := range resp.GetResults() {
					if r.GetErrorCode() != 0 {
						return fmt.Errorf("remove ACLs: %s: %s", r.GetErrorCode(), r.GetErrorMessage())
					}
					removed = append(removed, r.GetDeleted()...)
				}
				if len(removed) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "No ACL binding matched.")
					return nil
				}
				printByResource(cmd.OutOrStdout(), "Removed ACLs for resource", removed)
				return nil
			})
		},
	}
	res.flags(cmd, "literal")
	ent.flags(cmd)
	return cmd
}

// printByResource prints bindings grouped by resource pattern, in
// kafka-acls' form: the heading line, then one tab-indented entry a line.
func printByResource(out io.Writer, heading string, bs []*adminv1.AclBinding) {
	groups := map[string][]string{}
	var patterns []string
	for _, p := range bs {
		b := authz.BindingFromProto(p)
		key := b.PatternString()
		if _, ok := groups[key]; !ok {
			patterns = append(patterns, key)
		}
		groups[key] = append(groups[key], b.EntryString())
	}
	sort.Strings(patterns)
	for _, p := range patterns {
		fmt.Fprintf(out, "%s `%s`:\n", heading, p)
		for _, e := range groups[p] {
			fmt.Fprintf(out, "\t%s\n", e)
		}
		fmt.Fprintln(out)
	}
}
