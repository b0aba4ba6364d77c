package e2e

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// ledger is what producers were told about every record they sent: the
// offset it was acknowledged at, or the error it failed with. The consumer
// check compares it with what the log holds.
type ledger struct {
	topic      string
	partitions int

	mu     sync.Mutex
	acked  map[string]ack       // value -> where it was acknowledged
	failed map[string]kerr.Code // value -> why it was not
	codes  map[kerr.Code]int    // failures by code
	sample map[kerr.Code]string // the first error of each code
	perP   []int                // acknowledgements per partition
	last   []time.Time          // last acknowledgement per partition
	seq    int
}

type ack struct {
	partition int32
	offset    int64
	epoch     int32
	seq       int
}

func newLedger(topic string, partitions int) *ledger {
	return &ledger{topic: topic, partitions: partitions, acked: map[string]ack{}, failed: map[string]kerr.Code{},
		codes: map[kerr.Code]int{}, sample: map[kerr.Code]string{}, perP: make([]int, partitions), last: make([]time.Time, partitions)}
}

// next names the next record: "<tag>-<seq>", unique within the ledger.
func (l *ledger) next(tag string) (string, int, int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return fmt.Sprintf("%s-%07d", tag, l.seq), l.seq, int32(l.seq % l.partitions)
}

func (l *ledger) record(value string, seq int, res client.Result, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		code := kerr.CodeOf(err)
		l.failed[value] = code
		l.codes[code]++
		if _, ok := l.sample[code]; !ok {
			l.sample[code] = err.Error()
		}
		return
	}
	l.acked[value] = ack{partition: res.Partition, offset: res.Offset, epoch: res.LeaderEpoch, seq: seq}
	l.perP[res.Partition]++
	l.last[res.Partition] = time.Now()
}

// counts returns the acknowledged and failed totals.
func (l *ledger) counts() (acked, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), len(l.failed)
}

// ackedOn returns the acknowledgements on one partition so far.
func (l *ledger) ackedOn(p int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.perP[p]
}

func (l *ledger) failureCodes() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.codes) == 0 {
		return "none"
	}
	var s []string
	for _, c := range slices.Sorted(maps.Keys(l.codes)) {
		s = append(s, fmt.Sprintf("%v=%d", c, l.codes[c]))
	}
	return strings.Join(s, " ")
}

// failureSamples is the first error of each failure code.
func (l *ledger) failureSamples() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s []string
	for _, c := range slices.Sorted(maps.Keys(l.sample)) {
		s = append(s, l.sample[c])
	}
	return strings.Join(s, "; ")
}

// producer is an acks=all, idempotent producer writing into a ledger.
type producer struct {
	p   *client.Producer
	led *ledger
	tag string

	pending sync.WaitGroup
	stop    chan struct{}
	done    chan struct{}
}

func newProducer(c *cluster, led *ledger, tag string, opts client.ProducerOptions) *producer {
	c.t.Helper()
	opts.Acks = client.AcksAll
	opts.Idempotence = client.IdempotenceOn
	if opts.MaxBlock == 0 {
		opts.MaxBlock = 10 * time.Second
	}
	p, err := client.NewProducer(c.cl, opts)
	if err != nil {
		c.t.Fatalf("producer: %v", err)
	}
	if !p.Idempotent() {
		c.t.Fatal("producer is not idempotent")
	}
	return &producer{p: p, led: led, tag: tag}
}

// send produces one record to the next partition in turn.
func (pr *producer) send() {
	value, seq, part := pr.led.next(pr.tag)
	pr.pending.Add(1)
	pr.p.ProduceAsync(client.Record{Topic: pr.led.topic, Partition: part, ManualPartition: true, Value: []byte(value)},
		func(res client.Result, err error) {
			pr.led.record(value, seq, res, err)
			pr.pending.Done()
		})
}

// burst sends n records and waits (up to timeout) for all their outcomes.
func (pr *producer) burst(n int, timeout time.Duration) error {
	for range n {
		pr.send()
	}
	return pr.wait(timeout)
}

// wait waits for every record sent so far to have its outcome.
func (pr *producer) wait(timeout time.Duration) error {
	done := make(chan struct{})
	go func() {
		pr.pending.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("records without an outcome after %v", timeout)
	}
}

// run sends a record every interval until halt.
func (pr *producer) run(interval time.Duration) {
	pr.stop, pr.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pr.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-pr.stop:
				return
			case <-tick.C:
				pr.send()
			}
		}
	}()
}

// halt stops a run, waits for every outcome and closes the producer.
func (pr *producer) halt(timeout time.Duration) error {
	if pr.stop != nil {
		close(pr.stop)
		<-pr.done
		pr.stop = nil
	}
	ctx, cancel := ctxFor(timeout)
	defer cancel()
	ferr := pr.p.Flush(ctx)
	werr := pr.wait(timeout)
	cerr := pr.p.Close(ctx)
	return errors.Join(ferr, werr, cerr)
}

