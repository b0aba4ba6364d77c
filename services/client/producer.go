package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// Producer writes records to tidemark partitions in batches. It is safe for
// concurrent use. See the package documentation for its guarantees and its
// goroutines.
type Producer struct {
	c    *Client
	opts ProducerOptions
	idem bool
	ids  *producerIDs
	mem  *memLimiter

	// ctx is canceled when Close gives up waiting: in-flight requests end
	// and every record still pending fails.
	ctx   context.Context
	abort context.CancelFunc

	// bufs holds the buffers of acknowledged batches for new ones: a
	// batch's buffer grown record by record was a quarter of a batching
	// producer's CPU (growslice and the copies behind it).
	bufs sync.Pool
	// pendings holds completed batches' lists of pending records (each
	// cleared) for new batches: grown record by record, they were a sixth
	// of what a batching producer allocated.
	pendings sync.Pool
	// waiters holds synchronous Produce calls' waiters whose answer was
	// taken (*syncWaiter).
	waiters sync.Pool

	counters producerCounters // Stats

	mu     sync.Mutex // guards parts, sticky and closed
	parts  map[topicPartition]*partitionProducer
	sticky map[string]int32
	closed bool
	// wg counts every goroutine the producer starts: each partition's two,
	// its InitProducerId and log lookups, and the watches on its requests'
	// contexts (produce_link.go). The first are started under mu while
	// closed is false, the rest from the partition goroutines, so Close's
	// Wait never races an Add from zero.
	wg sync.WaitGroup
}

type topicPartition struct {
	topic     string
	partition int32
}

// NewProducer returns a producer on c. Invalid options give INVALID_CONFIG
// naming the option, as Kafka's ConfigException does.
func NewProducer(c *Client, opts ProducerOptions) (*Producer, error) {
	if c == nil {
		return nil, noClient()
	}
	opts, idem, err := opts.resolve(c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Producer{
		c: c, opts: opts, idem: idem, mem: newMemLimiter(opts.BufferMemory),
		ctx: ctx, abort: cancel,
		parts: map[topicPartition]*partitionProducer{}, sticky: map[string]int32{},
	}
	if idem {
		p.ids = newProducerIDs(c)
	}
	p.mem.onExhausted = p.pokeAll
	return p, nil
}

// pokeAll wakes every partition goroutine: buffer.memory ran out, and each
// sends its open batch instead of waiting out linger.ms for records that
// cannot come until an answer frees room.
func (p *Producer) pokeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pp := range p.parts {
		pp.poke()
	}
}

// Idempotent reports whether the producer runs with idempotence.
func (p *Producer) Idempotent() bool { return p.idem }

// Produce sends r and waits for its acknowledgement (or failure). If ctx
// ends first, Produce returns at once; the record may still be delivered.
func (p *Producer) Produce(ctx context.Context, r Record) (Result, error) {
	w := p.syncWaiter()
	p.produce(&blocker{parent: ctx, limit: p.opts.MaxBlock}, r, w.deliver)
	select {
	case o := <-w.ch:
		// Answered: its callback has run, so nothing uses w any more.
		p.waiters.Put(w)
		return o.res, o.err
	case <-ctx.Done():
		// Not reused: the callback may still come.
		err := ctxError(ctx, nil, "produce to %s", r.Topic)
		return Result{Topic: r.Topic, Partition: -1, Offset: -1, LeaderEpoch: -1, Code: kerr.CodeOf(err)}, err
	}
}

// syncWaiter is what a synchronous Produce waits on: its callback and the
// channel that callback answers on. They are kept for the next call (a
// write made both every time), once the answer has been taken.
type syncWaiter struct {
	ch      chan syncOutcome
	deliver func(Result, error)
}

type syncOutcome struct {
	res Result
	err error
}

func (p *Producer) syncWaiter() *syncWaiter {
	if w, ok := p.waiters.Get().(*syncWaiter); ok {
		return w
	}
	w := &syncWaiter{ch: make(chan syncOutcome, 1)}
	w.deliver = func(res Result, err error) { w.ch <- syncOutcome{res, err} }
	return w
}

// ProduceAsync hands r to the producer and returns; cb (which may be nil)
// is called exactly once with the outcome, from a producer goroutine, in
// order for the records of one partition. cb must be quick and must not
// call Produce, Flush or Close. ProduceAsync blocks up to MaxBlock while the
// topic's metadata is unknown or buffer memory is full. Key, value and
// headers are copied before it returns.
func (p *Producer) ProduceAsync(r Record, cb func(Result, error)) {
	p.produce(&blocker{parent: p.ctx, limit: p.opts.MaxBlock}, r, cb)
}

// blocker makes the context bounding a blocking ProduceAsync only when it
// has to block: most records need neither metadata nor buffer space, and a
// timer per record would cost more than the rest of the call.
type blocker struct {
	parent context.Context
	limit  time.Duration
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *blocker) context() context.Context {
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithTimeout(b.parent, b.limit)
	}
	return b.ctx
}

