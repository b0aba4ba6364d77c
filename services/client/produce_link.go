package client

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// produceLinks holds the client's produce streams, one per broker address,
// shared by every partition whose leader is there. A write on a stream costs
// one message each way; a unary call also costs a new HTTP/2 stream with its
// headers, trailers and the server's per-call interceptors, and that was the
// larger part of a synchronous write's cost.
type produceLinks struct {
	c *Client

	mu     sync.Mutex
	links  map[string]*linkSlot
	closed bool
	// receivers are the streams' receive goroutines, started under mu
	// while closed is false, so close waits for every one.
	receivers sync.WaitGroup
}

// linkSlot is one address's stream. Its own lock is held while a stream to
// it opens, so an address whose connection is still being made (gRPC waits
// for it) holds up only the partitions led there: under the shared lock,
// one unreachable broker stalled every partition's writes for up to the
// connect timeout.
type linkSlot struct {
	mu   sync.Mutex
	link *produceLink
}

func newProduceLinks(c *Client) *produceLinks {
	return &produceLinks{c: c, links: map[string]*linkSlot{}}
}

// get returns the open stream to addr, opening one when there is none or
// the last one broke. Opening waits at most until ctx (the request's) ends;
// the stream then outlives it.
func (ls *produceLinks) get(ctx context.Context, addr string) (*produceLink, error) {
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		return nil, ErrClosed
	}
	slot := ls.links[addr]
	if slot == nil {
		slot = &linkSlot{}
		ls.links[addr] = slot
	}
	ls.mu.Unlock()

	slot.mu.Lock()
	defer slot.mu.Unlock()
	if l := slot.link; l != nil && !l.isBroken() {
		return l, nil
	}
	cc, err := ls.c.pool.get(addr)
	if err != nil {
		return nil, err
	}
	streamCtx, cancel := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() {
		defer close(watchDone)
		cancel()
	})
	st, err := brokerv1.NewBrokerServiceClient(cc).ProduceStream(streamCtx)
	if !stopWatch() {
		// ctx ended while the stream opened: it was cancelled with it
		// (on a goroutine of the watch's, waited for).
		<-watchDone
		return nil, context.Cause(ctx)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	l := &produceLink{stream: st, cancel: cancel, pending: map[uint64]*pendingProduce{}, tracer: ls.c.opts.TracerProvider}
	l.lastRecv.Store(time.Now().UnixNano())
	ls.mu.Lock()
	closed := ls.closed
	if !closed {
		ls.receivers.Go(l.receive)
	}
	ls.mu.Unlock()
	if closed {
		l.fail(ErrClosed)
		return nil, ErrClosed
	}
	slot.link = l
	return l, nil
}

// close ends every stream, requests still waiting failing with ErrClosed,
// and returns once their receive goroutines have: a cut stream's Recv
// returns without the broker, so a stalled one does not hold it up.
func (ls *produceLinks) close() {
	ls.mu.Lock()
	ls.closed = true
	slots := ls.links
	ls.links = nil
	ls.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		if s.link != nil {
			s.link.fail(ErrClosed)
		}
		s.mu.Unlock()
	}
	ls.receivers.Wait()
}

// produceLink is one produce stream. Partition writers send on it (one at a
// time: gRPC allows one sender), its receive goroutine hands each answer to
// the request with its correlation id. A request whose context ends first
// is answered with that, and a stream that then has heard nothing since the
// request went out is cut (a stalled broker, as Kafka's client disconnects
// on a request timeout): its other requests fail with a retriable error
// and the next send opens a new stream.
type produceLink struct {
	stream brokerv1.BrokerService_ProduceStreamClient
	cancel context.CancelFunc
	tracer trace.TracerProvider

	sendMu sync.Mutex

	mu      sync.Mutex
	pending map[uint64]*pendingProduce
	next    uint64
	broken  error

	lastRecv atomic.Int64 // unix ns of the last answer
}

// outgoingProduce is a request's stream message with its pending entry.
type outgoingProduce struct {
	msg     brokerv1.ProduceStreamRequest
	pending pendingProduce
}

type pendingProduce struct {
	done func(*brokerv1.ProduceResponse, error)
	stop func() bool // unregisters the context watch
	// watches counts the watch until it is unregistered or has run (its
	// goroutine, which the context's end starts, has returned): the
	// sender's owner waits for it.
	watches *sync.WaitGroup
	cancel  context.CancelFunc
	span    trace.Span
	// sending is set until its stream.Send returned: a request whose
	// context ends while it is still being written (the broker reads
	// nothing, its flow-control window is full) has a stuck stream, which
	// only cutting releases.
	sending atomic.Bool
}

func (l *produceLink) isBroken() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.broken != nil
}

