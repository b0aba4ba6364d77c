package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/client"
)

// newLeaderElectionCmd is kafka-leader-election: a preferred or unclean
// election for one partition or all of them (KIP-460).
func newLeaderElectionCmd(g *globals) *cobra.Command {
	var (
		electionType string
		topic        string
		partition    int32
		all          bool
	)
	cmd := &cobra.Command{
		Use:   "leader-election --election-type preferred|unclean (--topic T --partition P | --all-topic-partitions)",
		Short: "Run a preferred or unclean leader election (kafka-leader-election)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &adminv1.ElectLeadersRequest{}
			switch strings.ToLower(electionType) {
			case "preferred":
				req.ElectionType = adminv1.ElectionType_ELECTION_TYPE_PREFERRED
			case "unclean":
				req.ElectionType = adminv1.ElectionType_ELECTION_TYPE_UNCLEAN
			case "":
				return usagef("--election-type is required: preferred or unclean")
			default:
				return usagef("--election-type must be preferred or unclean, got %q", electionType)
			}
			hasPartition := cmd.Flags().Changed("partition")
			switch {
			case all && (topic != "" || hasPartition):
				return usagef("--all-topic-partitions cannot be combined with --topic or --partition")
			case all:
				req.AllPartitions = true
			case topic == "" || !hasPartition:
				return usagef("give --topic and --partition together, or --all-topic-partitions")
			case partition < 0:
				return usagef("--partition must not be negative, got %d", partition)
			default:
				req.Partitions = []*commonv1.TopicPartition{{Topic: topic, Partition: partition}}
			}
			kind := strings.ToUpper(electionType)
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				req.TimeoutMs = int32(min(adminWait, g.commandTimeout).Milliseconds())
				resp, err := a.ElectLeaders(ctx, req)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if len(resp.GetResults()) == 0 {
					fmt.Fprintln(out, "No partition needed a leader election.")
				}
				failed := 0
				for _, r := range resp.GetResults() {
					line, bad := electionLine(kind, r)
					fmt.Fprintln(out, line)
					if bad {
						failed++
					}
				}
				if failed > 0 {
					return fmt.Errorf("leader election failed for %d of %d partitions", failed, len(resp.GetResults()))
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&electionType, "election-type", "", "preferred: hand leadership back to the first assigned replica; unclean: elect an out-of-sync replica when no in-sync one is alive (may lose acknowledged records)")
	f.StringVar(&topic, "topic", "", "the topic of the partition")
	f.Int32Var(&partition, "partition", 0, "the partition")
	f.BoolVar(&all, "all-topic-partitions", false, "elect for every partition that needs it")
	return cmd
}
