package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// partReader reads one partition from its start up to end (exclusive), or
// for ever when end is negative.
type partReader struct {
	partition int32
	cs        *client.Consumer
	end       int64
}

// batch is what one poll of one partition returned.
type batch struct {
	partition int32
	recs      []client.Record
	took      time.Duration // how long the poll took
	// truncated is set when the poll found the log truncated under the
	// reader (KIP-320) and moved it back to where the logs part: the
	// records it had printed from there on were replaced; resumedAt is
	// that offset.
	truncated bool
	resumedAt int64
}

// openReaders makes a consumer per partition, starting at start (an offset,
// client.OffsetEarliest or client.OffsetLatest). Unless follow is set each
// one ends at the high watermark seen now; partitions with nothing to read
// are left out. An offset past a partition's end is OFFSET_OUT_OF_RANGE.
func openReaders(ctx context.Context, c *client.Client, topic string, parts []int32, start int64, follow bool, rack string) ([]*partReader, error) {
	var out []*partReader
	for _, p := range parts {
		from, end := start, int64(-1)
		if start < 0 {
			spec := client.Earliest()
			if start == client.OffsetLatest {
				spec = client.Latest()
			}
			lo, err := c.ListOffsets(ctx, topic, p, spec)
			if err != nil {
				return nil, err
			}
			from = lo.Offset
		}
		if !follow || start >= 0 {
			lo, err := c.ListOffsets(ctx, topic, p, client.Latest())
			if err != nil {
				return nil, err
			}
			// The reader's out-of-range reset goes to the log start: an
			// offset past the end would print records from before it.
			if start > lo.Offset {
				return nil, kerr.New(kerr.OffsetOutOfRange, "offset %d is past the end of %s-%d (its end offset is %d)", start, topic, p, lo.Offset)
			}
			if !follow {
				if end = lo.Offset; from >= end {
					continue
				}
			}
		}
		cs, err := client.NewConsumer(c, client.ConsumerOptions{Topic: topic, Partition: p, StartOffset: from,
			Rack: rack, Reset: client.ResetEarliest})
		if err != nil {
			return nil, err
		}
		out = append(out, &partReader{partition: p, cs: cs, end: end})
	}
	return out, nil
}

