package cli

import (
	"context"

	"github.com/spf13/cobra"

	"tidemark.io/services/client"
)

func newClusterCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Describe the cluster",
	}
	c.AddCommand(&cobra.Command{
		Use:   "describe",
		Short: "Show the active controller and its controller_epoch, the controllers, and the brokers with their epochs, racks, liveness and leader counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DescribeCluster(ctx)
				if err != nil {
					return err
				}
				return writeCluster(cmd.OutOrStdout(), resp)
			})
		},
	})
	return c
}
