package grpcserver

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// An answer leaves its handler long before it leaves the server: gRPC
// queues a whole reply while the stream's write quota is positive, and a
// client that reads nothing leaves it queued. The answer budget bounds the
// bytes of such answers one connection may hold: a handler charges its
// answer before handing it to gRPC, and the charge ends when the answer's
// last byte is written to the connection (the connection's bytes tell,
// see h2frames.go), when its stream ends (the client reset it, or the
// server ended it) or when the connection closes.

// DefaultAnswerBytesPerConnection is max.queued.answer.bytes.per.connection
// by default.
const DefaultAnswerBytesPerConnection = 64 << 20

// answerBudget is one connection's budget.
type answerBudget struct {
	mu       sync.Mutex
	limit    int64
	reserved int64                     // charged: taken by handlers, or queued and not yet written
	streams  map[uint32]*streamAnswers // streams the client opened and nobody ended
	opened   uint32                    // the highest stream id the client opened
	closed   bool
	freed    chan struct{} // closed when bytes are freed; nil without waiters
	waits    *atomic.Int64 // takes that had to wait, on every connection of the server
}

// streamAnswers are one stream's queued answers, oldest first.
type streamAnswers struct {
	messages messageScanner
	queued   []int64
}

func newAnswerBudget(limit int64, waits *atomic.Int64) *answerBudget {
	return &answerBudget{limit: limit, streams: map[uint32]*streamAnswers{}, waits: waits}
}

// tryTake charges size bytes if they fit now. An answer larger than the
// whole budget fits a connection holding nothing, so it is never refused
// for good.
func (b *answerBudget) tryTake(size int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reserved > 0 && b.reserved+size > b.limit {
		return false
	}
	b.reserved += size
	return true
}

// take waits until a share of the budget is free or wait ends, and
// charges up to want bytes of it: what it returns. A share is want, or a
// quarter of the budget: an answer is not cut to crumbs.
func (b *answerBudget) take(wait context.Context, want int64) int64 {
	share := max(min(want, b.limit/4), 1)
	for waited := false; ; waited = true {
		b.mu.Lock()
		if free := b.limit - b.reserved; free >= share {
			got := min(want, free)
			b.reserved += got
			b.mu.Unlock()
			return got
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if !waited {
			b.waits.Add(1)
		}
		select {
		case <-freed:
		case <-wait.Done():
			return 0
		}
	}
}

// queue turns charged bytes into an answer of size bytes about to be
// queued on stream: held until the stream's next message is written.
func (b *answerBudget) queue(stream uint32, charged, size int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streams[stream]
	if s == nil || b.closed { // never written: the stream or connection ended
		b.freeLocked(charged)
		return
	}
	b.reserved += size - charged
	s.queued = append(s.queued, size)
	if size < charged {
		b.wakeLocked()
	}
}

func (b *answerBudget) free(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.freeLocked(n)
}

func (b *answerBudget) freeLocked(n int64) {
	b.reserved -= n
	b.wakeLocked()
}

func (b *answerBudget) wakeLocked() {
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
}

// clientOpened notes a stream the client opened (a HEADERS frame with a
// new id; the others are trailers).
func (b *answerBudget) clientOpened(stream uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if stream > b.opened && !b.closed {
		b.opened = stream
		b.streams[stream] = &streamAnswers{}
	}
}

// written notes DATA payload bytes written on stream: each message they
// end frees the oldest answer queued there.
func (b *answerBudget) written(stream uint32, p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streams[stream]
	if s == nil {
		return
	}
	for n := s.messages.feed(p); n > 0 && len(s.queued) > 0; n-- {
		b.freeLocked(s.queued[0])
		s.queued = s.queued[1:]
	}
}

// ended frees what stream still holds: its last answer is written, or it
// will never be.
func (b *answerBudget) ended(stream uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.streams[stream]; s != nil {
		delete(b.streams, stream)
		b.freeQueuedLocked(s)
	}
}

func (b *answerBudget) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for id, s := range b.streams {
		delete(b.streams, id)
		b.freeQueuedLocked(s)
	}
}

func (b *answerBudget) freeQueuedLocked(s *streamAnswers) {
	for _, n := range s.queued {
		b.freeLocked(n)
	}
	s.queued = nil
}

func (b *answerBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserved
}

// AnswerReservation is an answer's charge to its connection's budget.
// The handler calls Queue with the answer's size just before handing it
// to gRPC, or Cancel when it sends none. A handler that charges one answer
// of a stream charges all the stream's answers (they are freed in order).
type AnswerReservation struct {
	b      *answerBudget // nil: no budget applies (a call from another protocol's server, or in-process)
	stream uint32
	bytes  int64
	done   bool
}

