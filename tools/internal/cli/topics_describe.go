package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

func newTopicsDescribeCmd(g *globals) *cobra.Command {
	var (
		topics []string
		req    adminv1.DescribeTopicsRequest
	)
	cmd := &cobra.Command{
		Use:   "describe [--topic T[,T2...]] [--under-replicated-partitions] [--at-min-isr-partitions] [--under-min-isr-partitions] [--unavailable-partitions]",
		Short: "Describe topics: partitions, leaders, replicas, ISR and leader epochs (kafka-topics --describe)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.Topics = splitList(topics)
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DescribeTopics(ctx, &req)
				if err != nil {
					return err
				}
				for _, t := range resp.GetTopics() {
					if code := kerr.Code(t.GetErrorCode()); code != kerr.None {
						return client.ItemError(t.GetErrorCode(), t.GetErrorMessage(), "describe topic %s", t.GetName())
					}
				}
				// Like kafka-topics, the filters list only partition lines.
				filtered := req.GetUnderReplicated() || req.GetAtMinIsr() || req.GetUnderMinIsr() || req.GetUnavailable()
				var configs map[string]map[string]string
				if !filtered {
					if configs, err = overrides(ctx, a, resp.GetTopics()); err != nil {
						return err
					}
				}
				out := cmd.OutOrStdout()
				for _, t := range resp.GetTopics() {
					if !filtered {
						fmt.Fprintln(out, topicLine(t, len(t.GetPartitions()), configs[t.GetName()]))
					}
					for _, p := range t.GetPartitions() {
						fmt.Fprintln(out, partitionLine(t.GetName(), p))
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&topics, "topic", nil, "topics to describe (comma-separated or repeated; default all)")
	f.BoolVar(&req.UnderReplicated, "under-replicated-partitions", false, "only partitions whose ISR is smaller than their replica set")
	f.BoolVar(&req.AtMinIsr, "at-min-isr-partitions", false, "only partitions whose ISR size equals min.insync.replicas")
	f.BoolVar(&req.UnderMinIsr, "under-min-isr-partitions", false, "only partitions whose ISR is smaller than min.insync.replicas")
	f.BoolVar(&req.Unavailable, "unavailable-partitions", false, "only partitions without a live leader")
	return cmd
}

// overrides returns each topic's configs that are not defaults, as
// kafka-topics --describe shows them.
func overrides(ctx context.Context, a *client.Admin, topics []*adminv1.TopicDescription) (map[string]map[string]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	req := &adminv1.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: t.GetName()})
	}
	resp, err := a.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, r := range resp.GetResults() {
		if kerr.Code(r.GetErrorCode()) != kerr.None {
			continue // deleted between the two calls; the topic line shows none
		}
		m := map[string]string{}
		for _, e := range r.GetEntries() {
			if e.GetSource() != adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT {
				m[e.GetName()] = e.GetValue()
			}
		}
		out[r.GetResource().GetName()] = m
	}
	return out, nil
}
