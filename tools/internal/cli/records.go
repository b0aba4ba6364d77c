package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"tidemark.io/services/client"
)

func newRecordsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "records",
		Short: "Delete the records of a partition below an offset (kafka-delete-records)",
	}
	c.AddCommand(newRecordsDeleteCmd(g))
	return c
}

func newRecordsDeleteCmd(g *globals) *cobra.Command {
	var (
		topic     string
		partition int32
		offset    int64
	)
	cmd := &cobra.Command{
		Use:   "delete --topic T --partition P --offset N",
		Short: "Move a partition's log start to N (-1: the high watermark) and print its low watermark",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case topic == "":
				return usagef("--topic is required")
			case !cmd.Flags().Changed("partition"):
				return usagef("--partition is required")
			case partition < 0:
				return usagef("--partition must not be negative, got %d", partition)
			case !cmd.Flags().Changed("offset"):
				return usagef("--offset is required")
			case offset < client.DeleteHighWatermark:
				return usagef("--offset must be an offset or -1 (the high watermark), got %d", offset)
			}
			ctx := cmd.Context()
			c, _, err := g.topicClient(ctx, topic, partition)
			if err != nil {
				return err
			}
			defer c.Close()
			octx, cancel := g.opContext(ctx)
			defer cancel()
			low, err := c.DeleteRecords(octx, topic, partition, offset)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "partition: %s-%d\tlow_watermark: %d\n", topic, partition, low)
			return nil
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic")
	cmd.Flags().Int32Var(&partition, "partition", -1, "the partition")
	cmd.Flags().Int64Var(&offset, "offset", 0, "the new log start: records below it are deleted; -1 is the high watermark")
	return cmd
}
