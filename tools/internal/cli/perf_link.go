package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"tidemark.io/tools/internal/linkfloor"
)

// newPerfLinkCmd times the link between two processes of this machine,
// with no cluster: the floor under every synchronous write.
func newPerfLinkCmd(g *globals) *cobra.Command {
	var (
		size, roundTrips int
		asJSON, serve    bool
		pkiDir           string
		timeout          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "link [--size S] [--round-trips N] [--json]",
		Short: "Time one message each way between two processes over mutual TLS on loopback: the floor under a synchronous write",
		Long: "Start a second process of this binary that echoes, and time N round trips of S bytes to\n" +
			"it: on a bare TLS connection, and on a gRPC stream set up as tidemark's links are (the\n" +
			"same TLS writes and HTTP/2 windows). No cluster is used. A synchronous acks=all write\n" +
			"takes at least two such round trips (client to leader and back, leader to a follower and\n" +
			"back), so one producer waiting for each write cannot pass 1 / (2 × round trip) writes/s\n" +
			"on this machine, in tidemark or any system that replicates before it answers.\n" +
			"Both processes keep the runtime's monitor thread polling, as brokers do (--sysmon-poll),\n" +
			"and take GOMAXPROCS from the environment (brokers of `tidemark dev` on 2 cores run with 1).\n" +
			"A gRPC link's time can differ between pairs of processes by several times on a virtual\n" +
			"machine: run it a few times (`make bench-compare` takes the median of 5).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serve {
				if pkiDir == "" {
					return usagef("--serve needs --pki-dir")
				}
				return linkfloor.ServeUntilEOF(cmd.Context(), pkiDir, cmd.InOrStdin(), cmd.OutOrStdout())
			}
			switch {
			case size <= 0:
				return usagef("--size must be positive, got %d", size)
			case size > maxLinkSize:
				return usagef("--size must be at most %d bytes, got %d", maxLinkSize, size)
			case roundTrips <= 0:
				return usagef("--round-trips must be positive, got %d", roundTrips)
			case timeout <= 0:
				return usagef("--timeout must be positive, got %v", timeout)
			}
			res, err := measureLink(cmd, g, size, roundTrips, timeout)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			ms := func(d time.Duration) string { return fmt.Sprintf("%.3f ms", d.Seconds()*1000) }
			for _, l := range []struct {
				name string
				lat  linkfloor.Latency
			}{{"bare TLS", res.TLS}, {"gRPC stream", res.GRPC}} {
				fmt.Fprintf(cmd.OutOrStdout(), "%-12s %d round trips of %d B: p50 %s, p99 %s, mean %s; two round trips bound one synchronous producer at %.0f writes/s\n",
					l.name, res.RoundTrips, res.Size, ms(l.lat.P50), ms(l.lat.P99), ms(l.lat.Mean), 1/(2*l.lat.P50.Seconds()))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&size, "size", 128, "bytes of each message")
	f.IntVar(&roundTrips, "round-trips", 4000, "round trips timed on each link (after 200 untimed)")
	f.DurationVar(&timeout, "timeout", time.Minute, "how long the whole measurement may take")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object (nanoseconds)")
	f.BoolVar(&serve, "serve", false, "be the echoing end (started by the command itself)")
	f.StringVar(&pkiDir, "pki-dir", "", "the echoing end's certificates (with --serve)")
	_ = f.MarkHidden("serve")
	_ = f.MarkHidden("pki-dir")
	return cmd
}

// maxLinkSize bounds a message: the floor is about small writes, and the
// echo reads into a 64 KiB buffer.
const maxLinkSize = 1 << 20

// measureLink issues a CA and the two ends' certificates into a private
// directory, starts the echoing end and measures.
func measureLink(cmd *cobra.Command, g *globals, size, roundTrips int, timeout time.Duration) (linkfloor.Result, error) {
	dir, err := os.MkdirTemp("", "tidemark-link-")
	if err != nil {
		return linkfloor.Result{}, err
	}
	defer os.RemoveAll(dir)
	if err := linkfloor.IssueCerts(dir); err != nil {
		return linkfloor.Result{}, err
	}
	cfg, err := linkfloor.ClientConfig(dir)
	if err != nil {
		return linkfloor.Result{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return linkfloor.Result{}, err
	}
	peerCmd := exec.Command(exe, "perf", "link", "--serve", "--pki-dir", dir)
	peerCmd.Env = g.environ()
	peerCmd.Stderr = cmd.ErrOrStderr()
	peer, err := linkfloor.StartPeer(peerCmd)
	if err != nil {
		return linkfloor.Result{}, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	res, err := linkfloor.Measure(ctx, peer.TLSAddr, peer.GRPCAddr, cfg, size, roundTrips)
	if serr := peer.Stop(); err == nil && serr != nil {
		err = fmt.Errorf("echo peer: %w", serr)
	}
	return res, err
}
