package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/tools/internal/perfstat"
)

// e2eStampSize is the send time (unix nanoseconds) each record of
// `perf e2e` starts with.
const e2eStampSize = 8

// warmupGate tells the consumer of `perf e2e` the measured records from the
// warm-up's by their send time: a record sent before the gate opened is
// the warm-up's, as is every record read while it is still closed.
type warmupGate struct{ from atomic.Int64 } // unix nanoseconds; 0: closed

// open starts the measured records at now, before the first is stamped.
func (g *warmupGate) open(now time.Time) { g.from.Store(now.UnixNano()) }

// measured reads a record's send time and says whether it is measured.
func (g *warmupGate) measured(value []byte) (time.Time, bool) {
	sent := int64(binary.BigEndian.Uint64(value))
	from := g.from.Load()
	return time.Unix(0, sent), from != 0 && sent >= from
}

func newPerfE2ECmd(g *globals) *cobra.Command {
	var (
		topic      string
		partition  int32
		numRecords int64
		recordSize int
		throughput float64
		timeout    time.Duration
		report     time.Duration
		warmup     time.Duration
		pf         producerFlags
	)
	cmd := &cobra.Command{
		Use:   "e2e --topic T --num-records N --record-size S --throughput R [--partition P] [--linger-ms L]",
		Short: "Produce at a fixed rate and consume at the same time: acknowledgement and end-to-end latency",
		Long: "Produce N records of S bytes to one partition at R records/s (a batching producer, as\n" +
			"`perf produce` without --sync) while a consumer in the same process reads the partition\n" +
			"from its end. Each record carries its send time, so the consumer measures end-to-end\n" +
			"latency: from the record's send until it is readable below the high watermark and\n" +
			"fetched. A send time is when the record was due at R/s, or when it was handed to the\n" +
			"producer if that was on time: a send that waited (for buffer room, or this process\n" +
			"paused) counts for every record behind it too, not for itself alone.\n" +
			"Prints three summaries: the acknowledgement latency (\"sent\"), the end-to-end\n" +
			"latency (\"consumed\"), and how late records reached the producer (\"handed to the\n" +
			"producer\", delay past schedule: this process's own part of a latency, a pause or a\n" +
			"wait for buffer room); then a line on the producer's batches: how many waited for one\n" +
			"of the partition's --max-in-flight request slots (the pipeline to the leader was\n" +
			"full), and their queue time from creation to first send (Kafka's record-queue-time).\n" +
			"Run it below the partition's peak rate (`perf produce` finds\n" +
			"that), e.g. at half of it: above, records queue in the producer and latency grows\n" +
			"with the run. --warmup first sends at the same rate for that long, unmeasured (records\n" +
			"acknowledged and read back, but not counted): a new process's first records pay for its\n" +
			"connections and producer id. The exit code is 1 when a record failed (warm-up ones too)\n" +
			"or a measured one was not read back in time.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case topic == "":
				return usagef("--topic is required")
			case partition < 0:
				return usagef("--partition must name one partition (0 or more), got %d", partition)
			case numRecords <= 0:
				return usagef("--num-records must be positive, got %d", numRecords)
			case recordSize < e2eStampSize:
				return usagef("--record-size must be at least %d (the send time each record carries), got %d", e2eStampSize, recordSize)
			case !(throughput > 0): // NaN too
				return usagef("--throughput must be positive (records/s; end-to-end latency means something only below the peak rate), got %v", throughput)
			case timeout <= 0:
				return usagef("--timeout must be positive, got %v", timeout)
			case report <= 0:
				return usagef("--reporting-interval must be positive, got %v", report)
			case warmup < 0:
				return usagef("--warmup must not be negative, got %v", warmup)
			}
			opts, err := pf.options(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, _, err := g.topicClient(ctx, topic, partition)
			if err != nil {
				return createHint(err, topic)
			}
			defer c.Close()
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			// The consumer starts at the partition's end before the first
			// record is sent, so it reads exactly this run's records.
			readers, err := openReaders(rctx, c, topic, []int32{partition}, client.OffsetLatest, true, "")
			if err != nil {
				return err
			}
			opts.MaxBlock = min(timeout, client.DefaultMaxBlock)
			p, err := newProducer(c, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			start := time.Now()
			// Warm-up: --warmup of records at the same rate before the
			// measured ones, acknowledged and read back but not measured
			// (a new process's first records pay for its connections, its
			// producer id and its heap growing).
			warm := int64(throughput * warmup.Seconds())
			var gate warmupGate
			if warm == 0 {
				gate.open(start)
			}
			acks := perfstat.New(numRecords, start)
			seen := perfstat.New(numRecords, start)
			// How late each record reached the producer against its
			// schedule: this process's own part of a long latency (a
			// pause, a wait for buffer room), apart from the cluster's.
			handed := perfstat.New(numRecords, start)
			stopAcks := progress(out, acks, report, "sent", "ack latency")
			stopSeen := progress(out, seen, report, "consumed", "end-to-end latency")

			readDone := make(chan error, 1)
			go func() {
				n := int64(0)
				err := readAll(rctx, readers, func(b batch) bool {
					now := time.Now()
					for _, r := range b.recs {
						if len(r.Value) < e2eStampSize {
							continue // not this tool's record
						}
						sent, measured := gate.measured(r.Value)
						if !measured {
							continue // a warm-up record
						}
						seen.Record(now.Sub(sent), len(r.Key)+len(r.Value))
						if n++; n >= numRecords {
							return false
						}
					}
					return true
				})
				if err == nil && n < numRecords {
					err = fmt.Errorf("read %d of %d records back before --timeout", n, numRecords)
				}
				readDone <- err
			}()

			var atWarm client.ProducerStats
			base := payload(recordSize)
			th := perfstat.NewThrottle(throughput, start)
			for sent := int64(0); sent < warm+numRecords && rctx.Err() == nil; sent++ {
				if d := th.Wait(sent, time.Now()); d > 0 && !sleepCtx(rctx, d) {
					break
				}
				measured := sent >= warm
				// From the record's scheduled send, not the moment it was
				// handed over: a send that waited (for buffer room, or this
				// process paused) delays every record behind it, and only
				// the schedule counts that wait in their latency too.
				began := th.SendTime(sent, time.Now())
				if sent == warm && warm > 0 {
					acks.Restart(began)
					seen.Restart(began)
					handed.Restart(began)
					atWarm = p.Stats() // and a new QueueTimeMax
					gate.open(began)
				}
				// One buffer for every record: ProduceAsync copies the value
				// before it returns. A copy per record was as much garbage as
				// the records themselves, and the collections it caused in
				// this process showed in the latency it measures.
				binary.BigEndian.PutUint64(base, uint64(began.UnixNano()))
				p.ProduceAsync(client.Record{Topic: topic, Partition: partition, ManualPartition: true, Value: base},
					func(_ client.Result, err error) {
						if err != nil {
							acks.Fail(kerr.CodeOf(err).String())
							return
						}
						if measured {
							acks.Record(time.Since(began), recordSize)
						}
					})
				if measured {
					handed.Record(time.Since(began), recordSize)
				}
			}
			_ = p.Flush(rctx)
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = p.Close(cctx)
			ccancel()
			var readErr error
			if acks.Summary(time.Now()).FailedCount() == 0 {
				readErr = <-readDone
			} else {
				cancel() // failed records will never be read back
				<-readDone
			}
			stopAcks()
			stopSeen()
			now := time.Now()
			sum := acks.Summary(now)
			fmt.Fprintln(out, sum.Line("sent", "ack latency"))
			fmt.Fprintln(out, seen.Summary(now).Line("consumed", "end-to-end latency"))
			fmt.Fprintln(out, handed.Summary(now).Line("handed to the producer", "delay past schedule"))
			fmt.Fprintln(out, batchesLine(p.Stats(), atWarm, opts.MaxInFlight))
			if ctx.Err() != nil && sum.Records < numRecords {
				return cutShort(ctx, sum, numRecords, "records acknowledged")
			}
			if n := sum.FailedCount(); n > 0 {
				return fmt.Errorf("%d of %d records failed", n, numRecords)
			}
			if sum.Records < numRecords {
				return cutShort(ctx, sum, numRecords, "records acknowledged")
			}
			if readErr != nil && !errors.Is(readErr, context.Canceled) {
				return readErr
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic to write to and read from")
	f.Int32Var(&partition, "partition", 0, "the partition to write to and read from")
	f.Int64Var(&numRecords, "num-records", 0, "how many records to send")
	f.IntVar(&recordSize, "record-size", 0, "each record's size in bytes (at least 8: the send time)")
	f.Float64Var(&throughput, "throughput", 0, "records per second to send")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "stop the run after this long")
	f.DurationVar(&report, "reporting-interval", 5*time.Second, "how often to print progress lines")
	f.DurationVar(&warmup, "warmup", 0, "send at the same rate for this long first, unmeasured (the first records of a new process pay for its connections and producer id)")
	pf.register(cmd)
	return cmd
}

// batchesLine says how the measured records' batches went out: how many
// waited for one of the partition's max.in.flight request slots (the
// pipeline to the leader was full) and their queue time in the producer,
// from a batch's creation to its first send.
func batchesLine(end, atWarm client.ProducerStats, maxInFlight int) string {
	if maxInFlight <= 0 {
		maxInFlight = client.DefaultMaxInFlight
	}
	n := end.Batches - atWarm.Batches
	avg := time.Duration(0)
	if n > 0 {
		avg = (end.QueueTime - atWarm.QueueTime) / time.Duration(n)
	}
	return fmt.Sprintf("%d batches sent, %d waited for a request slot (max.in.flight %d), %.2f ms avg record queue time, %.2f ms max",
		n, end.SlotWaits-atWarm.SlotWaits, maxInFlight, float64(avg)/float64(time.Millisecond), float64(end.QueueTimeMax)/float64(time.Millisecond))
}
