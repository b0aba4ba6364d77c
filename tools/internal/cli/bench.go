package cli

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"tidemark.io/tools/internal/benchcmp"
)

func newBenchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks of the deployed shape, beside a peer system",
	}
	c.AddCommand(newBenchCompareCmd())
	return c
}

func newBenchCompareCmd() *cobra.Command {
	o := benchcmp.Options{OutDir: filepath.Join(".data", "bench"), Kills: 20, OneCPU: true}
	scale := 1.0
	inFlight := benchcmp.DefaultInFlight
	readme := ""
	var only []string
	cmd := &cobra.Command{
		Use:   "compare [--out-dir .data/bench] [--scale 1] [--kills 20]",
		Short: "Measure tidemark's dev cluster and a 3-node NATS JetStream cluster one after the other, same shapes, and print the ratios",
		Long: `Starts a dev cluster (etcd, 2 controllers, 3 brokers, the gateway; mutual TLS) as separate
processes on free ports and a temporary data dir, runs each shape with 'tidemark perf'
(acks=all, RF 3, one partition): one synchronous producer, 8 synchronous producers,
a batching producer, at 128 B and 1 KiB, then a consumer; stops it; then starts a
3-node NATS JetStream cluster (file storage; mutual TLS on clients and routes, so both
systems pay for the same security; --plaintext runs both without) the same way and runs the same shapes
with 'nats bench js' on an R3 stream. On each system, after the shapes, the failover
run: an idempotent synchronous writer in this process while the partition (stream)
leader is killed with SIGKILL --kills times and restarted; it reports the time until
writes succeed again (min/median/max) and the writes failed, lost and duplicated.
Prints each figure and the ratio tidemark/JetStream
and writes them to <out-dir>/compare-<time>.md and .json, the tools' output beside them.
nats-server and nats come from --nats-bin-dir (make builds them from tools/thirdparty/nats).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Procs < 0 {
				return usagef("--gomaxprocs must not be negative, got %d", o.Procs)
			}
			if o.Kills < 0 {
				return usagef("--kills must not be negative, got %d", o.Kills)
			}
			if inFlight <= 0 {
				return usagef("--in-flight must be positive, got %d", inFlight)
			}
			if scale <= 0 {
				return usagef("--scale must be positive, got %v", scale)
			}
			switch o.Only {
			case "", "tidemark", "jetstream":
			default:
				return usagef("--only must be tidemark or jetstream, got %q", o.Only)
			}
			if o.BinDir == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.BinDir = filepath.Dir(exe)
			}
			if o.NatsBinDir == "" {
				o.NatsBinDir = filepath.Join(filepath.Dir(o.BinDir), ".bin")
			}
			if o.Only != "tidemark" {
				for _, b := range []string{"nats-server", "nats"} {
					if _, err := os.Stat(filepath.Join(o.NatsBinDir, b)); err != nil {
						return fmt.Errorf("%s not in %s (make thirdparty-nats builds it): %w", b, o.NatsBinDir, err)
					}
				}
			}
			o.Scale = scale
			o.Shapes = benchcmp.DefaultShapes(scale, inFlight)
			if len(only) > 0 {
				var err error
				if o.Shapes, err = benchcmp.SelectShapes(o.Shapes, only); err != nil {
					return usagef("--shapes: %v", err)
				}
				if readme != "" {
					return usagef("--readme takes the whole table: run every shape (no --shapes)")
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := benchcmp.Run(ctx, o, cmd.OutOrStdout())
			if err != nil || readme == "" {
				return err
			}
			if err := benchcmp.UpdateReadme(readme, res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "table written into %s\n", readme)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.BinDir, "bin-dir", "", "folder holding tidemark, broker, controller and gateway (default: next to tidemark)")
	f.StringVar(&o.NatsBinDir, "nats-bin-dir", "", "folder holding nats-server and nats (default: .bin beside the bin dir)")
	f.StringVar(&o.OutDir, "out-dir", o.OutDir, "where the tables and the tools' output go")
	f.Float64Var(&scale, "scale", scale, "multiply every shape's record count (0.1 for a quick look)")
	f.IntVar(&inFlight, "in-flight", inFlight, "batching shapes' window on both systems, bytes sent and not yet acknowledged (tidemark --buffer-memory; nats bench --batch of that many bytes)")
	f.IntVar(&o.Kills, "kills", o.Kills, "leader kill -9s of the failover run on each system (0 skips it)")
	f.IntVar(&o.Procs, "gomaxprocs", 0, "GOMAXPROCS of every server process of both systems (0: cores / 3, at least 1, as tidemark dev)")
	f.StringVar(&o.Only, "only", "", "run one system only: tidemark or jetstream")
	f.BoolVar(&o.Plaintext, "plaintext", false, "run both systems without TLS (default: mutual TLS on every link of both, clients and replication)")
	f.BoolVar(&o.ExecTrace, "exec-trace", false, "write Go execution traces of every tidemark paced run into the logs folder, the client's (tidemark-<shape>-run<N>.trace) and each broker's (…-run<N>-broker-<k>.trace); go tool trace: where a run that missed waited")
	f.BoolVar(&o.KernelWaits, "kernel-waits", false, "sample the brokers' threads every 2 ms over every tidemark paced run and write those blocked in the kernel for 10 ms or more, with their kernel stacks (root; otherwise the function they sleep in), to the logs folder (tidemark-<shape>-run<N>-kernel-waits.txt): what a run that missed waited for on the disk; costs a few percent of a core")
	f.BoolVar(&o.Preallocate, "preallocate", true, "create tidemark's topics with preallocate=true (each segment's disk blocks reserved before it is written; false: allocated as written back, the broker's default)")
	f.StringArrayVar(&o.TopicConfigs, "topic-config", nil, "another config of tidemark's topics, key=value (repeatable; for experiments: the report lists them)")
	f.StringArrayVar(&o.BrokerConfigs, "broker-config", nil, "a static config of tidemark's brokers, key=value, given to each as --config (repeatable; for experiments: the report lists them)")
	f.BoolVar(&o.OneCPU, "one-cpu", o.OneCPU, "run the synchronous shapes of both systems again with every process allowed one CPU, when the machine has more (shows how much of a synchronous write is waking a second CPU)")
	f.StringSliceVar(&only, "shapes", nil, "run only these shapes (comma-separated names: sync1-128, batch-1k, ...; a paced shape needs the one it paces)")
	f.StringVar(&readme, "readme", "", "also write the table into this README, between its bench-compare markers")
	return cmd
}
