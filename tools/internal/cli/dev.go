package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/scenario"
)

func newDevCmd(g *globals) *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run a whole cluster on this machine and stop, kill, pause or restart its nodes",
	}
	var controlAddr string
	dev.PersistentFlags().StringVar(&controlAddr, "control", devcluster.DefaultControlAddr, "address of the running launcher's control API")
	dev.AddCommand(newDevUpCmd(g))
	dev.AddCommand(newDevStatusCmd(g, &controlAddr))
	actions := []struct {
		use, short string
		action     devclusterv1.Action
	}{
		{"stop", "Stop a node gracefully (SIGTERM; a broker hands off its leaderships first)", devclusterv1.Action_ACTION_STOP},
		{"kill", "Kill a node (SIGKILL: a crash)", devclusterv1.Action_ACTION_KILL},
		{"pause", "Freeze a node (SIGSTOP), like a long GC pause", devclusterv1.Action_ACTION_PAUSE},
		{"resume", "Continue a paused node (SIGCONT)", devclusterv1.Action_ACTION_RESUME},
		{"start", "Start a stopped or killed node", devclusterv1.Action_ACTION_START},
		{"restart", "Stop then start a node", devclusterv1.Action_ACTION_RESTART},
	}
	for _, a := range actions {
		dev.AddCommand(newDevActionCmd(g, a.use, a.short, a.action, &controlAddr))
	}
	return dev
}

func newDevUpCmd(g *globals) *cobra.Command {
	o := devcluster.DefaultOptions()
	var racks string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start etcd, the controllers, the brokers and the gateway; Ctrl-C stops them all",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if racks != "" {
				o.Racks = strings.Split(racks, ",")
			}
			if o.BinDir == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.BinDir = filepath.Dir(exe)
			}
			// The cluster makes its own certificates: only --plaintext of the
			// TLS flags applies.
			o.Plaintext = g.tlsFlags.Plaintext
			// The console's Scenarios panel plays them through the launcher.
			o.Scenarios = scenario.Launcher{}
			out := cmd.OutOrStdout()
			// A closed terminal (SIGHUP) stops the cluster as Ctrl-C does;
			// a second signal kills the nodes still stopping.
			ctx, hurry, stop := devcluster.NotifyShutdown(cmd.Context(), out)
			defer stop()
			if w := devcluster.EphemeralOverlap(o); w != "" {
				fmt.Fprintln(out, "warning:", w)
			}
			c, err := devcluster.Up(ctx, o, out)
			if err != nil {
				return err
			}
			fmt.Fprintln(out)
			c.PrintTable(out)
			fmt.Fprintln(out)
			printSecurity(out, c.Options())
			fmt.Fprintf(out, "every node runs with GOMAXPROCS=%d (--gomaxprocs)\n", c.Options().Procs())
			if o.Profiles {
				for _, n := range c.Nodes() {
					if n.ProfileAddr != "" {
						fmt.Fprintf(out, "%s serves profiles on http://%s/debug/pprof/\n", n.Name, n.ProfileAddr)
					}
				}
			}
			fmt.Fprintf(out, "\ndata in %s, logs in %s. Try: tidemark dev kill broker-1 | tidemark dev start broker-1\nCtrl-C (or closing the terminal) stops the cluster; a second Ctrl-C kills the nodes still stopping.\n",
				o.DataDir, filepath.Join(o.DataDir, "logs"))
			<-ctx.Done()
			fmt.Fprintln(out, "\nstopping the cluster (again to kill the nodes at once)")
			c.DownOr(out, hurry)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", o.DataDir, "folder for etcd, broker data and logs")
	f.StringVar(&o.BinDir, "bin-dir", "", "folder holding the broker, controller and gateway binaries (default: next to tidemark)")
	f.IntVar(&o.Brokers, "brokers", o.Brokers, "number of brokers")
	f.IntVar(&o.Controllers, "controllers", o.Controllers, "number of controllers")
	f.StringVar(&racks, "racks", "", "comma-separated racks assigned to brokers round-robin, e.g. rack-a,rack-b,rack-c")
	f.StringVar(&o.OTLPEndpoint, "otel-endpoint", os.Getenv("TIDEMARK_OTEL_ENDPOINT"), "OTLP gRPC endpoint for traces, e.g. 127.0.0.1:4317 (Jaeger)")
	f.BoolVar(&o.FaultInjection, "fault-injection", o.FaultInjection, "enable the brokers' fault-injection API")
	f.BoolVar(&o.Jaeger, "jaeger", os.Getenv("JAEGER") == "1", "also run Jaeger (OTLP 127.0.0.1:4317, API 127.0.0.1:16686) and trace every service into it")
	f.StringVar(&o.JaegerBin, "jaeger-bin", "", "the Jaeger binary (default: .bin/jaeger beside bin/, built by make thirdparty)")
	f.StringArrayVar(&o.BrokerArgs, "broker-arg", nil, "extra flag for every broker, repeatable; broker configs go through the broker's --config, e.g. --broker-arg=--config=replica.lag.time.max.ms=10000")
	f.StringArrayVar(&o.ControllerArgs, "controller-arg", nil, "extra flag for every controller, e.g. --controller-arg=--auto.leader.rebalance.enable=false")
	f.BoolVar(&o.PlaintextEtcd, "etcd-plaintext", false, "run etcd without TLS and without authentication (by default it serves TLS only, wants client certificates from <data-dir>/pki and has its roles on); needs a data dir whose etcd never had auth on")
	f.IntVar(&o.ProcsPerNode, "gomaxprocs", 0, "GOMAXPROCS of every node (0: this environment's GOMAXPROCS if set, else cores / brokers, at least 1, so the nodes share the machine rather than each spinning threads on every core)")
	f.BoolVar(&o.Profiles, "pprof", false, "serve every broker's and controller's /debug/pprof/ (CPU, heap, execution trace) on a free loopback port, printed at start; unauthenticated, so loopback only")
	f.IntVar(&o.PortBase, "port-base", 0, fmt.Sprintf("run on %d consecutive ports from this one (etcd, control, gateway, then controllers +10, brokers +20, metrics +30/+40, Kafka listeners +50) instead of the documented ones; `tidemark dev` commands then need --control 127.0.0.1:<base+1>", devcluster.PortSpan))
	return cmd
}

