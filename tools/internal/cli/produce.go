package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// producerFlags are the settings produce and perf produce share.
type producerFlags struct {
	acks            string
	idempotence     bool
	lingerMs        int
	batchSize       int
	retries         int
	deliveryTimeout time.Duration
	bufferMemory    int
	maxInFlight     int
}

func (p *producerFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.acks, "acks", "all", "acks: all (or -1) waits for every in-sync replica, 1 for the leader only, 0 for nothing")
	f.BoolVar(&p.idempotence, "idempotence", true, "enable.idempotence: no duplicates on retries (needs --acks all; off by itself otherwise unless set explicitly)")
	f.IntVar(&p.lingerMs, "linger-ms", int(client.DefaultLinger.Milliseconds()), "linger.ms: how long a batch waits for more records (0 sends at once)")
	f.IntVar(&p.batchSize, "batch-size", client.DefaultBatchSize, "batch.size: the most bytes in one batch")
	f.IntVar(&p.retries, "retries", math.MaxInt32, "retries: how often a failed batch is resent within --delivery-timeout (0: never)")
	f.DurationVar(&p.deliveryTimeout, "delivery-timeout", client.DefaultDeliveryTimeout, "delivery.timeout.ms: how long a record may take, retries included")
	f.IntVar(&p.bufferMemory, "buffer-memory", client.DefaultBufferMemory, "buffer.memory: the most bytes of records waiting or in flight; a send waits for room (bounds a batching producer's latency)")
	f.IntVar(&p.maxInFlight, "max-in-flight", client.DefaultMaxInFlight, "max.in.flight.requests.per.connection: produce requests outstanding per partition (at most 5 with idempotence)")
}

// options turns the flags into ProducerOptions; bad values are usage errors.
func (p *producerFlags) options(cmd *cobra.Command) (client.ProducerOptions, error) {
	var o client.ProducerOptions
	acks, err := parseAcks(p.acks)
	if err != nil {
		return o, err
	}
	o.Acks = acks
	switch {
	case !p.idempotence:
		o.Idempotence = client.IdempotenceOff
	case cmd.Flags().Changed("idempotence"):
		o.Idempotence = client.IdempotenceOn
		if acks != client.AcksAll {
			return o, usagef("--idempotence needs --acks all, got --acks %s", p.acks)
		}
	}
	switch {
	case p.lingerMs < 0:
		return o, usagef("--linger-ms must not be negative, got %d", p.lingerMs)
	case p.lingerMs == 0:
		o.Linger = -1 // the client reads 0 as "default"
	default:
		o.Linger = time.Duration(p.lingerMs) * time.Millisecond
	}
	if p.batchSize <= 0 {
		return o, usagef("--batch-size must be positive, got %d", p.batchSize)
	}
	o.BatchSize = p.batchSize
	switch {
	case p.retries < 0:
		return o, usagef("--retries must not be negative, got %d", p.retries)
	case p.retries == 0:
		o.Retries = -1 // the client reads 0 as "unlimited"
	default:
		o.Retries = p.retries
	}
	if p.deliveryTimeout <= 0 {
		return o, usagef("--delivery-timeout must be positive, got %v", p.deliveryTimeout)
	}
	o.DeliveryTimeout = p.deliveryTimeout
	// One attempt must fit in a record's delivery time (after its linger).
	linger := max(o.Linger, 0)
	if p.deliveryTimeout <= linger {
		return o, usagef("--delivery-timeout %v must be longer than --linger-ms %d", p.deliveryTimeout, p.lingerMs)
	}
	o.RequestTimeout = min(client.DefaultRequestTimeout, p.deliveryTimeout-linger)
	if p.bufferMemory <= 0 {
		return o, usagef("--buffer-memory must be positive, got %d", p.bufferMemory)
	}
	o.BufferMemory = p.bufferMemory
	if p.maxInFlight <= 0 {
		return o, usagef("--max-in-flight must be positive, got %d", p.maxInFlight)
	}
	if cmd.Flags().Changed("max-in-flight") {
		o.MaxInFlight = p.maxInFlight
	}
	return o, nil
}

func parseAcks(s string) (client.Acks, error) {
	switch strings.ToLower(s) {
	case "all", "-1":
		return client.AcksAll, nil
	case "1":
		return client.AcksLeader, nil
	case "0":
		return client.AcksNone, nil
	}
	return 0, usagef("--acks must be all, -1, 1 or 0, got %q", s)
}

