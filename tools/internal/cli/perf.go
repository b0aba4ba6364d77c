package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/sysmon"
	"tidemark.io/tools/internal/perfstat"
)

func newPerfCmd(g *globals) *cobra.Command {
	var cpuProfile, allocProfile, execTrace string
	var stopCPU, stopTrace func() error
	sysmonPoll := true
	c := &cobra.Command{
		Use:   "perf",
		Short: "Measure produce and consume throughput and latency (kafka-producer-perf-test, kafka-consumer-perf-test)",
		// The client's own profiles, beside the brokers' (/debug/pprof with
		// --profiles): where a write's time goes in the process users run.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// cobra runs only the nearest hook: the root's (env, checks) first.
			if root := cmd.Root(); root.PersistentPreRunE != nil {
				if err := root.PersistentPreRunE(cmd, args); err != nil {
					return err
				}
			}
			keepSysmonPolling(g, sysmonPoll, cmd.ErrOrStderr())
			if execTrace != "" {
				var err error
				if stopTrace, err = startExecTrace(execTrace); err != nil {
					return err
				}
			}
			if cpuProfile == "" {
				return nil
			}
			var err error
			stopCPU, err = startCPUProfile(cpuProfile)
			return err
		},
		PersistentPostRunE: func(*cobra.Command, []string) error {
			var errs []error
			if stopTrace != nil {
				errs = append(errs, stopTrace())
			}
			return errors.Join(append(errs, stopProfiles(stopCPU, allocProfile))...)
		},
	}
	c.PersistentFlags().StringVar(&cpuProfile, "cpu-profile", "", "write this process's CPU profile of the run to the file (go tool pprof)")
	c.PersistentFlags().StringVar(&execTrace, "exec-trace", "", "write this process's execution trace of the run to the file (go tool trace): where a latency outlier's goroutines waited")
	c.PersistentFlags().StringVar(&allocProfile, "alloc-profile", "", "write this process's allocation profile at the end of the run to the file")
	c.PersistentFlags().BoolVar(&sysmonPoll, "sysmon-poll", true, "keep the Go runtime's monitor thread of this process polling instead of deep-sleeping between messages (the brokers' --sysmon.poll): the command starts again at once with GODEBUG=schedtrace set; a schedtrace already in GODEBUG is kept (0 turns it off)")
	c.AddCommand(newPerfProduceCmd(g), newPerfConsumeCmd(g), newPerfCommitCmd(g), newPerfE2ECmd(g), newPerfLinkCmd(g))
	return c
}

// keepSysmonPolling starts the command again with sysmon.Setting in
// GODEBUG, unless it is off, already there, or the CLI cannot restart (in
// tests); it returns only when it did not restart. A synchronous producer
// idles between its sends, and each send woke the runtime's sysmon thread
// (package sysmon).
func keepSysmonPolling(g *globals, on bool, stderr io.Writer) {
	if !on || g.restart == nil {
		return
	}
	if env, changed := sysmon.Env(g.environ()); changed {
		if err := g.restart(env); err != nil {
			fmt.Fprintf(stderr, "warning: %v; going on without it\n", err)
		}
	}
}

// startCPUProfile starts the process's CPU profile into path.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// startExecTrace starts the process's execution trace into path.
func startExecTrace(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--exec-trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--exec-trace: %w", err)
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}

