package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

func newWatchCmd(g *globals) *cobra.Command {
	var (
		topics   []string
		interval time.Duration
		once     bool
		color    string
	)
	cmd := &cobra.Command{
		Use:   "watch [--topic T[,T2...]] [--interval 1s] [--once]",
		Short: "Watch partitions live: leader, ISR, out-of-sync replicas, each replica's LEO and HW, and warnings",
		Long: "Watch partitions live from the active controller: one row per partition with the leader\n" +
			"in yellow, in-sync replicas in green and out-of-sync ones in red, each replica's log end\n" +
			"offset and high watermark, warnings for under-replicated and leaderless partitions, and\n" +
			"the recent ISR changes and elections. When standard output is not a terminal the output\n" +
			"is plain: no colours and no screen clearing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return usagef("--interval must be positive, got %v", interval)
			}
			out := cmd.OutOrStdout()
			tty := isTerminal(out)
			v := &watchView{topics: map[string]bool{}, clear: tty && !once}
			switch color {
			case "auto":
				v.color = tty && os.Getenv("NO_COLOR") == ""
			case "always":
				v.color = true
			case "never":
			default:
				return usagef("--color must be auto, always or never, got %q", color)
			}
			names := splitList(topics)
			for _, t := range names {
				v.topics[t] = true
			}
			ctx := cmd.Context()
			if once {
				// One snapshot must not wait for ever on a cluster in trouble.
				var cancel context.CancelFunc
				ctx, cancel = g.opContext(ctx)
				defer cancel()
			}
			a, err := g.admin(ctx)
			if err != nil {
				return err
			}
			defer a.Close()
			if err := checkTopics(ctx, g, a, names); err != nil {
				return err
			}
			req := &adminv1.WatchClusterRequest{Topics: names, IntervalMs: int32(interval.Milliseconds())}
			for msg, err := range a.WatchCluster(ctx, req) {
				if err != nil {
					if ctx.Err() != nil && !once {
						return nil // Ctrl-C
					}
					return err
				}
				v.addEvents(msg.GetEvents())
				v.render(out, msg)
				if once {
					return nil
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&topics, "topic", nil, "topics to watch (comma-separated or repeated; default all)")
	f.DurationVar(&interval, "interval", time.Second, "refresh at least this often")
	f.BoolVar(&once, "once", false, "print one snapshot and exit")
	f.StringVar(&color, "color", "auto", "colours: auto (when standard output is a terminal and NO_COLOR is unset), always or never")
	return cmd
}

// checkTopics makes an unknown topic an error: the watch itself would just
// show no partitions.
func checkTopics(ctx context.Context, g *globals, a *client.Admin, names []string) error {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := g.opContext(ctx)
	defer cancel()
	resp, err := a.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{Topics: names})
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range resp.GetTopics() {
		if kerr.Code(t.GetErrorCode()) != kerr.None {
			errs = append(errs, client.ItemError(t.GetErrorCode(), t.GetErrorMessage(), "watch %s", t.GetName()))
		}
	}
	return errors.Join(errs...)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