// newProducer builds the producer; a combination the client refuses
// (INVALID_CONFIG naming the option) is a usage error.
func newProducer(c *client.Client, o client.ProducerOptions) (*client.Producer, error) {
	p, err := client.NewProducer(c, o)
	if kerr.CodeOf(err) == kerr.InvalidConfig {
		return nil, usageError{err}
	}
	return p, err
}

// tally counts produce outcomes by error name; callbacks run on producer
// goroutines, hence the lock.
type tally struct {
	mu    sync.Mutex
	acked int
	fails map[string]int
	first map[string]string // the first message seen per error name
}

func (t *tally) add(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.acked++
		return
	}
	if t.fails == nil {
		t.fails, t.first = map[string]int{}, map[string]string{}
	}
	name := kerr.CodeOf(err).String()
	if errors.Is(err, context.Canceled) {
		name = "CANCELED"
	}
	if t.fails[name] == 0 {
		t.first[name] = err.Error()
	}
	t.fails[name]++
}

// summary is "N acknowledged, M failed" plus one line per error name;
// acks says whether the successes were acknowledged (acks 0 has none).
func (t *tally) summary(acks client.Acks) (string, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	failed := 0
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(t.fails)) {
		failed += t.fails[name]
		fmt.Fprintf(&b, "\n  %s x%d (first: %s)", name, t.fails[name], t.first[name])
	}
	done := "acknowledged"
	if acks == client.AcksNone {
		done = "written without acknowledgement (--acks 0)"
	}
	return fmt.Sprintf("%d %s, %d failed", t.acked, done, failed) + b.String(), failed
}

func newProduceCmd(g *globals) *cobra.Command {
	var (
		topic     string
		partition int32
		key       string
		keySep    string
		pf        producerFlags
	)
	cmd := &cobra.Command{
		Use:   "produce --topic T [--partition P] [--acks all|1|0|-1] [--key K]",
		Short: "Send each line of standard input as a record (kafka-console-producer)",
		Long: "Send each line of standard input as a record. The producer is idempotent with acks=all\n" +
			"by default. A summary of acknowledged (--acks 0: written) and failed records goes to\n" +
			"standard error; the exit code is 1 when any record failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needTopic(topic); err != nil {
				return err
			}
			if err := checkPartitionFlag(partition); err != nil {
				return err
			}
			if keySep != "" && cmd.Flags().Changed("key") {
				return usagef("--key and --key-separator exclude each other")
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
			p, err := newProducer(c, opts)
			if err != nil {
				return err
			}
			var t tally
			sent := 0
			lines, readErr := readLines(ctx, cmd.InOrStdin())
			for line := range lines {
				r := client.Record{Topic: topic, Value: []byte(line)}
				if k, v, ok := strings.Cut(line, keySep); keySep != "" && ok {
					r.Key, r.Value = []byte(k), []byte(v)
				} else if cmd.Flags().Changed("key") {
					r.Key = []byte(key)
				}
				if partition >= 0 {
					r.Partition, r.ManualPartition = partition, true
				}
				p.ProduceAsync(r, func(_ client.Result, err error) { t.add(err) })
				sent++
			}
			// Close sends what is buffered and waits for every outcome.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.DeliveryTimeout+5*time.Second)
			defer cancel()
			_ = p.Close(cctx)
			sum, failed := t.summary(opts.Acks)
			fmt.Fprintf(cmd.ErrOrStderr(), "%d records sent to %s: %s\n", sent, topic, sum)
			if failed > 0 {
				return fmt.Errorf("%d of %d records failed", failed, sent)
			}
			if err := readErr(); err != nil {
				return fmt.Errorf("reading standard input: %w", err)
			}
			if ctx.Err() != nil {
				return errors.New("interrupted")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the topic to write to")
	f.Int32Var(&partition, "partition", -1, "the partition to write to; -1 picks it from the key (murmur2), else sticks to one per batch")
	f.StringVar(&key, "key", "", "the key of every record")
	f.StringVar(&keySep, "key-separator", "", "split each line at the first SEP into key and value (a line without SEP has no key)")
	pf.register(cmd)
	return cmd
}

// readLines yields the lines of r until it ends or ctx ends; reading runs
// on its own goroutine so that an interrupt is seen while stdin blocks. The
// returned function reports a read error once iteration is over.
func readLines(ctx context.Context, r io.Reader) (iter.Seq[string], func() error) {
	var readErr error
	seq := func(yield func(string) bool) {
		lines := make(chan string)
		errc := make(chan error, 1)
		done := make(chan struct{})
		defer close(done)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-done:
					return
				}
			}
			errc <- sc.Err()
		}()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					readErr = <-errc
					return
				}
				if !yield(l) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
	return seq, func() error { return readErr }
}
