package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"tidemark.io/tools/internal/chaos"
)

func newChaosCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "chaos",
		Short: "Seeded fault runs against a cluster of real processes, checked against Kafka's promises",
	}
	c.AddCommand(newChaosRunCmd(g))
	return c
}

func newChaosRunCmd(g *globals) *cobra.Command {
	var (
		o       chaos.Options
		seed    uint64
		seconds int
		runs    int
		budget  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run [--seed N] [--seconds S] [--runs K]",
		Short: "Start a dev cluster on ports of its own, inject seeded faults into its processes while producing and consuming, then check every record",
		Long: `Starts a dev cluster (embedded etcd, 2 controllers, 3 brokers, the gateway) as separate
processes on a free port range and a data dir of its own, never on the ports of a running
'make run'. While an idempotent acks=all producer, a plain acks=1 producer and a consumer per
partition run (bursts and idle gaps), it kills (SIGKILL), stops (SIGTERM), freezes (SIGSTOP)
and restarts brokers, kills or freezes the active controller, asks for preferred and unclean elections,
stalls followers through the fault API, and cuts the network through loopback proxies in front
of every node (a leader cut from etcd and the controllers past its lease, whose acks=1 writes
the leader fence must stop; a broker cut from everything; a broker or the active controller
cut from etcd). Then it heals everything, waits through a quiet
period without produce, polls until every partition is whole, checks that the active
controller's views (tidemark watch, the console) agree, stops the cluster, reads every
replica's log from disk and checks the history. A run that breaks a promise exits 1 and
prints its seed, the command that replays it and the data dir it kept (node logs in logs/).
Every link runs with mutual TLS on certificates made in the data dir, unless --plaintext.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seconds <= 0 {
				return usagef("--seconds must be positive, got %d", seconds)
			}
			if runs < 1 || runs > 1000 {
				return usagef("--runs must be 1..1000, got %d", runs)
			}
			if runs > 1 && o.DataDir != "" {
				return usagef("--data-dir holds one run's cluster: leave it out with --runs %d", runs)
			}
			if o.BinDir == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.BinDir = filepath.Dir(exe)
			}
			if !cmd.Flags().Changed("seed") {
				seed = uint64(time.Now().UnixNano())
			}
			// The run's cluster makes its own certificates: only --plaintext
			// of the TLS flags applies.
			o.Plaintext = g.tlsFlags.Plaintext
			o.Faults = time.Duration(seconds) * time.Second
			o.Out = cmd.OutOrStdout()
			o.Replay = chaosReplay(cmd.Flags(), seconds, o.Plaintext)
			var failed []string
			start := time.Now()
			for i := range runs {
				if budget > 0 && i > 0 && time.Since(start) >= budget {
					fmt.Fprintf(o.Out, "--budget of %s spent: stopped before seed %d\n", budget, seed+uint64(i))
					break
				}
				o.Seed = seed + uint64(i)
				res, err := chaos.Run(cmd.Context(), o)
				switch {
				case err != nil:
					failed = append(failed, fmt.Sprintf("seed %d: could not run: %v", o.Seed, err))
				case !res.OK():
					kinds := map[string]int{}
					for _, v := range res.Report.Violations {
						kinds[string(v.Kind)]++
					}
					for _, f := range res.Fences {
						if !f.OK() {
							kinds["leader-fence"]++
						}
					}
					if len(res.Views) > 0 {
						kinds["controller-view"] += len(res.Views)
					}
					if len(res.SlowStops) > 0 {
						kinds["slow-stop"] += len(res.SlowStops)
					}
					if len(res.Strays) > 0 {
						kinds["stray-log"] += len(res.Strays)
					}
					if len(res.Unserved) > 0 {
						kinds["not-serving"] += len(res.Unserved)
					}
					n := 0
					for _, k := range kinds {
						n += k
					}
					failed = append(failed, fmt.Sprintf("seed %d: %d promises broken %v (replay: %s; data: %s)",
						o.Seed, n, kinds, res.Replay, res.DataDir))
				default:
					fmt.Fprintf(o.Out, "seed %d: every promise kept\n", o.Seed)
				}
				if cmd.Context().Err() != nil {
					break
				}
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d of %d runs failed:\n  %s", len(failed), runs, strings.Join(failed, "\n  "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&seed, "seed", 0, "seed of the fault schedule and the traffic pattern (default: from the clock); with --runs, the first of consecutive seeds")
	f.IntVar(&seconds, "seconds", 60, "how long faults are injected")
	f.IntVar(&runs, "runs", 1, "how many runs, with consecutive seeds")
	f.DurationVar(&budget, "budget", 0, "start no new run once this much time has passed (0: no bound)")
	f.StringVar(&o.BinDir, "bin-dir", "", "folder holding the broker, controller and gateway binaries (default: next to tidemark)")
	f.StringVar(&o.DataDir, "data-dir", "", "the cluster's data dir (default: a temporary one, removed after a passing run)")
	f.BoolVar(&o.KeepData, "keep-data", false, "keep the data dir of a passing run too")
	f.IntVar(&o.PortBase, "port-base", 0, "first of the ports the cluster takes (default: a free range from 20000)")
	f.BoolVar(&o.DumpStuck, "dump-stuck", false, "before stopping the cluster, SIGQUIT the brokers that kept a partition from being whole, so their goroutine stacks are in their logs (disturbs the final state read from disk)")
	f.DurationVar(&o.LagTime, "lag-time", 2500*time.Millisecond, "the brokers' replica.lag.time.max.ms")
	f.BoolVar(&o.NoLinks, "no-links", false, "no proxies in front of the nodes, and so no network cuts")
	f.StringSliceVar(&o.Steps, "steps", nil, "only these fault steps (default: all): "+strings.Join(chaos.StepNames(), ", "))
	return cmd
}

// chaosReplay is the command that replays a run (with %d for its seed): the
// flags that shape the schedule or the cluster are kept as given, those
// that only pick which runs or where their data goes are not.
func chaosReplay(fs *pflag.FlagSet, seconds int, plaintext bool) string {
	replay := fmt.Sprintf("bin/tidemark chaos run --seed %%d --seconds %d", seconds)
	if plaintext {
		replay += " --plaintext"
	}
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "seed", "seconds", "runs", "budget", "data-dir", "keep-data", "port-base", "dump-stuck":
			return
		}
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		replay += fmt.Sprintf(" --%s=%s", f.Name, strings.ReplaceAll(v, "%", "%%"))
	})
	return replay
}