// stopProfiles ends the CPU profile (stopCPU may be nil) and writes the
// allocation profile when asked.
func stopProfiles(stopCPU func() error, allocPath string) error {
	var errs []error
	if stopCPU != nil {
		errs = append(errs, stopCPU())
	}
	if allocPath != "" {
		f, err := os.Create(allocPath)
		if err != nil {
			return fmt.Errorf("--alloc-profile: %w", err)
		}
		errs = append(errs, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	return errors.Join(errs...)
}

// progress prints rec's window figures every interval until stop is
// called; stop waits for the printer to finish so lines never interleave.
func progress(w io.Writer, rec *perfstat.Recorder, every time.Duration, what, latency string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				fmt.Fprintln(w, rec.Window(now).Line(what, latency))
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// payload is a record value of size random capital letters.
func payload(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = 'A' + byte(rand.IntN(26))
	}
	return b
}

func newPerfProduceCmd(g *globals) *cobra.Command {
	var (
		topic      string
		partition  int32
		numRecords int64
		recordSize int
		throughput float64
		syncSend   bool
		producers  int
		timeout    time.Duration
		report     time.Duration
		pf         producerFlags
	)
	cmd := &cobra.Command{
		Use:   "produce --topic T --num-records N --record-size S [--acks all] [--throughput R] [--linger-ms L] [--batch-size B] [--sync]",
		Short: "Produce N records of S bytes and report records/s, MB/s and latency avg, p50, p95, p99, p99.9, max",
		Long: "Produce N records of S bytes as fast as allowed (--throughput caps records/s) and report\n" +
			"throughput and the latency from hand-over to acknowledgement (under --throughput, from\n" +
			"when the record was due, so a late send counts for the records behind it): a progress line every\n" +
			"--reporting-interval, then a summary. --sync waits for each record before sending the\n" +
			"next. --producers runs several producers side by side, each with its share of the records.\n" +
			"The run ends after N records, --timeout or Ctrl-C, whichever comes first; the exit\n" +
			"code is 1 when a record failed or the timeout or Ctrl-C cut the run short.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case topic == "":
				return usagef("--topic is required")
			case partition < -1:
				return checkPartitionFlag(partition)
			case numRecords <= 0:
				return usagef("--num-records must be positive, got %d", numRecords)
			case recordSize <= 0:
				return usagef("--record-size must be positive, got %d", recordSize)
			case throughput == 0 || math.IsNaN(throughput):
				// Kafka's tool stalls for ever at 0; no cap is -1.
				return usagef("--throughput must be positive records/s, or -1 for no cap, got %v", throughput)
			case timeout <= 0:
				return usagef("--timeout must be positive, got %v", timeout)
			case report <= 0:
				return usagef("--reporting-interval must be positive, got %v", report)
			case producers < 1 || int64(producers) > numRecords:
				return usagef("--producers must be 1..--num-records, got %d", producers)
			}
			opts, err := pf.options(cmd)
			if err != nil {
				return err
			}
			if syncSend && !cmd.Flags().Changed("linger-ms") {
				// One record at a time: waiting for more records to batch
				// would only add linger.ms to every write.
				opts.Linger = -1
			}
			ctx := cmd.Context()
			c, _, err := g.topicClient(ctx, topic, partition)
			if err != nil {
				return createHint(err, topic)
			}
			defer c.Close()
			opts.MaxBlock = min(timeout, client.DefaultMaxBlock)
			ps := make([]*client.Producer, producers)
			for i := range ps {
				if ps[i], err = newProducer(c, opts); err != nil {
					for _, p := range ps[:i] {
						_ = p.Close(context.WithoutCancel(ctx))
					}
					return err
				}
			}
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			value := payload(recordSize)
			start := time.Now()
			rec := perfstat.New(numRecords, start)
			outcome := func(began time.Time, err error) {
				if err != nil {
					rec.Fail(kerr.CodeOf(err).String())
					return
				}
				rec.Record(time.Since(began), recordSize)
			}
			out := cmd.OutOrStdout()
			stop := progress(out, rec, report, "sent", "latency")
			// Each producer sends its share of the records at its share of
			// the throughput, side by side with the others.
			send := func(p *client.Producer, share int64) {
				th := perfstat.NewThrottle(throughput/float64(producers), start)
				for sent := int64(0); sent < share && rctx.Err() == nil; sent++ {
					if d := th.Wait(sent, time.Now()); d > 0 && !sleepCtx(rctx, d) {
						break
					}
					r := client.Record{Topic: topic, Value: value}
					if partition >= 0 {
						r.Partition, r.ManualPartition = partition, true
					}
					// From its scheduled send under --throughput (so a late
					// send's wait counts for the records behind it too).
					began := th.SendTime(sent, time.Now())
					if syncSend {
						_, err := p.Produce(rctx, r)
						outcome(began, err)
						continue
					}
					p.ProduceAsync(r, func(_ client.Result, err error) { outcome(began, err) })
				}
				_ = p.Flush(rctx)
				// After the timeout, Close gives up at once and fails what is pending.
				cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				if rctx.Err() == nil {
					cctx, ccancel = context.WithTimeout(context.WithoutCancel(ctx), opts.DeliveryTimeout)
				}
				_ = p.Close(cctx)
				ccancel()
			}
			var wg sync.WaitGroup
			for i, p := range ps {
				share := numRecords / int64(producers)
				if int64(i) < numRecords%int64(producers) {
					share++
				}
				wg.Add(1)
				go func() { defer wg.Done(); send(p, share) }()
			}
			wg.Wait()
			stop()
			sum := rec.Summary(time.Now())
			fmt.Fprintln(out, sum.Line("sent", "latency"))
			// Ctrl-C fails what was in flight: name the interrupt first.
			if ctx.Err() != nil && sum.Records < numRecords {
				return cutShort(ctx, sum, numRecords, "records acknowledged")
			}
			if n := sum.FailedCount(); n > 0 {
				return fmt.Errorf("%d of %d records failed", n, numRecords)
			}
			if sum.Records < numRecords {
				return cutShort(ctx, sum, numRecords, "records acknowledged")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic to write to")
	f.Int32Var(&partition, "partition", -1, "write to this partition only; -1 spreads the records over all")
	f.Int64Var(&numRecords, "num-records", 0, "how many records to send")
	f.IntVar(&recordSize, "record-size", 0, "each record's size in bytes")
	f.Float64Var(&throughput, "throughput", -1, "cap on records per second (-1: none; 0 is refused)")
	f.BoolVar(&syncSend, "sync", false, "wait for each record's acknowledgement before sending the next")
	f.IntVar(&producers, "producers", 1, "producers sending side by side, each its share of the records (one client, a producer id each)")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "stop the run after this long")
	f.DurationVar(&report, "reporting-interval", 5*time.Second, "how often to print a progress line")
	pf.register(cmd)
	return cmd
}

func newPerfConsumeCmd(g *globals) *cobra.Command {
	var (
		topic     string
		partition int32
		messages  int64
		timeout   time.Duration
		report    time.Duration
		rack      string
	)
	cmd := &cobra.Command{
		Use:   "consume --topic T --messages N [--partition P] [--timeout 1m]",
		Short: "Consume N records from the beginning and report records/s, MB/s and fetch latency",
		Long: "Consume N records from the start of the topic's partitions (waiting for more when\n" +
			"fewer are there) and report throughput and fetch latency: how long the poll that\n" +
			"returned each record took. The run ends after N records, --timeout or Ctrl-C; the exit\n" +
			"code is 1 when the timeout or Ctrl-C cut it short.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case topic == "":
				return usagef("--topic is required")
			case partition < -1:
				return checkPartitionFlag(partition)
			case messages <= 0:
				return usagef("--messages must be positive, got %d", messages)
			case timeout <= 0:
				return usagef("--timeout must be positive, got %v", timeout)
			case report <= 0:
				return usagef("--reporting-interval must be positive, got %v", report)
			}
			ctx := cmd.Context()
			c, info, err := g.topicClient(ctx, topic, partition)
			if err != nil {
				return err
			}
			defer c.Close()
			parts := info.chosen(partition)
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			readers, err := openReaders(rctx, c, topic, parts, client.OffsetEarliest, true, rack)
			if err != nil {
				return err
			}
			rec := perfstat.New(messages, time.Now())
			out := cmd.OutOrStdout()
			stop := progress(out, rec, report, "consumed", "fetch latency")
			n := int64(0)
			err = readAll(rctx, readers, func(b batch) bool {
				for _, r := range b.recs {
					rec.Record(b.took, len(r.Key)+len(r.Value))
					if n++; n >= messages {
						return false
					}
				}
				return true
			})
			stop()
			sum := rec.Summary(time.Now())
			fmt.Fprintln(out, sum.Line("consumed", "fetch latency"))
			if err != nil {
				return err
			}
			if n < messages {
				return cutShort(ctx, sum, messages, "records consumed")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic to read")
	f.Int32Var(&partition, "partition", -1, "read this partition only; -1 reads them all")
	f.Int64Var(&messages, "messages", 0, "how many records to consume")
	f.DurationVar(&timeout, "timeout", time.Minute, "stop the run after this long")
	f.DurationVar(&report, "reporting-interval", 5*time.Second, "how often to print a progress line")
	f.StringVar(&rack, "rack", "", "client.rack: read from an in-sync replica in this rack (KIP-392)")
	return cmd
}

// cutShort says why a perf run ended before its records were done: an
// interrupt (ctx, the command's own context, ended) or --timeout, after
// how long, and with how many of want done ("records acknowledged",
// "commits made") and failed.
func cutShort(ctx context.Context, sum perfstat.Report, want int64, done string) error {
	why := "--timeout ran out"
	if ctx.Err() != nil {
		why = "interrupted"
	}
	msg := fmt.Sprintf("%s after %v: %d of %d %s", why, sum.Elapsed.Round(time.Millisecond), sum.Records, want, done)
	if n := sum.FailedCount(); n > 0 {
		msg += fmt.Sprintf(", %d failed", n)
	}
	return errors.New(msg)
}

// sleepCtx sleeps for d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
