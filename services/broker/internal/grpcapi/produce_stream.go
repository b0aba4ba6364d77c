package grpcapi

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/telemetry"
)

// produceStreamInFlight bounds the requests of one produce stream that are
// appended and waiting for their answer (an acks=-1 request parked for the
// high watermark): the stream's next request is not read until one is
// answered, so a client cannot park unbounded work on the broker.
const produceStreamInFlight = 256

// maxUnsentProduceAnswers bounds the answers of one produce stream that are
// ready and not yet sent: past it the stream's next request is not read
// until one goes out. A client that stops reading its answers blocks the
// Send in progress; without this bound every later request, even an empty
// one answered at once with its error, parked a worker on the send lock (up
// to produceStreamInFlight of them per stream). Not reading leaves the
// requests to HTTP/2 flow control, which holds the client's sends instead.
const maxUnsentProduceAnswers = 16

// ProduceStream serves many Produce requests on one stream. Each request is
// appended before the next is read (WithAppended), so one stream's batches
// reach a partition in the order they were sent, as on one Kafka
// connection, while their acks=-1 waits overlap; answers go out as they are
// ready, each naming its request. A request refused or failed is answered
// with its error; only a broken stream or a stopping broker ends the stream.
// A stream whose client does not read its answers is not read either
// (maxUnsentProduceAnswers).
func (b *Broker) ProduceStream(stream brokerv1.BrokerService_ProduceStreamServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if b.Draining != nil {
		defer context.AfterFunc(b.Draining, cancel)()
	}
	s := &produceStreamState{b: b, stream: stream, cancel: cancel,
		work: make(chan *brokerv1.ProduceStreamRequest), appended: make(chan struct{}, 1), sent: make(chan struct{}, 1),
		slots: make(chan struct{}, produceStreamInFlight)}
	defer func() {
		s.wg.Wait()
		close(s.work) // the idle workers leave
	}()
	for {
		if !s.waitForSends(ctx) {
			return s.endShuttingDownOrBroken()
		}
		req, err := stream.Recv()
		if err == io.EOF {
			return nil // the client is done sending; answer what is in flight
		}
		if err != nil {
			return err
		}
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return kerr.New(kerr.BrokerNotAvailable, "the broker is shutting down")
		}
		s.wg.Add(1)
		select {
		case s.work <- req: // an idle worker takes it
		default:
			w := &produceWorker{s: s}
			w.ctx = replica.WithAppended(ctx, w.signalAppended)
			go w.run(req)
		}
		select {
		case <-s.appended:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			return s.endShuttingDownOrBroken()
		}
	}
}

// produceStreamState is what a produce stream's reader and its workers share.
type produceStreamState struct {
	b      *Broker
	stream brokerv1.BrokerService_ProduceStreamServer
	cancel context.CancelFunc

	work     chan *brokerv1.ProduceStreamRequest // to an idle worker (unbuffered)
	appended chan struct{}                       // the request in hand is appended or refused: read the next
	slots    chan struct{}                       // requests in flight, at most produceStreamInFlight
	wg       sync.WaitGroup                      // requests in flight
	idle     atomic.Int32                        // workers waiting on work

	unsent atomic.Int32  // answers ready and not yet sent
	sent   chan struct{} // capacity 1: an answer went out (wakes a reader waiting in waitForSends)

	sendMu  sync.Mutex // gRPC allows one sender at a time
	sendErr error
}

func (s *produceStreamState) sendError() error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.sendErr
}