// send puts req on the stream and calls done exactly once with its answer,
// from another goroutine: the answer, ctx's end, or the stream's failure.
// cancel (ctx's) is called once done has been decided. watches counts the
// watch on ctx until it is unregistered or its goroutine has returned.
func (l *produceLink) send(ctx context.Context, cancel context.CancelFunc, req *brokerv1.ProduceRequest, watches *sync.WaitGroup,
	done func(*brokerv1.ProduceResponse, error)) error {
	// The stream message and the pending entry are one allocation.
	out := &outgoingProduce{}
	msg, p := &out.msg, &out.pending
	msg.Request = req
	p.done, p.cancel, p.watches = done, cancel, watches
	if l.tracer != nil {
		var spanCtx context.Context
		spanCtx, p.span = l.tracer.Tracer("tidemark.io/services/client").Start(ctx, "tidemark.broker.v1.BrokerService/Produce",
			trace.WithSpanKind(trace.SpanKindClient))
		carrier := propagation.MapCarrier{}
		otel.GetTextMapPropagator().Inject(spanCtx, carrier)
		msg.TraceContext = carrier
	}
	l.mu.Lock()
	l.next++
	id := l.next
	l.mu.Unlock()
	msg.CorrelationId = id
	sentAt := time.Now().UnixNano()
	// Watched before it is registered, so that whoever takes it from
	// pending finds stop set; a context already ended is handled below.
	p.sending.Store(true)
	watches.Add(1)
	p.stop = context.AfterFunc(ctx, func() {
		defer watches.Done()
		l.expire(id, p, ctx, sentAt)
	})
	l.mu.Lock()
	if l.broken != nil {
		err := l.broken
		l.mu.Unlock()
		p.unwatch()
		p.end(nil, err)
		return err
	}
	l.pending[id] = p
	l.mu.Unlock()
	if ctx.Err() != nil {
		p.sending.Store(false)
		l.expire(id, p, ctx, sentAt)
		return nil
	}

	l.sendMu.Lock()
	err := l.stream.Send(msg)
	l.sendMu.Unlock()
	p.sending.Store(false)
	if err != nil {
		// The stream's own error comes from its receive side; this
		// request fails with it (or a retriable one) through fail.
		l.fail(kerr.New(kerr.NetworkException, "produce stream: %v", err))
	}
	return nil
}

// receive hands each answer to its request until the stream ends.
func (l *produceLink) receive() {
	for {
		m, err := l.stream.Recv()
		if err != nil {
			l.fail(streamEnded(err))
			return
		}
		l.lastRecv.Store(time.Now().UnixNano())
		var ke error
		if d := m.GetError(); d != nil {
			ke = kerr.FromDetail(d)
		}
		l.finish(m.GetCorrelationId(), m.GetResponse(), ke)
	}
}

func (l *produceLink) take(id uint64) *pendingProduce {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pending[id]
	delete(l.pending, id)
	return p
}

func (l *produceLink) finish(id uint64, resp *brokerv1.ProduceResponse, err error) {
	if p := l.take(id); p != nil {
		p.unwatch()
		p.end(resp, err)
	}
}

// expire answers request id with its context's end; a stream silent since
// the request went out is cut.
func (l *produceLink) expire(id uint64, sent *pendingProduce, ctx context.Context, sentAt int64) {
	stuck := sent.sending.Load()
	p := l.take(id)
	if p == nil {
		return
	}
	p.end(nil, context.Cause(ctx))
	switch {
	case stuck:
		// Still being written: the broker reads nothing and the writer is
		// blocked in Send, holding every other writer of the stream.
		l.fail(kerr.New(kerr.NetworkException, "produce stream: a request could not be written before it ended; reconnecting"))
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded) && l.lastRecv.Load() < sentAt:
		l.fail(kerr.New(kerr.NetworkException, "produce stream: no answer since a request that timed out; reconnecting"))
	}
}

// fail breaks the stream: every waiting request ends with err.
func (l *produceLink) fail(err error) {
	l.mu.Lock()
	if l.broken == nil {
		l.broken = err
	}
	pending := l.pending
	l.pending = map[uint64]*pendingProduce{}
	l.mu.Unlock()
	l.cancel()
	for _, p := range pending {
		p.unwatch()
		p.end(nil, err)
	}
}

// unwatch unregisters the request's context watch; one that has started
// counts itself out when it returns.
func (p *pendingProduce) unwatch() {
	if p.stop() {
		p.watches.Done()
	}
}

func (p *pendingProduce) end(resp *brokerv1.ProduceResponse, err error) {
	if p.span != nil {
		if err != nil {
			p.span.RecordError(err)
		}
		p.span.End()
	}
	p.cancel()
	p.done(resp, err)
}

// streamEnded is the error a stream's waiting requests fail with. The
// stream's end says nothing about them (their batches may or may not be in
// the log, as with a cut connection): NETWORK_EXCEPTION, retried on fresh
// metadata, unless the stream was refused outright (not authenticated, not
// authorized, an unknown method), which a retry would not change.
func streamEnded(err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	ke := kerr.FromCall(err)
	if err == io.EOF || ke == nil || ke.Code.Retriable() || ke.Code == kerr.BrokerNotAvailable || ke.Code == kerr.UnknownServerError {
		return kerr.New(kerr.NetworkException, "the produce stream ended: %v", err)
	}
	return ke
}