// Bytes is how much of the budget the reservation holds.
func (r *AnswerReservation) Bytes() int { return int(r.bytes) }

// Queue says the answer about to be handed to gRPC is size bytes
// encoded: the charge becomes size and lasts until its last byte is
// written.
func (r *AnswerReservation) Queue(size int) {
	if r == nil || r.done || r.b == nil {
		return
	}
	r.done = true
	r.b.queue(r.stream, r.bytes, int64(size))
}

// Cancel frees the reservation: no answer is sent with it. It does
// nothing after Queue, or on nil.
func (r *AnswerReservation) Cancel() {
	if r == nil || r.done || r.b == nil {
		return
	}
	r.done = true
	r.b.free(r.bytes)
}

// CallBudget is the answer budget of one call: its connection's, charged
// on the call's HTTP/2 stream. A streaming handler finds it once
// (CallBudgetOf) and charges each of its answers to it.
type CallBudget struct {
	b      *answerBudget // nil: no budget applies
	stream uint32
}

// CallBudgetOf is the budget of ctx's call.
func CallBudgetOf(ctx context.Context) CallBudget {
	b, stream := answerBudgetOf(ctx)
	return CallBudget{b: b, stream: stream}
}

// TryReserve charges size bytes if they fit now (or the connection holds
// nothing). Where no budget applies it reports true and charges nothing.
func (c CallBudget) TryReserve(size int) (*AnswerReservation, bool) {
	if c.b == nil {
		return &AnswerReservation{bytes: int64(size)}, true
	}
	if !c.b.tryTake(int64(size)) {
		return nil, false
	}
	return &AnswerReservation{b: c.b, stream: c.stream, bytes: int64(size)}, true
}

// Reserve waits until some of the budget is free, or wait ends, and
// charges up to want bytes of it: Bytes says how many, 0 when wait ended
// first. Where no budget applies it grants want.
func (c CallBudget) Reserve(wait context.Context, want int) *AnswerReservation {
	if c.b == nil {
		return &AnswerReservation{bytes: int64(want)}
	}
	return &AnswerReservation{b: c.b, stream: c.stream, bytes: c.b.take(wait, int64(want))}
}

// TryReserveAnswer is CallBudgetOf(ctx).TryReserve(size).
func TryReserveAnswer(ctx context.Context, size int) (*AnswerReservation, bool) {
	return CallBudgetOf(ctx).TryReserve(size)
}

// ReserveAnswer is CallBudgetOf(ctx).Reserve(wait, want).
func ReserveAnswer(ctx, wait context.Context, want int) *AnswerReservation {
	return CallBudgetOf(ctx).Reserve(wait, want)
}

type answerBudgetsKey struct{}

// answerBudgetOf finds the budget of ctx's connection and the call's
// stream id; nil when the call has none.
func answerBudgetOf(ctx context.Context) (*answerBudget, uint32) {
	r, ok := ctx.Value(answerBudgetsKey{}).(*answerBudgets)
	if !ok {
		return nil, 0
	}
	b := r.of(ctx)
	if b == nil {
		return nil, 0
	}
	stream, ok := streamIDOf(ctx)
	if !ok {
		return nil, 0
	}
	return b, stream
}

// streamIDIndex caches, per server stream type, the index path of its
// stream id field (nil: it has none): found by name once, as a lookup by
// name through embedded structs allocates on every call.
var streamIDIndex sync.Map // reflect.Type → []int

// streamIDOf is the HTTP/2 stream id of ctx's call. gRPC does not export
// it; its server stream holds it in field id (a test pins this, so a gRPC
// release that moves it fails there rather than serving without a budget).
func streamIDOf(ctx context.Context) (uint32, bool) {
	st := grpc.ServerTransportStreamFromContext(ctx)
	if st == nil {
		return 0, false
	}
	v := reflect.ValueOf(st)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	t := v.Elem().Type()
	cached, ok := streamIDIndex.Load(t)
	if !ok {
		var index []int
		if f, found := t.FieldByName("id"); found && f.Type.Kind() == reflect.Uint32 {
			index = f.Index
		}
		cached, _ = streamIDIndex.LoadOrStore(t, index)
	}
	index := cached.([]int)
	if index == nil {
		return 0, false
	}
	id, err := v.Elem().FieldByIndexErr(index)
	if err != nil || id.Kind() != reflect.Uint32 {
		return 0, false
	}
	return uint32(id.Uint()), true
}

// AnswerSize is what answer m is charged: its encoding and the gRPC
// message prefix.
func AnswerSize(m proto.Message) int { return proto.Size(m) + messagePrefixLen }