// readAll polls every reader on its own goroutine and hands each batch to
// each, one at a time, until every reader reached its end, each returns
// false, or ctx ends (not an error: following stops on Ctrl-C).
func readAll(ctx context.Context, readers []*partReader, each func(batch) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan batch)
	errc := make(chan error, len(readers))
	var wg sync.WaitGroup
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.end < 0 || r.cs.Position() < r.end {
				began, cuts := time.Now(), r.cs.Truncations()
				recs, err := r.cs.Poll(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errc <- err
						cancel()
					}
					return
				}
				if r.end >= 0 {
					recs = trimTo(recs, r.end)
				}
				b := batch{partition: r.partition, recs: recs, took: time.Since(began), truncated: r.cs.Truncations() > cuts, resumedAt: r.cs.Position()}
				if len(recs) == 0 && !b.truncated {
					continue
				}
				if len(recs) > 0 {
					b.resumedAt = recs[0].Offset
				}
				select {
				case batches <- b:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(batches) }()
	stopped := false
	for b := range batches {
		if !stopped && !each(b) {
			stopped = true
			cancel()
		}
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// trimTo drops the records at or after end.
func trimTo(recs []client.Record, end int64) []client.Record {
	for i, r := range recs {
		if r.Offset >= end {
			return recs[:i]
		}
	}
	return recs
}

func newConsumeCmd(g *globals) *cobra.Command {
	var (
		topic         string
		partition     int32
		fromBeginning bool
		offset        int64
		follow        bool
		maxMessages   int
		rack          string
		printOffset   bool
		printKey      bool
		group         string
		idleMs        int64
	)
	cmd := &cobra.Command{
		Use:   "consume --topic T [--partition P] [--from-beginning | --offset N] [--follow] [--max-messages N] [--rack R] | consume --topic T --group G [--from-beginning] [--timeout-ms N]",
		Short: "Print a topic's records, one value per line (kafka-console-consumer)",
		Long: "Print a topic's records, one value per line. Without --follow it prints what the\n" +
			"partitions hold up to their high watermark, from the beginning, and exits. With --follow\n" +
			"it starts at the end (or where --from-beginning/--offset say) and keeps printing as the\n" +
			"high watermark moves, until Ctrl-C or --max-messages. --rack reads from an in-sync\n" +
			"replica in that rack when the leader names one (KIP-392). With --group it is a member of a\n" +
			"consumer group: it reads the partitions the group assigns it from the group's committed\n" +
			"offsets and commits what it printed, until Ctrl-C, --max-messages or --timeout-ms.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needTopic(topic); err != nil {
				return err
			}
			if err := checkPartitionFlag(partition); err != nil {
				return err
			}
			hasOffset := cmd.Flags().Changed("offset")
			if group != "" {
				switch {
				case hasOffset || partition >= 0:
					return usagef("--group reads the partitions the group assigns: no --offset or --partition")
				case maxMessages < 0:
					return usagef("--max-messages must not be negative, got %d", maxMessages)
				case idleMs < 0:
					return usagef("--timeout-ms must not be negative, got %d", idleMs)
				}
				ctx := cmd.Context()
				c, err := g.client(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				octx, cancel := g.opContext(ctx)
				_, err = g.checkTopic(octx, c, topic, -1)
				cancel()
				if err != nil {
					return err
				}
				return groupConsume{group: group, topic: topic, fromBeginning: fromBeginning, maxMessages: maxMessages,
					idle: time.Duration(idleMs) * time.Millisecond, rack: rack, printOffset: printOffset, printKey: printKey,
				}.run(ctx, c, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if idleMs != 0 {
				return usagef("--timeout-ms goes with --group")
			}
			switch {
			case hasOffset && fromBeginning:
				return usagef("--offset and --from-beginning exclude each other")
			case hasOffset && offset < 0:
				return usagef("--offset must not be negative, got %d", offset)
			case hasOffset && partition < 0:
				return usagef("--offset needs --partition")
			case maxMessages < 0:
				return usagef("--max-messages must not be negative, got %d", maxMessages)
			}
			start := client.OffsetEarliest
			switch {
			case hasOffset:
				start = offset
			case follow && !fromBeginning:
				start = client.OffsetLatest
			}
			ctx := cmd.Context()
			c, info, err := g.topicClient(ctx, topic, partition)
			if err != nil {
				return err
			}
			defer c.Close()
			parts := info.chosen(partition)
			octx, cancel := g.opContext(ctx)
			readers, err := openReaders(octx, c, topic, parts, start, follow, rack)
			cancel()
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			n := 0
			stderr := cmd.ErrOrStderr()
			err = readAll(ctx, readers, func(b batch) bool {
				if b.truncated {
					_ = out.Flush()
					fmt.Fprintf(stderr, "%s-%d: the log was truncated under this reader (an unclean election?): reading on from offset %d; the records printed from there on were replaced\n",
						topic, b.partition, b.resumedAt)
				}
				for _, r := range b.recs {
					printRecord(out, r, printOffset, printKey)
					n++
					if maxMessages > 0 && n >= maxMessages {
						break
					}
				}
				_ = out.Flush()
				return maxMessages == 0 || n < maxMessages
			})
			_ = out.Flush()
			fmt.Fprintf(stderr, "Consumed %d records.\n", n)
			if rack != "" {
				for _, r := range readers {
					id := r.cs.ReadReplica()
					fmt.Fprintf(stderr, "%s-%d: last read from broker %d (rack %s)\n", topic, r.partition, id, orDash(info.racks[id]))
				}
			}
			if err != nil {
				return err
			}
			if ctx.Err() != nil && !follow {
				return errors.New("interrupted")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic to read")
	f.Int32Var(&partition, "partition", -1, "the partition to read; -1 reads them all")
	f.BoolVar(&fromBeginning, "from-beginning", false, "start at the log start offset (the default without --follow)")
	f.Int64Var(&offset, "offset", 0, "start at this offset (needs --partition)")
	f.BoolVar(&follow, "follow", false, "keep reading as the high watermark moves, until Ctrl-C or --max-messages")
	f.IntVar(&maxMessages, "max-messages", 0, "stop after this many records (0: no limit)")
	f.StringVar(&rack, "rack", "", "client.rack: read from an in-sync replica in this rack (KIP-392)")
	f.BoolVar(&printOffset, "print-offset", false, "prefix each record with its partition and offset")
	f.BoolVar(&printKey, "print-key", false, "print each record's key before its value")
	f.StringVar(&group, "group", "", "read as a member of this consumer group, from its committed offsets, committing as it goes (--from-beginning: auto.offset.reset=earliest, else latest)")
	f.Int64Var(&idleMs, "timeout-ms", 0, "with --group: stop after this long without a record (0: never)")
	return cmd
}

// printRecord writes one record as consume prints it: the value on a line,
// after its partition and offset and its key when asked.
func printRecord(out *bufio.Writer, r client.Record, printOffset, printKey bool) {
	if printOffset {
		fmt.Fprintf(out, "Partition:%d\tOffset:%d\t", r.Partition, r.Offset)
	}
	if printKey {
		k := "null"
		if r.Key != nil {
			k = string(r.Key)
		}
		fmt.Fprintf(out, "%s\t", k)
	}
	out.Write(r.Value)
	out.WriteByte('\n')
}
