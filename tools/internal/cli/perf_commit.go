package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/tools/internal/perfstat"
)

func newPerfCommitCmd(g *globals) *cobra.Command {
	var (
		topic      string
		group      string
		members    int
		numCommits int64
		timeout    time.Duration
		keep       bool
	)
	cmd := &cobra.Command{
		Use:   "commit --topic T [--members 10] [--num-commits N] [--group G]",
		Short: "Commit offsets from several members of one group and report commits/s and commit latency",
		Long: "Run --members members of one consumer group over --topic (give it at least as many\n" +
			"partitions as members), wait until each holds its partitions, then have every member\n" +
			"commit its partitions' offsets in a loop, each commit waiting for the coordinator's\n" +
			"acks=all write to __consumer_offsets. It reports commits/s and the commit latency\n" +
			"(avg, p50, p95, p99, p99.9, max). The members then leave and, unless --keep, the group\n" +
			"(a fresh one per run unless --group) is deleted.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case topic == "":
				return usagef("--topic is required")
			case members < 1:
				return usagef("--members must be positive, got %d", members)
			case numCommits < int64(members):
				return usagef("--num-commits must be at least --members, got %d", numCommits)
			case timeout <= 0:
				return usagef("--timeout must be positive, got %v", timeout)
			}
			generated := group == ""
			if generated {
				group = fmt.Sprintf("tidemark-perf-commit-%08x", rand.Uint32())
			}
			ctx := cmd.Context()
			c, err := g.client(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			info, err := g.checkTopic(ctx, c, topic, -1)
			if err != nil {
				return err
			}
			if n := len(info.chosen(-1)); n < members {
				return usagef("--topic %s has %d partitions: fewer than --members %d", topic, n, members)
			}
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			gcs := make([]*client.GroupConsumer, members)
			for i := range gcs {
				gc, err := client.NewGroupConsumer(c, client.GroupOptions{GroupID: group, Topics: []string{topic},
					ClientID: fmt.Sprintf("tidemark-perf-commit-%d", i), DisableAutoCommit: true,
					SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second, RebalanceTimeout: 30 * time.Second})
				if err != nil {
					return err
				}
				gcs[i] = gc
			}
			defer func() {
				cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer ccancel()
				var wg sync.WaitGroup
				for _, gc := range gcs {
					wg.Add(1)
					go func() { defer wg.Done(); _ = gc.Close(cctx) }()
				}
				wg.Wait()
				if generated && !keep {
					if err := c.DeleteGroup(cctx, group); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "delete group %s: %v\n", group, err)
					}
				}
			}()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "group %s: %d members joining…\n", group, members)
			if err := settle(rctx, gcs); err != nil {
				return err
			}
			start := time.Now()
			rec := perfstat.New(numCommits, start)
			var wg sync.WaitGroup
			for i, gc := range gcs {
				share := numCommits / int64(members)
				if int64(i) < numCommits%int64(members) {
					share++
				}
				owned := gc.Assignment()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := int64(0); k < share && rctx.Err() == nil; k++ {
						offs := map[client.TopicPartition]int64{}
						for _, tp := range owned {
							offs[tp] = k
						}
						began := time.Now()
						if err := gc.CommitSync(rctx, offs); err != nil {
							rec.Fail(kerr.CodeOf(err).String())
							continue
						}
						rec.Record(time.Since(began), 0)
					}
				}()
			}
			wg.Wait()
			sum := rec.Summary(time.Now())
			fmt.Fprintf(out, "%d commits by %d members, %.1f commits/s, latency %s avg, %s p50, %s p95, %s p99, %s p99.9, %s max\n",
				sum.Records, members, sum.RecordsPerSec(), msText(sum.Avg), msText(sum.P50), msText(sum.P95), msText(sum.P99), msText(sum.P999), msText(sum.Max))
			if ctx.Err() != nil && sum.Records < numCommits {
				return cutShort(ctx, sum, numCommits, "commits made")
			}
			if n := sum.FailedCount(); n > 0 {
				return fmt.Errorf("%d of %d commits failed: %v", n, numCommits, sum.Failed)
			}
			if sum.Records < numCommits {
				return cutShort(ctx, sum, numCommits, "commits made")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic the members subscribe to (at least --members partitions)")
	f.StringVar(&group, "group", "", "the group (default: a fresh one, deleted afterwards)")
	f.IntVar(&members, "members", 10, "members committing side by side")
	f.Int64Var(&numCommits, "num-commits", 10000, "commits in all, shared between the members")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "stop the run after this long")
	f.BoolVar(&keep, "keep", false, "keep the generated group instead of deleting it")
	return cmd
}

func msText(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// settle polls every member until each holds partitions of one generation.
func settle(ctx context.Context, gcs []*client.GroupConsumer) error {
	for {
		var wg sync.WaitGroup
		errs := make([]error, len(gcs))
		for i, gc := range gcs {
			wg.Add(1)
			go func() { defer wg.Done(); _, errs[i] = gc.Poll(ctx) }()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		gen, ready := gcs[0].Generation(), true
		for _, gc := range gcs {
			ready = ready && gen >= 0 && gc.Generation() == gen && len(gc.Assignment()) > 0
		}
		if ready {
			return nil
		}
	}
}
