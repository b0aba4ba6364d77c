package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
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
			"is plain: no colours and no screen clearing. When the controllers stop answering it\n" +
			"keeps trying, and says on standard error that the table is stale.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The request carries milliseconds in an int32.
			if interval <= 0 || interval.Milliseconds() > math.MaxInt32 {
				return usagef("--interval must be positive and under 24 days, got %v", interval)
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
			seen := func() {}
			if !once {
				var stop func()
				seen, stop = warnWhenStale(cmd.ErrOrStderr(), interval, time.Now())
				defer stop()
			}
			for msg, err := range a.WatchCluster(ctx, req) {
				if err != nil {
					if ctx.Err() != nil && !once {
						return nil // Ctrl-C
					}
					return err
				}
				seen()
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

// warnWhenStale says on w when the watch has had no update for a while:
// the client keeps trying the controllers for as long as the watch runs,
// and without a word the last table would pass for the current one. seen
// notes an update; stop ends the check and waits for it.
func warnWhenStale(w io.Writer, interval time.Duration, now time.Time) (seen, stop func()) {
	after := 2*interval + reachTimeout
	var mu sync.Mutex
	last, warned := now, false
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(min(interval, time.Second))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				mu.Lock()
				if !warned && now.Sub(last) > after {
					warned = true
					fmt.Fprintf(w, "no update from the controllers since %s: the table is stale; still trying (Ctrl-C stops)\n", last.Format("15:04:05"))
				}
				mu.Unlock()
			}
		}
	}()
	seen = func() {
		mu.Lock()
		last, warned = time.Now(), false
		mu.Unlock()
	}
	return seen, func() { close(done); wg.Wait() }
}
