package client

import (
	"slices"
	"sync"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// partitionProducer is the producer's state for one partition: the batch
// being filled, the batches waiting or in flight, and the idempotence
// sequence. Its goroutine (run) makes every decision; record appends, the
// request goroutines and Flush only change state under mu and poke it.
type partitionProducer struct {
	p         *Producer
	topic     string
	partition int32
	wake      chan struct{} // capacity 1: "look again"
	wire      chan wireReq  // requests for the writer, in sending order
	exit      chan struct{} // closed when run returns

	mu        sync.Mutex // guards everything below and the sending fields of the batches
	open      *batch     // accepting records
	queue     []*batch   // sealed and not complete, oldest first; the sequenced ones are a prefix
	inflight  int        // requests outstanding
	lastBatch int        // bytes of the last batch sealed: the next one's size hint
	draining  bool       // the producer is closing: send everything without linger, then exit
	exited    bool

	// Idempotence. Sequences run per (identity, partition); see partition_settle.go.
	id        identity
	needID    bool // the next batch needs a new identity (start, or after a reset)
	idBusy    bool // an InitProducerId request is running for this partition
	idRetryAt time.Time
	idFails   int
	idErr     error
	idErrAt   time.Time // when idErr came back
	nextSeq   int32
	confirmed bool // a batch was acknowledged under id, so the leader knows the producer
	resetting bool // a sequenced batch failed for good: wait for the in-flight ones, then restart
	// lastAcked is the last offset acknowledged on the partition under any
	// identity (-1 before one): where to look for a head batch that may be
	// written (partition_written.go).
	lastAcked int64
	lookup    *headLookup // of the head batch, while resetting
}

func newPartitionProducer(p *Producer, topic string, partition int32) *partitionProducer {
	return &partitionProducer{
		p: p, topic: topic, partition: partition,
		wake: make(chan struct{}, 1),
		wire: make(chan wireReq, p.opts.MaxInFlight),
		exit: make(chan struct{}),
		id:   noIdentity, needID: p.idem, lastAcked: -1,
	}
}

func (pp *partitionProducer) poke() {
	select {
	case pp.wake <- struct{}{}:
	default:
	}
}

// appendResult says what append did.
type appendResult int8

const (
	appended          appendResult = iota
	appendedAndSealed              // the record filled its batch, which was sealed
	sealedWithout                  // the record did not fit; the batch was sealed without it
	appendClosed                   // the partition has shut down
)

// append adds a record to the open batch. When the record does not fit,
// the batch is sealed and the record starts the next one, unless moveOn is
// set (a sticky keyless record, which should rather go to the next
// partition): then it is left out.
func (pp *partitionProducer) append(r *recordbatch.Record, pend pending, moveOn bool) appendResult {
	// A batch must also fit in one request (a single record that does not
	// was refused before it got here).
	limit := min(pp.p.opts.BatchSize, pp.p.c.opts.MaxMessageBytes-produceRequestOverhead-len(pp.topic))
	pp.mu.Lock()
	if pp.exited {
		pp.mu.Unlock()
		return appendClosed
	}
	res, poke := appended, false
	if pp.open != nil && !pp.open.fits(r, limit) {
		pp.sealLocked()
		poke = true
		if moveOn {
			pp.mu.Unlock()
			pp.poke()
			return sealedWithout
		}
	}
	if pp.open == nil {
		pp.open = newBatch(time.Now(), pp.p.opts.DeliveryTimeout)
		pp.open.b.Reuse(pp.p.batchBuffer(pp.sizeHintLocked()))
		pp.open.recs = pp.p.pendingRoom()
		poke = true // arm the linger timer
	}
	pp.open.add(r, pend)
	if pp.open.b.Len() >= limit {
		pp.sealLocked()
		res, poke = appendedAndSealed, true
	}
	pp.mu.Unlock()
	if poke {
		pp.poke()
	}
	return res
}

func (pp *partitionProducer) sealLocked() {
	pp.lastBatch = pp.open.b.Len()
	pp.queue = append(pp.queue, pp.open)
	pp.open = nil
}

// sizeHintLocked is the room a new batch is given: what the last one came
// to, at least 1 KiB, at most batch.size (a larger record still grows it).
func (pp *partitionProducer) sizeHintLocked() int {
	return min(max(pp.lastBatch+pp.lastBatch/8, 1024), pp.p.opts.BatchSize)
}

// flush seals the open batch and returns what to wait for.
func (pp *partitionProducer) flush() []chan struct{} {
	pp.mu.Lock()
	if pp.open != nil {
		pp.sealLocked()
	}
	out := make([]chan struct{}, 0, len(pp.queue))
	for _, b := range pp.queue {
		out = append(out, b.done)
	}
	pp.mu.Unlock()
	pp.poke()
	return out
}

func (pp *partitionProducer) drain() {
	pp.mu.Lock()
	pp.draining = true
	pp.mu.Unlock()
	pp.poke()
}

// run is the partition's goroutine. It exits once the producer is closing
// and nothing is left, and stops the writer.
func (pp *partitionProducer) run() {
	defer close(pp.exit)
	defer close(pp.wire)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	abort := pp.p.ctx.Done()
	for {
		wait, exit := pp.step()
		if exit {
			return
		}
		timer.Reset(wait)
		select {
		case <-pp.wake:
		case <-timer.C:
		case <-abort:
			abort = nil // seen; from now on wait for the requests to return
		}
	}
}

// step does everything that can be done now and says how long to sleep.
func (pp *partitionProducer) step() (time.Duration, bool) {
	now := time.Now()
	aborted := pp.p.ctx.Err() != nil
	var out []completion

	pp.mu.Lock()
	if pp.open != nil && (pp.draining || aborted || pp.lingeredLocked(now)) {
		pp.sealLocked()
	}
	if aborted {
		out = pp.abortLocked(out)
	} else {
		out = pp.expireUnsequencedLocked(now, out)
		out = pp.failOnFatalIdentityLocked(out)
		out = pp.settleLocked(now, out)
		pp.identityLocked(now)
		pp.sequenceLocked()
		pp.sendLocked(now)
	}
	exit := (pp.draining || aborted) && pp.open == nil && len(pp.queue) == 0 && pp.inflight == 0 && !pp.idBusy && !pp.lookupRunningLocked()
	if exit {
		pp.exited = true
	}
	wait := pp.nextWakeLocked(now)
	pp.mu.Unlock()

	pp.deliver(out)
	return wait, exit
}

// lingeredLocked says whether the open batch should go now: linger.ms has
// passed, or buffer.memory is spent (a record waits for room, so nothing
// more joins the batch until an answer frees some; Kafka's accumulator
// sends every batch then). While sealed batches still wait for the window,
// it keeps filling instead, as a Kafka batch does until it is drained.
func (pp *partitionProducer) lingeredLocked(now time.Time) bool {
	if now.Sub(pp.open.created) < pp.p.opts.Linger && !pp.p.mem.exhausted() {
		return false
	}
	n := len(pp.queue)
	return n == 0 || pp.queue[n-1].sequenced
}

// nextWakeLocked is the time until the next timed event: linger, a retry,
// an identity retry or a delivery deadline. Batches are created in queue
// order, so past the sequenced window (at most MaxInFlight batches) only
// the first batch's deadline matters. Times already past are skipped: this
// step acted on them, or they wait for an answer, which pokes the goroutine.
func (pp *partitionProducer) nextWakeLocked(now time.Time) time.Duration {
	next := now.Add(time.Hour)
	earlier := func(t time.Time) {
		if t.After(now) && t.Before(next) {
			next = t
		}
	}
	if pp.open != nil {
		lingerEnd := pp.open.created.Add(pp.p.opts.Linger)
		// This step may have emptied the queue (expired or completed
		// batches) after the open batch was judged still filling: seal it
		// now, or it would wait for the next record however long that is.
		if !lingerEnd.After(now) && pp.lingeredLocked(now) {
			return 0
		}
		earlier(lingerEnd)
		earlier(pp.open.deadline)
	}
	if pp.needID && !pp.idBusy {
		earlier(pp.idRetryAt)
	}
	for _, b := range pp.queue {
		if b.inFlight {
			continue
		}
		earlier(b.deadline)
		if !b.sequenced {
			break
		}
		if b.result == nil {
			earlier(b.retryAt)
		}
	}
	return next.Sub(now)
}

// abortLocked ends everything that is not in flight: successes complete,
// the rest fail. In-flight requests were canceled and come back soon.
func (pp *partitionProducer) abortLocked(out []completion) []completion {
	keep := pp.queue[:0]
	for _, b := range pp.queue {
		switch {
		case b.inFlight:
			keep = append(keep, b)
		case b.succeeded():
			out = append(out, success(b))
		default:
			out = append(out, failure(b, kerr.New(kerr.RequestTimedOut,
				"producer closed before the batch was acknowledged; it may or may not have been written")))
		}
	}
	clear(pp.queue[len(keep):])
	pp.queue = keep
	return out
}

// expireUnsequencedLocked fails batches past their delivery deadline that
// were never given a sequence: nothing depends on them. They follow the
// sequenced window, and their deadlines grow along the queue, so the
// expired ones are a run at the start of the unsequenced part.
func (pp *partitionProducer) expireUnsequencedLocked(now time.Time, out []completion) []completion {
	first := 0
	for first < len(pp.queue) && pp.queue[first].sequenced {
		first++
	}
	end := first
	for end < len(pp.queue) && !now.Before(pp.queue[end].deadline) {
		out = append(out, failure(pp.queue[end], pp.timeoutErr(pp.queue[end])))
		end++
	}
	if end > first {
		pp.queue = slices.Delete(pp.queue, first, end)
	}
	return out
}

// failOnFatalIdentityLocked fails the batches waiting for a producer id
// when the last InitProducerId answer was final (CLUSTER_AUTHORIZATION_FAILED
// for a principal without IdempotentWrite, say): Kafka's producer treats it
// as fatal, and retrying until delivery.timeout.ms only hides the cause. The
// identity is asked for again after its backoff, and a batch fails only on
// an answer that came after it was created, so every record waits for one
// attempt of its own and records sent once the cause is fixed go through.
func (pp *partitionProducer) failOnFatalIdentityLocked(out []completion) []completion {
	if pp.idErr == nil || !pp.needID || toKerr(pp.idErr).Code.Retriable() {
		return out
	}
	keep := pp.queue[:0]
	for _, b := range pp.queue {
		if b.sequenced || b.inFlight || b.created.After(pp.idErrAt) {
			keep = append(keep, b)
			continue
		}
		out = append(out, failure(b, toKerr(pp.idErr)))
	}
	clear(pp.queue[len(keep):])
	pp.queue = keep
	return out
}

// timeoutErr is the error of a batch whose delivery timeout passed.
func (pp *partitionProducer) timeoutErr(b *batch) *kerr.Error {
	var last any = "none"
	switch {
	case b.lastErr != nil:
		last = b.lastErr
	case pp.idErr != nil:
		last = pp.idErr
	}
	return kerr.New(kerr.RequestTimedOut, "%s-%d: delivery.timeout.ms %v passed after %d retries (last error: %v)",
		pp.topic, pp.partition, pp.p.opts.DeliveryTimeout, b.retries, last)
}