// waitAcks waits until the partition has n more acknowledgements than base.
func (l *ledger) waitAcks(p int32, base, n int, timeout time.Duration) (time.Duration, error) {
	begin := time.Now()
	for l.ackedOn(p) < base+n {
		if time.Since(begin) > timeout {
			return 0, fmt.Errorf("%s-%d: %d acknowledgements in %v, want %d", l.topic, p, l.ackedOn(p)-base, timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(begin), nil
}

// verdict is what the consumer found.
type verdict struct {
	read       int // records read from the topic
	acked      int // acknowledged records
	lost       []string
	moved      []string
	duplicated []string
	reordered  []string
	unacked    int      // records in the log whose producer saw a failure
	forbidden  []string // failed records that must not be in the log, but are
}

func (v verdict) ok() bool {
	return len(v.lost)+len(v.moved)+len(v.duplicated)+len(v.reordered)+len(v.forbidden) == 0
}

func (v verdict) String() string {
	s := fmt.Sprintf("read %d records: %d acknowledged, lost %d, at another offset %d, duplicated %d, out of order %d, failed-but-written %d",
		v.read, v.acked, len(v.lost), len(v.moved), len(v.duplicated), len(v.reordered), v.unacked)
	for _, x := range []struct {
		what string
		l    []string
	}{{"lost", v.lost}, {"moved", v.moved}, {"duplicated", v.duplicated}, {"reordered", v.reordered}, {"written though refused", v.forbidden}} {
		if len(x.l) > 0 {
			s += fmt.Sprintf("\n  %s: %s", x.what, strings.Join(x.l[:min(len(x.l), 10)], ", "))
		}
	}
	return s
}

// logRecord is one record the consumer read.
type logRecord struct {
	offset int64
	value  string
}

// consume reads a partition from offset 0 up to its high watermark, and at
// least up to `upTo`; it gives up after timeout.
func consume(c *cluster, topic string, p int32, upTo int64, timeout time.Duration) ([]logRecord, error) {
	cs, err := client.NewConsumer(c.cl, client.ConsumerOptions{Topic: topic, Partition: p, StartOffset: 0, MaxWait: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	ctx, cancel := ctxFor(timeout)
	defer cancel()
	var out []logRecord
	for polled := false; !polled || cs.Position() < upTo || cs.Position() < cs.HighWatermark(); polled = true {
		recs, err := cs.Poll(ctx)
		if err != nil {
			return out, fmt.Errorf("%s-%d at %d (hw %d, want %d): %w", topic, p, cs.Position(), cs.HighWatermark(), upTo, err)
		}
		for _, r := range recs {
			out = append(out, logRecord{offset: r.Offset, value: string(r.Value)})
		}
	}
	return out, nil
}

// verify reads every partition of the ledger's topic and checks each
// acknowledged record: present once, at the offset it was acknowledged at,
// and in the order produced. With refusedAbsent, records whose producer saw
// a failure must not be in the log at all.
func verify(c *cluster, led *ledger, refusedAbsent bool) (verdict, [][]logRecord) {
	c.t.Helper()
	led.mu.Lock()
	acked := maps.Clone(led.acked)
	failed := maps.Clone(led.failed)
	led.mu.Unlock()
	upTo := make([]int64, led.partitions)
	for _, a := range acked {
		upTo[a.partition] = max(upTo[a.partition], a.offset+1)
	}
	v := verdict{acked: len(acked)}
	seen := map[string]int64{}
	logs := make([][]logRecord, led.partitions)
	for p := range led.partitions {
		recs, err := consume(c, led.topic, int32(p), upTo[p], 45*time.Second)
		if err != nil {
			c.t.Fatalf("consumer: %v", err)
		}
		logs[p] = recs
		lastSeq := -1
		for _, r := range recs {
			v.read++
			if _, dup := seen[r.value]; dup {
				v.duplicated = append(v.duplicated, fmt.Sprintf("%s@%d", r.value, r.offset))
			}
			seen[r.value] = r.offset
			if a, ok := acked[r.value]; ok {
				if a.seq < lastSeq {
					v.reordered = append(v.reordered, fmt.Sprintf("%s@%d", r.value, r.offset))
				}
				lastSeq = a.seq
			}
			if _, ok := failed[r.value]; ok {
				v.unacked++
				if refusedAbsent {
					v.forbidden = append(v.forbidden, fmt.Sprintf("%s@%d", r.value, r.offset))
				}
			}
		}
	}
	for value, a := range acked {
		off, ok := seen[value]
		switch {
		case !ok:
			v.lost = append(v.lost, fmt.Sprintf("%s (acked at %d-%d)", value, a.partition, a.offset))
		case off != a.offset:
			v.moved = append(v.moved, fmt.Sprintf("%s (acked at %d, found at %d)", value, a.offset, off))
		}
	}
	slices.Sort(v.lost)
	slices.Sort(v.moved)
	return v, logs
}
