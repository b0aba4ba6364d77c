package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/scenario"
)

func newScenarioCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Play the learning note's playbooks on the dev cluster, narrated, and check they go as the note says",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "SCENARIO\tNOTE\tWHAT HAPPENS")
			for _, s := range scenario.All() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Note, s.Title)
			}
			return tw.Flush()
		},
	})
	var (
		control string
		explain bool
		noColor bool
		wait    time.Duration
		lag     time.Duration
	)
	run := &cobra.Command{
		Use:   "run NAME [--explain]",
		Short: "Play one scenario on the running dev cluster (tidemark dev up); exit 1 if it did not go as the note says",
		Long: "Play one scenario on the running dev cluster (tidemark dev up, which must run with its\n" +
			"fault-injection API, the default): the scenario creates its own topic, injects its faults through\n" +
			"the launcher and the brokers' fault API, prints a timeline with the partition's replicas (LEO/HW,\n" +
			"ISR, in `tidemark watch`'s colours) at each step and the rule at work, and leaves the nodes it\n" +
			"acted on running, its faults cleared and the ISR full. It refuses to start while the launcher\n" +
			"plays a scenario (the console's), and holds the launcher's scenario slot while it runs, so the\n" +
			"console's Run is refused meanwhile. --explain answers the note's questions the scenario bears on\n" +
			"with the run's figures. Exit 0: as the note says; 1: not, or the run could not be carried out;\n" +
			"2: bad usage.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := scenario.Find(args[0]); err != nil {
				return usagef("%v", err)
			}
			if wait <= 0 {
				return usagef("--wait must be positive, got %v", wait)
			}
			if lag < 0 {
				return usagef("--lag-time must not be negative, got %v", lag)
			}
			out := cmd.OutOrStdout()
			sec, err := g.security()
			if err != nil {
				return err
			}
			env, err := scenario.Discover(cmd.Context(), control, sec)
			if err != nil {
				return err
			}
			release, err := scenario.Hold(cmd.Context(), env, args[0])
			if err != nil {
				return err
			}
			defer release()
			v := &watchView{color: !noColor && isTerminal(out) && os.Getenv("NO_COLOR") == ""}
			res, err := scenario.Run(cmd.Context(), args[0], env, scenario.Options{Out: out, Explain: explain, Wait: wait, LagTime: lag,
				Table: func(w io.Writer, msg *adminv1.WatchClusterResponse) { v.render(w, msg) }})
			if err != nil {
				return fmt.Errorf("scenario %s: %w", args[0], err)
			}
			if !res.OK() {
				return fmt.Errorf("scenario %s did not go as the note says: %d finding(s) above", args[0], len(res.Failures))
			}
			return nil
		},
	}
	f := run.Flags()
	f.StringVar(&control, "control", devcluster.DefaultControlAddr, "address of the running launcher's control API (tidemark dev up)")
	f.BoolVar(&explain, "explain", false, "answer the note's questions the scenario bears on with the run's figures")
	f.BoolVar(&noColor, "no-color", false, "no colours (they are off anyway when standard output is not a terminal or NO_COLOR is set)")
	f.DurationVar(&wait, "wait", time.Minute, "longest wait for the cluster to reach each step's state")
	f.DurationVar(&lag, "lag-time", 0, "override the brokers' replica.lag.time.max.ms the scenarios time their steps by; 0 reads broker 1's (its --config flag included) from DescribeConfigs")
	cmd.AddCommand(run)
	return cmd
}