// waitForSends holds the reader while more than maxUnsentProduceAnswers
// answers wait to be sent; false when the stream's context ended first.
func (s *produceStreamState) waitForSends(ctx context.Context) bool {
	for s.unsent.Load() > maxUnsentProduceAnswers {
		select {
		case <-s.sent:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// answerSent wakes the reader if it waits for sends. The signal may be
// stale when taken; waitForSends then looks at the count again.
func (s *produceStreamState) answerSent() {
	s.unsent.Add(-1)
	select {
	case s.sent <- struct{}{}:
	default:
	}
}

// endShuttingDownOrBroken ends a stream whose context ended: once the
// requests in flight are answered, with the error that broke the stream,
// else as a stopping broker.
func (s *produceStreamState) endShuttingDownOrBroken() error {
	s.wg.Wait()
	if err := s.sendError(); err != nil {
		return err
	}
	return kerr.New(kerr.BrokerNotAvailable, "the broker is shutting down")
}

// maxIdleProduceWorkers is how many workers a stream keeps waiting for its
// next requests; more leave once their request is answered.
const maxIdleProduceWorkers = 8

// produceWorker answers a stream's requests one after another. Workers are
// kept between requests because a new goroutine per request grew its stack
// through the whole produce path every time (stack copying was about 5% of
// a leader's CPU under 8 synchronous producers).
type produceWorker struct {
	s       *produceStreamState
	ctx     context.Context // the stream's, with signalAppended as its WithAppended hook
	pending atomic.Bool     // the request in hand has not yet let the reader go on
}

func (w *produceWorker) run(req *brokerv1.ProduceStreamRequest) {
	s := w.s
	for {
		w.handle(req)
		if s.idle.Add(1) > maxIdleProduceWorkers {
			s.idle.Add(-1)
			return
		}
		var ok bool
		req, ok = <-s.work
		s.idle.Add(-1)
		if !ok {
			return
		}
	}
}

func (w *produceWorker) handle(req *brokerv1.ProduceStreamRequest) {
	s := w.s
	defer s.wg.Done()
	defer func() { <-s.slots }()
	w.pending.Store(true)
	resp := s.b.produceOnStream(w.ctx, req)
	s.unsent.Add(1)    // counted before the reader may go on: waitForSends sees it
	w.signalAppended() // refused before its append: read the next one now
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	defer s.answerSent()
	if s.sendErr == nil {
		if s.sendErr = s.stream.Send(resp); s.sendErr != nil {
			s.cancel() // the stream is broken: stop reading it
		}
	}
}

// signalAppended lets the stream's reader take the next request, once per
// request: the replica calls it when the batch is appended, handle again
// when the request ended without an append.
func (w *produceWorker) signalAppended() {
	if w.pending.CompareAndSwap(true, false) {
		w.s.appended <- struct{}{} // capacity 1: the reader waits for exactly one per request
	}
}

// produceOnStream answers one request of a produce stream: the unary
// handler's checks and work, inside a server span of its own joined to the
// client's through the trace context the request carries.
func (b *Broker) produceOnStream(ctx context.Context, m *brokerv1.ProduceStreamRequest) *brokerv1.ProduceStreamResponse {
	out := &brokerv1.ProduceStreamResponse{CorrelationId: m.GetCorrelationId()}
	if b.TracerProvider != nil {
		// A request without a trace context starts a trace of its own: the
		// stream itself is not traced (it lives for many requests).
		root := trace.WithNewRoot()
		if tc := m.GetTraceContext(); len(tc) > 0 {
			ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(tc))
			root = trace.WithAttributes()
		}
		var span trace.Span
		ctx, span = b.TracerProvider.Tracer(tracerName).Start(ctx, telemetry.ProduceSpan, root,
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(rpcSystem, brokerService, produceMethod))
		defer span.End()
	}
	req := m.GetRequest()
	if req == nil {
		out.Error = errorDetail(kerr.BadField(kerr.InvalidRequest, "request", "is missing"))
		return out
	}
	if _, ok := req.GetPayload().(*brokerv1.ProduceRequest_Records); ok {
		// Structured records are counted before decoding on the unary call
		// (Admit); a stream carries encoded batches only.
		out.Error = errorDetail(kerr.BadField(kerr.InvalidRequest, "records", "a produce stream carries record_batch payloads only; send structured records with Produce"))
		return out
	}
	if b.Authorize != nil {
		if err := b.Authorize(ctx, brokerv1.BrokerService_Produce_FullMethodName, req); err != nil {
			out.Error = errorDetail(err)
			return out
		}
	}
	if err := b.CheckBatchClaims(req.GetRecordBatch()); err != nil {
		out.Error = errorDetail(err)
		return out
	}
	resp, err := b.Produce(ctx, req)
	if err != nil && ctx.Err() != nil {
		// The stream ended (the broker stops, the client left) before the
		// answer: as a cut connection, worth a retry.
		err = kerr.New(kerr.NetworkException, "the produce stream ended before %s-%d's batch was answered",
			req.GetTopic(), req.GetPartition())
	}
	if err != nil {
		out.Error = errorDetail(err)
		return out
	}
	out.Response = resp
	return out
}

// errorDetail is err as a unary call's status would carry it.
func errorDetail(err error) *commonv1.ErrorDetail {
	return kerr.Detail(kerr.FromStatus(kerr.ToStatus(err).Err()))
}
