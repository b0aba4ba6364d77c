package grpcapi

import (
	"context"
	"io"
	"sync"

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

// ProduceStream serves many Produce requests on one stream. Each request is
// appended before the next is read (WithAppended), so one stream's batches
// reach a partition in the order they were sent, as on one Kafka
// connection, while their acks=-1 waits overlap; answers go out as they are
// ready, each naming its request. A request refused or failed is answered
// with its error; only a broken stream or a stopping broker ends the stream.
func (b *Broker) ProduceStream(stream brokerv1.BrokerService_ProduceStreamServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if b.Draining != nil {
		defer context.AfterFunc(b.Draining, cancel)()
	}
	var (
		sendMu  sync.Mutex // gRPC allows one sender at a time
		sendErr error
		wg      sync.WaitGroup
		slots   = make(chan struct{}, produceStreamInFlight)
	)
	defer wg.Wait()
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil // the client is done sending; answer what is in flight
		}
		if err != nil {
			return err
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return kerr.New(kerr.BrokerNotAvailable, "the broker is shutting down")
		}
		appendedCh := make(chan struct{})
		var once sync.Once
		appended := func() { once.Do(func() { close(appendedCh) }) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			resp := b.produceOnStream(replica.WithAppended(ctx, appended), req)
			appended() // refused before its append: read the next one now
			sendMu.Lock()
			defer sendMu.Unlock()
			if sendErr == nil {
				if sendErr = stream.Send(resp); sendErr != nil {
					cancel() // the stream is broken: stop reading it
				}
			}
		}()
		select {
		case <-appendedCh:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			wg.Wait()
			if sendErr != nil {
				return sendErr
			}
			return kerr.New(kerr.BrokerNotAvailable, "the broker is shutting down")
		}
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
	if err := b.checkBatchClaims(req.GetRecordBatch()); err != nil {
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
