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

// newAlterConfigCmd is kafka-configs --alter for one topic, one broker or
// the cluster-wide broker defaults.
func newAlterConfigCmd(g *globals) *cobra.Command {
	var (
		topic          string
		broker         int32
		brokerDefaults bool
		add            []string
		del            []string
	)
	cmd := &cobra.Command{
		Use:   "alter-config (--topic T | --broker N | --broker-defaults) [--add-config k=v]... [--delete-config k]...",
		Short: "Set or remove topic overrides or dynamic broker configs (kafka-configs --alter)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, what, err := configTarget(cmd, topic, broker, brokerDefaults)
			if err != nil {
				return err
			}
			sets, err := parseConfigs("--add-config", add)
			if err != nil {
				return err
			}
			dels := splitList(del)
			if len(sets) == 0 && len(dels) == 0 {
				return usagef("nothing to change: give --add-config and/or --delete-config")
			}
			var ops []*adminv1.ConfigOp
			for _, k := range slices.Sorted(maps.Keys(sets)) {
				ops = append(ops, &adminv1.ConfigOp{Name: k, Value: sets[k], Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET})
			}
			for _, k := range dels {
				if _, ok := sets[k]; ok {
					return usagef("--delete-config %s: also given in --add-config", k)
				}
				ops = append(ops, &adminv1.ConfigOp{Name: k, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE})
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{
					Resources: []*adminv1.AlterConfigsResource{{Resource: res, Ops: ops}}})
				if err != nil {
					return err
				}
				for _, r := range resp.GetResults() {
					if err := client.ItemError(r.GetErrorCode(), r.GetErrorMessage(), "alter config of %s", what); err != nil {
						return err
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Completed updating config for %s.\n", what)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic to configure")
	f.Int32Var(&broker, "broker", -1, "the broker id to configure")
	f.BoolVar(&brokerDefaults, "broker-defaults", false, "configure the cluster-wide default for every broker")
	f.StringArrayVar(&add, "add-config", nil, "config to set, key=value (repeatable; several may be comma-separated)")
	f.StringSliceVar(&del, "delete-config", nil, "config to remove, back to its default (repeatable or comma-separated)")
	return cmd
}

// configTarget is the one resource --topic, --broker or --broker-defaults
// names (exactly one of them), and how to say it in messages.
func configTarget(cmd *cobra.Command, topic string, broker int32, brokerDefaults bool) (*adminv1.ConfigResource, string, error) {
	res := &adminv1.ConfigResource{}
	var what string
	targets := 0
	if topic != "" {
		targets++
		res.Type, res.Name, what = adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, topic, "topic "+topic
	}
	if cmd.Flags().Changed("broker") {
		targets++
		if broker < 0 {
			return nil, "", usagef("--broker must be a broker id, got %d", broker)
		}
		name := strconv.Itoa(int(broker))
		res.Type, res.Name, what = adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, name, "broker "+name
	}
	if brokerDefaults {
		targets++
		res.Type, res.Name, what = adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, "", "broker defaults"
	}
	if targets != 1 {
		return nil, "", usagef("give exactly one of --topic, --broker or --broker-defaults")
	}
	return res, what, nil
}

// newDescribeConfigCmd is kafka-configs --describe --all for one topic, one
// broker or the cluster-wide broker defaults: every setting with its
// effective value and where it comes from.
func newDescribeConfigCmd(g *globals) *cobra.Command {
	var (
		topic          string
		broker         int32
		brokerDefaults bool
	)
	cmd := &cobra.Command{
		Use:   "describe-config (--topic T | --broker N | --broker-defaults)",
		Short: "Show every setting of a topic or broker with its value and source (kafka-configs --describe --all)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, what, err := configTarget(cmd, topic, broker, brokerDefaults)
			if err != nil {
				return err
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DescribeConfigs(ctx, &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{res}})
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tVALUE\tSOURCE")
				for _, r := range resp.GetResults() {
					if err := client.ItemError(r.GetErrorCode(), r.GetErrorMessage(), "describe config of %s", what); err != nil {
						return err
					}
					for _, e := range r.GetEntries() {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", e.GetName(), e.GetValue(), strings.TrimPrefix(e.GetSource().String(), "CONFIG_SOURCE_"))
					}
				}
				return tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic to describe")
	f.Int32Var(&broker, "broker", -1, "the broker id to describe (its static flags show as STATIC_BROKER_CONFIG)")
	f.BoolVar(&brokerDefaults, "broker-defaults", false, "describe the cluster-wide broker defaults")
	return cmd
}
