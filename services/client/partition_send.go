package client

import (
	"context"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// sendLocked starts requests for the sequenced batches, strictly in
// sequence order: it stops at the first batch that must wait (backoff, a
// final failure not yet settled, the in-flight limit, or a resend behind an
// unacknowledged batch). Until the leader has acknowledged one batch under
// the current identity it may not know the producer, and would accept any
// sequence; so only one request is in flight until then, and order holds
// even though concurrent requests may be handled in any order.
func (pp *partitionProducer) sendLocked(now time.Time) {
	if pp.resetting || (pp.p.idem && pp.needID) {
		return
	}
	gap := false // an earlier batch is not yet acknowledged
	// Whatever this step leaves unsent while every request slot is taken
	// waits for a slot (ProducerStats.SlotWaits), sequenced or not.
	defer func() {
		if pp.inflight >= pp.p.opts.MaxInFlight {
			for _, w := range pp.queue {
				w.slotWait = w.slotWait || (!w.inFlight && !w.counted)
			}
		}
	}()
	for _, b := range pp.queue {
		if !b.sequenced {
			return
		}
		switch {
		case b.inFlight:
			gap = true
			continue
		case b.succeeded():
			continue
		case b.result != nil, b.expired, !now.Before(b.deadline), now.Before(b.retryAt):
			return
		case pp.inflight >= pp.p.opts.MaxInFlight:
			return
		case pp.p.idem && !pp.confirmed && pp.inflight > 0:
			return
		case b.sends > 0 && gap:
			// A resend waits until it is the oldest unacknowledged batch, as
			// in Kafka: sent behind an earlier one that is still unresolved it
			// would only be refused again.
			return
		}
		if !b.counted {
			b.counted = true
			pp.p.counters.sent(now.Sub(b.created), b.slotWait)
		}
		b.inFlight = true
		b.sends++
		b.sentWithGap = gap
		pp.inflight++
		pp.wire <- wireReq{b, b.data} // never blocks: it holds at most MaxInFlight
		gap = true
	}
}

// wireReq is one produce request handed to the partition's writer.
type wireReq struct {
	b    *batch
	data []byte
}

// writeLoop is the partition's writer goroutine. It puts requests on the
// leader's produce stream one after the other, in the order sendLocked
// chose; the stream's receive goroutine files the answers. Sending from
// several goroutines would reach the broker in random order, and every batch
// that overtakes an earlier one is refused and resent.
func (pp *partitionProducer) writeLoop() {
	for w := range pp.wire {
		pp.transmit(w.b, w.data)
	}
}

// transmit sends one produce request for b (whose encoded bytes are data)
// to the partition's leader; its answer is filed by record.
func (pp *partitionProducer) transmit(b *batch, data []byte) {
	p := pp.p
	deadline := time.Now().Add(p.opts.RequestTimeout)
	if b.deadline.Before(deadline) {
		deadline = b.deadline
	}
	ctx, cancel := context.WithDeadline(p.ctx, deadline)
	// The attempt and its request are one allocation (a write allocates
	// each of them every time).
	call := &transmission{}
	res := &call.res
	link, err := pp.leaderLink(ctx)
	if err != nil {
		cancel()
		pp.record(b, res, err)
		return
	}
	res.sent = true
	call.payload.RecordBatch = data
	req := &call.req
	req.Topic, req.Partition = pp.topic, pp.partition
	req.Acks = p.opts.Acks.wire()
	req.TimeoutMs = int32(p.opts.RequestTimeout.Milliseconds())
	req.Payload = &call.payload
	_ = link.send(ctx, cancel, req, &p.wg, func(resp *brokerv1.ProduceResponse, err error) {
		if err == nil && resp == nil {
			err = kerr.New(kerr.UnknownServerError, "the broker answered a produce with neither a response nor an error")
		}
		if err == nil {
			res.resp = resp
		}
		pp.record(b, res, err)
	})
}

// transmission is one produce request and what it brought back. Nothing
// reads the request once it is sent; the batch keeps the attempt.
type transmission struct {
	res     attempt
	req     brokerv1.ProduceRequest
	payload brokerv1.ProduceRequest_RecordBatch
}

// leaderLink finds the leader and its produce stream.
func (pp *partitionProducer) leaderLink(ctx context.Context) (*produceLink, error) {
	c := pp.p.c
	r, err := c.meta.leader(ctx, pp.topic, pp.partition)
	if err != nil {
		return nil, err
	}
	return c.produce.get(ctx, r.addr)
}

// record files the outcome of one request and pokes the partition.
func (pp *partitionProducer) record(b *batch, res *attempt, err error) {
	if err != nil {
		res.resp = nil
		res.err = toKerr(err)
		pp.p.c.meta.noteError(pp.topic, pp.partition, res.err)
		if res.err.Code == kerr.RequestTimedOut {
			pp.p.c.meta.noteTimeout(pp.topic, pp.partition)
		}
	}
	pp.mu.Lock()
	b.inFlight = false
	b.result = res
	pp.inflight--
	pp.mu.Unlock()
	pp.poke()
}