func (b *blocker) release() {
	if b.cancel != nil {
		b.cancel()
	}
}

func (p *Producer) produce(blk *blocker, r Record, cb func(Result, error)) {
	defer blk.release()
	if cb == nil {
		cb = func(Result, error) {}
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	fail := func(partition int32, err error) {
		cb(Result{Topic: r.Topic, Partition: partition, Offset: -1, Timestamp: ts, LeaderEpoch: -1, Code: kerr.CodeOf(err)}, err)
	}
	if p.isClosed() {
		fail(-1, fmt.Errorf("produce to %s: %w", r.Topic, ErrClosed))
		return
	}
	if r.Topic == "" {
		fail(-1, kerr.BadField(kerr.InvalidTopicException, "topic", "a record must name its topic"))
		return
	}
	part, n, err := p.choosePartition(blk, &r)
	if err != nil {
		fail(-1, err)
		return
	}
	size := memSize(&r)
	// A request must fit in one gRPC message (Options.MaxMessageBytes):
	// a larger one cannot be sent at all, and trying breaks the broker's
	// produce stream for every partition on it (Kafka's max.request.size
	// check, RecordTooLargeException).
	rs := recordbatch.Record{Timestamp: ts.UnixMilli(), Key: r.Key, Value: r.Value, Headers: r.Headers}
	if n := recordbatch.HeaderSize + recordSize(0, 0, &rs) + produceRequestOverhead + len(r.Topic); n > p.c.opts.MaxMessageBytes {
		fail(part, kerr.BadField(kerr.MessageTooLarge, "max.message.bytes", "a record of %d bytes exceeds the client's message limit %d", n, p.c.opts.MaxMessageBytes))
		return
	}
	if size > p.opts.BufferMemory {
		fail(part, kerr.BadField(kerr.MessageTooLarge, "buffer.memory", "a record of %d bytes exceeds buffer.memory %d", size, p.opts.BufferMemory))
		return
	}
	if !p.mem.tryAcquire(size) {
		if ctx := blk.context(); p.mem.acquire(ctx, size) != nil {
			fail(part, ctxError(ctx, kerr.New(kerr.RequestTimedOut, "no buffer memory free within max.block.ms %v", p.opts.MaxBlock), "produce to %s-%d", r.Topic, part))
			return
		}
	}
	rec := recordbatch.Record{Timestamp: ts.UnixMilli(), Key: r.Key, Value: r.Value, Headers: r.Headers}
	if part, err := p.enqueue(&rec, pending{ts: ts, cb: cb, size: size}, r, part, n); err != nil {
		p.mem.release(size)
		fail(part, err)
	}
}

// enqueue appends rec to partition part. A sticky keyless record that does
// not fit moves on to the next partition (at most once round).
func (p *Producer) enqueue(rec *recordbatch.Record, pend pending, r Record, part int32, n int) (int32, error) {
	sticky := !r.ManualPartition && r.Key == nil
	for try := 1; ; try++ {
		pp, err := p.partitionFor(r.Topic, part)
		if err != nil {
			return part, err
		}
		switch pp.append(rec, pend, sticky && try < n) {
		case appendClosed:
			return part, fmt.Errorf("produce to %s-%d: %w", r.Topic, part, ErrClosed)
		case sealedWithout:
			part = p.rotateSticky(r.Topic, part, n)
			continue
		case appendedAndSealed:
			if sticky {
				p.rotateSticky(r.Topic, part, n)
			}
		}
		return part, nil
	}
}

// choosePartition applies the partitioning rule: the record's own partition
// when ManualPartition is set; else murmur2 of the key, as Kafka's default
// partitioner; else the topic's sticky partition, which moves on to the
// next partition each time a batch fills, the record that did not fit
// going there (Kafka's sticky partitioner, KIP-480, moving round-robin
// rather than at random). It waits for the topic's metadata.
func (p *Producer) choosePartition(blk *blocker, r *Record) (int32, int, error) {
	n := p.c.meta.cachedCount(r.Topic)
	var last error
	for attempt := 1; n == 0; attempt++ {
		ctx := blk.context()
		var err error
		n, err = p.c.meta.numPartitions(ctx, r.Topic)
		if err == nil {
			break
		}
		ke := toKerr(err)
		if ctx.Err() != nil {
			return -1, 0, ctxError(ctx, lastOr(last, ke), "produce to %s: no metadata within max.block.ms", r.Topic)
		}
		last = lastOr(last, ke)
		if !ke.Code.Retriable() {
			return -1, 0, wrap(ke, "produce to %s", r.Topic)
		}
		if !sleep(ctx, backoff(p.c.opts.RetryBackoff, p.c.opts.RetryBackoffMax, attempt)) {
			return -1, 0, ctxError(ctx, last, "produce to %s: no metadata within max.block.ms", r.Topic)
		}
	}
	switch {
	case r.ManualPartition:
		if r.Partition < 0 {
			return -1, n, kerr.New(kerr.UnknownTopicOrPartition, "topic %s has no partition %d", r.Topic, r.Partition)
		}
		// Metadata right after a topic's creation may not list every
		// partition yet: refresh until it does, within max.block.ms.
		for attempt := 1; int(r.Partition) >= n; attempt++ {
			ctx := blk.context()
			if !sleep(ctx, backoff(p.c.opts.RetryBackoff, p.c.opts.RetryBackoffMax, attempt)) {
				return -1, n, kerr.New(kerr.UnknownTopicOrPartition, "topic %s has %d partitions, no partition %d", r.Topic, n, r.Partition)
			}
			if err := p.c.meta.refresh(ctx, r.Topic); err == nil {
				n = p.c.meta.cachedCount(r.Topic)
			}
		}
		return r.Partition, n, nil
	case r.Key != nil:
		return keyPartition(r.Key, n), n, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	part, ok := p.sticky[r.Topic]
	if !ok || int(part) >= n {
		part = int32(rand.IntN(n))
		p.sticky[r.Topic] = part
	}
	return part, n, nil
}

// rotateSticky moves the topic's sticky partition on from from (unless
// another record already did) and returns the new one.
func (p *Producer) rotateSticky(topic string, from int32, n int) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sticky[topic] == from {
		p.sticky[topic] = (from + 1) % int32(n)
	}
	return p.sticky[topic]
}

func (p *Producer) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// partitionFor returns the partition's state, starting its goroutine on
// first use.
func (p *Producer) partitionFor(topic string, partition int32) (*partitionProducer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := topicPartition{topic, partition}
	if pp, ok := p.parts[key]; ok {
		return pp, nil
	}
	if p.closed {
		return nil, fmt.Errorf("produce to %s-%d: %w", topic, partition, ErrClosed)
	}
	pp := newPartitionProducer(p, topic, partition)
	p.parts[key] = pp
	p.wg.Go(pp.run)
	p.wg.Go(pp.writeLoop)
	return pp, nil
}

func (p *Producer) partitionList() []*partitionProducer {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*partitionProducer, 0, len(p.parts))
	for _, pp := range p.parts {
		out = append(out, pp)
	}
	return out
}

