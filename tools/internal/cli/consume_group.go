package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"tidemark.io/services/client"
)

// groupConsume is `consume --group`: a member of the group, reading the
// partitions the group assigns it from the group's committed offsets
// (auto.offset.reset latest, or earliest with --from-beginning), committing
// as it goes (auto-commit, and on the way out), until Ctrl-C,
// --max-messages or --timeout-ms of silence.
type groupConsume struct {
	group, topic  string
	fromBeginning bool
	maxMessages   int
	idle          time.Duration
	rack          string
	printOffset   bool
	printKey      bool
}

func (gcs groupConsume) run(ctx context.Context, c *client.Client, out io.Writer, stderr io.Writer) error {
	reset := "latest"
	if gcs.fromBeginning {
		reset = "earliest"
	}
	host, _ := os.Hostname()
	// Commits are made here rather than by auto-commit so that they never
	// pass a record that was read but not printed (--max-messages).
	var gc *client.GroupConsumer
	unprinted := map[client.TopicPartition]int64{} // the first record read but not printed
	positions := func(only []client.TopicPartition) map[client.TopicPartition]int64 {
		offs := gc.Positions()
		for tp, off := range unprinted {
			if _, ok := offs[tp]; ok {
				offs[tp] = off
			}
		}
		if only != nil {
			keep := map[client.TopicPartition]int64{}
			for _, tp := range only {
				if off, ok := offs[tp]; ok {
					keep[tp] = off
				}
			}
			offs = keep
		}
		return offs
	}
	gc, err := client.NewGroupConsumer(c, client.GroupOptions{
		GroupID: gcs.group, Topics: []string{gcs.topic}, AutoOffsetReset: reset, Rack: gcs.rack,
		ClientID: "tidemark-console-consumer-" + host, DisableAutoCommit: true,
		OnPartitionsRevoked: func(ctx context.Context, tps []client.TopicPartition) {
			if err := gc.CommitSync(ctx, positions(tps)); err != nil {
				fmt.Fprintf(stderr, "commit before giving partitions up: %v\n", err)
			}
		},
	})
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	n := 0
	last, lastCommit := time.Now(), time.Now()
	var perr error
	for ctx.Err() == nil && (gcs.maxMessages == 0 || n < gcs.maxMessages) {
		if time.Since(lastCommit) >= client.DefaultAutoCommitInterval {
			lastCommit = time.Now()
			gc.CommitAsync(positions(nil), nil)
		}
		recs, err := gc.Poll(ctx)
		if err != nil {
			if ctx.Err() == nil {
				perr = err
			}
			break
		}
		if len(recs) == 0 {
			if len(gc.Assignment()) == 0 {
				last = time.Now() // silence counts from the assignment, not the join
			}
			if gcs.idle > 0 && time.Since(last) >= gcs.idle {
				break
			}
			continue
		}
		last = time.Now()
		for _, r := range recs {
			if gcs.maxMessages > 0 && n >= gcs.maxMessages {
				tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
				if _, ok := unprinted[tp]; !ok {
					unprinted[tp] = r.Offset
				}
				continue
			}
			printRecord(w, r, gcs.printOffset, gcs.printKey)
			n++
		}
		_ = w.Flush()
	}
	_ = w.Flush()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// Close gives every partition up: the callback commits what was printed.
	if err := gc.Close(cctx); err != nil && perr == nil {
		perr = err
	}
	fmt.Fprintf(stderr, "Consumed %d records.\n", n)
	return perr
}