func devClient(g *globals, addr string) (devclusterv1.DevClusterServiceClient, func(), error) {
	dial, err := g.dialOption()
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient(addr, dial)
	if err != nil {
		return nil, nil, err
	}
	return devclusterv1.NewDevClusterServiceClient(conn), func() { conn.Close() }, nil
}

func newDevStatusCmd(g *globals, controlAddr *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List the dev cluster's nodes and their states",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, done, err := devClient(g, *controlAddr)
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			resp, err := cl.ListNodes(ctx, &devclusterv1.ListNodesRequest{})
			if err != nil {
				return fmt.Errorf("no dev cluster answers on %s (start one with `make run`): %s", *controlAddr, status.Convert(err).Message())
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tADDRESS\tSTATE\tPID\tEXTRA ARGS")
			for _, n := range resp.GetNodes() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", n.GetName(), n.GetAddress(), strings.TrimPrefix(n.GetState().String(), "NODE_STATE_"), n.GetPid(), strings.Join(n.GetExtraArgs(), " "))
			}
			return tw.Flush()
		},
	}
}

func newDevActionCmd(g *globals, use, short string, action devclusterv1.Action, controlAddr *string) *cobra.Command {
	var extra []string
	c := &cobra.Command{
		Use:   use + " NODE",
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("%s takes one node name, e.g. broker-1", use)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, done, err := devClient(g, *controlAddr)
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := context.WithTimeout(cmd.Context(), 45*time.Second)
			defer cancel()
			resp, err := cl.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: args[0], Action: action, ExtraArgs: extra})
			if err != nil {
				return fmt.Errorf("%s %s: %s", use, args[0], status.Convert(err).Message())
			}
			n := resp.GetNode()
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s (pid %d)", n.GetName(), strings.TrimPrefix(n.GetState().String(), "NODE_STATE_"), n.GetPid())
			if len(n.GetExtraArgs()) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), " with %s", strings.Join(n.GetExtraArgs(), " "))
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	if action == devclusterv1.Action_ACTION_START || action == devclusterv1.Action_ACTION_RESTART {
		c.Flags().StringArrayVar(&extra, "arg", nil, "an argument added to the node's launch flags for this start only, repeatable "+
			"(e.g. --arg=--config=replica.truncation.mode=high-watermark); a later start without --arg uses the original flags")
	}
	return c
}

// printSecurity says where the dev cluster's certificates and REST token
// are and how the CLI, grpcurl and curl use them.
func printSecurity(out io.Writer, o devcluster.Options) {
	if o.Plaintext {
		fmt.Fprintln(out, "security: OFF (--plaintext): every link is plaintext; give the CLI --plaintext (or TIDEMARK_PLAINTEXT=true) and grpcurl -plaintext")
		fmt.Fprintf(out, "  kcat -b %s -L\n", o.Ports().BrokerKafka[0])
		return
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	sec := o.Security()
	ca, cert, key, tokens := abs(sec.CA), abs(sec.Cert), abs(sec.Key), abs(o.TokensPath())
	fmt.Fprintf(out, "security: mutual TLS on every link; CA, certificates and keys in %s\n", abs(o.PKIDir()))
	fmt.Fprintf(out, "  CA %s, admin certificate %s, key %s, REST bearer token (user admin) in %s\n", ca, cert, key, tokens)
	if filepath.Clean(o.PKIDir()) == devPKIDir {
		fmt.Fprintf(out, "  the CLI finds them by itself when run from here; elsewhere:\n")
	} else {
		fmt.Fprintf(out, "  give the CLI (and `tidemark dev` commands --control %s):\n", o.ControlAddr)
	}
	fmt.Fprintf(out, "    export TIDEMARK_TLS_CA=%s TIDEMARK_TLS_CERT=%s TIDEMARK_TLS_KEY=%s\n", ca, cert, key)
	fmt.Fprintf(out, "  grpcurl -cacert %s -cert %s -key %s %s list\n", ca, cert, key, o.Ports().Brokers[0])
	fmt.Fprintf(out, "  kcat -b %s -X security.protocol=ssl -X ssl.ca.location=%s -X ssl.certificate.location=%s -X ssl.key.location=%s -L\n",
		o.Ports().BrokerKafka[0], ca, cert, key)
	if devcluster.GatewayTLS() {
		fmt.Fprintf(out, "  curl --cacert %s -H \"Authorization: Bearer $(cut -d' ' -f1 %s)\" https://%s/v1/cluster\n", ca, tokens, o.Ports().Gateway)
	} else {
		fmt.Fprintf(out, "  the gateway (http://%s) runs without TLS settings in this build, and so cannot reach the nodes\n", o.Ports().Gateway)
	}
}