// Flush sends every buffered record at once (ignoring linger) and waits
// until each record handed over before the call has its callback, or ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	var waits []chan struct{}
	for _, pp := range p.partitionList() {
		waits = append(waits, pp.flush()...)
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctxError(ctx, nil, "flush")
		}
	}
	return nil
}

// Close stops accepting records, sends what is buffered and waits for
// every outcome until ctx ends. Then it gives up: in-flight requests are
// canceled and every record still pending fails (it may or may not have
// been written). It returns once every goroutine the producer started has
// ended; given up, they end without waiting for any broker. Close does not
// close the Client.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	parts := p.partitionList()
	if !already {
		for _, pp := range parts {
			pp.drain()
		}
	}
	var err error
	for _, pp := range parts {
		select {
		case <-pp.exit:
			continue
		case <-ctx.Done():
			err = ctxError(ctx, nil, "close producer")
		}
		break
	}
	p.abort()
	p.wg.Wait()
	return err
}

// produceRequestOverhead is room for the produce request around its batch
// (topic, partition, acks, correlation id, trace context).
const produceRequestOverhead = 1024

// maxPooledPendings bounds the pending lists kept for reuse (a batch of
// tiny records can hold many; an outsized list is left to the collector).
const maxPooledPendings = 1 << 16

// pendingRoom is an empty list for a new batch's pending records: one a
// completed batch gave back, or nil (append makes one).
func (p *Producer) pendingRoom() []pending {
	if v, ok := p.pendings.Get().(*[]pending); ok {
		return *v
	}
	return nil
}

// batchBuffer is an empty buffer with room for about want bytes, for a new
// batch: one an acknowledged batch gave back, or a new one.
func (p *Producer) batchBuffer(want int) []byte {
	if v, ok := p.bufs.Get().(*[]byte); ok && cap(*v) >= want {
		return (*v)[:0]
	}
	return make([]byte, 0, want)
}

// recycle keeps what a completed batch (every callback run) can give
// back: its list of pending records, always, and its buffer when the
// leader acknowledged it. Only then: an answer proves the request was
// encoded and sent, so nothing reads the bytes any more, whereas a request
// given up (a timeout) may still be being encoded.
func (p *Producer) recycle(b *batch) {
	// Every callback has run: the pending records are done with, whatever
	// the outcome. Cleared, so the pool holds no callback alive.
	if recs := b.recs; cap(recs) > 0 && cap(recs) <= maxPooledPendings {
		clear(recs)
		recs = recs[:0]
		p.pendings.Put(&recs)
	}
	b.recs = nil
	if r := b.result; r == nil || r.resp == nil || r.err != nil {
		return
	}
	if buf := b.b.Release(); cap(buf) <= 2*p.opts.BatchSize {
		p.bufs.Put(&buf)
	}
}
