package grpcserver

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// answerBudgets are a server's connections' answer budgets, found by a
// call's peer addresses.
type answerBudgets struct {
	limit int64
	waits atomic.Int64
	mu    sync.Mutex
	conns map[string][]*answerBudget // more than one: addresses that do not tell connections apart; none applies
}

func newAnswerBudgets(limit int) *answerBudgets {
	return &answerBudgets{limit: int64(limit), conns: map[string][]*answerBudget{}}
}

func connKey(local, remote net.Addr) string {
	if local == nil || remote == nil {
		return ""
	}
	return local.String() + " " + remote.String()
}

// track gives c a budget, learnt from its bytes. c carries HTTP/2 in the
// clear: a TLS connection is tracked once its handshake is done.
func (r *answerBudgets) track(c net.Conn) net.Conn {
	b := newAnswerBudget(r.limit, &r.waits)
	key := connKey(c.LocalAddr(), c.RemoteAddr())
	r.mu.Lock()
	r.conns[key] = append(r.conns[key], b)
	r.mu.Unlock()
	return &answerConn{Conn: c, budget: b, in: frameScanner{skip: clientPrefaceLen}, forget: func() { r.forget(key, b) }}
}

func (r *answerBudgets) forget(key string, b *answerBudget) {
	r.mu.Lock()
	defer r.mu.Unlock()
	left := r.conns[key][:0]
	for _, o := range r.conns[key] {
		if o != b {
			left = append(left, o)
		}
	}
	if len(left) == 0 {
		delete(r.conns, key)
	} else {
		r.conns[key] = left
	}
}

// of is the budget of the connection ctx's call came on.
func (r *answerBudgets) of(ctx context.Context) *answerBudget {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if bs := r.conns[connKey(p.LocalAddr, p.Addr)]; len(bs) == 1 {
		return bs[0]
	}
	return nil
}

// reserved is what the connections' answers hold: in all, and on the
// connection holding most.
func (r *answerBudgets) reserved() (total, largest int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, bs := range r.conns {
		for _, b := range bs {
			n := b.held()
			total += n
			largest = max(largest, n)
		}
	}
	return total, largest
}

// unary and stream put the budgets where ReserveAnswer finds them.
func (r *answerBudgets) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(context.WithValue(ctx, answerBudgetsKey{}, r), req)
	}
}

func (r *answerBudgets) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, budgetStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), answerBudgetsKey{}, r)})
	}
}

type budgetStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s budgetStream) Context() context.Context { return s.ctx }

// answerConn tells its budget what the frames it carries do: the client's
// new streams and resets as they are read, the server's messages and
// stream ends as they are written.
type answerConn struct {
	net.Conn
	budget    *answerBudget
	in, out   frameScanner
	forget    func()
	closeOnce sync.Once
}

func (c *answerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.scan(p[:n], clientFrames{c.budget})
	return n, err
}

func (c *answerConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.scan(p[:n], serverFrames{c.budget})
	return n, err
}

func (c *answerConn) Close() error {
	c.closeOnce.Do(func() {
		c.forget()
		c.budget.close()
	})
	return c.Conn.Close()
}

type clientFrames struct{ b *answerBudget }

func (h clientFrames) frameStart(f *frameScanner) {
	if f.typ == frameHeaders {
		h.b.clientOpened(f.stream)
	}
}

func (h clientFrames) framePayload(*frameScanner, []byte) {}

func (h clientFrames) frameEnd(f *frameScanner) {
	if f.typ == frameRSTStream {
		h.b.ended(f.stream)
	}
}

type serverFrames struct{ b *answerBudget }

func (h serverFrames) frameStart(*frameScanner) {}

func (h serverFrames) framePayload(f *frameScanner, p []byte) {
	if f.typ == frameData {
		h.b.written(f.stream, p)
	}
}

func (h serverFrames) frameEnd(f *frameScanner) {
	if f.endsStream() {
		h.b.ended(f.stream)
	}
}

// answerListener tracks the plaintext connections it accepts.
type answerListener struct {
	net.Listener
	budgets *answerBudgets
}

func (l answerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.budgets.track(c), nil
}

// answerCreds tracks TLS connections once their handshake is done, so the
// frames are read in the clear.
type answerCreds struct {
	credentials.TransportCredentials
	budgets *answerBudgets
}

func (c answerCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return c.budgets.track(conn), info, nil
}

func (c answerCreds) Clone() credentials.TransportCredentials {
	return answerCreds{TransportCredentials: c.TransportCredentials.Clone(), budgets: c.budgets}
}

func registerAnswerGauges(reg prometheus.Registerer, answers *answerBudgets) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tidemark_answer_bytes_reserved",
		Help: "Bytes of answers charged to the connections' answer budgets: being built, or queued and not yet written.",
	}, func() float64 { total, _ := answers.reserved(); return float64(total) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tidemark_answer_bytes_reserved_connection_max",
		Help: "Bytes of answers charged to the answer budget of the connection holding most (max.queued.answer.bytes.per.connection bounds it).",
	}, func() float64 { _, largest := answers.reserved(); return float64(largest) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tidemark_answer_budget_waits_total",
		Help: "Answers that waited for room in their connection's answer budget: its client had not read the answers before them.",
	}, func() float64 { return float64(answers.waits.Load()) }))
}

// AnswerBytesReserved is what the connections' answers hold of their
// budgets: in all, and on the connection holding most. Zero without an
// answer budget.
func (s *Server) AnswerBytesReserved() (total, largest int64) {
	if s.answers == nil {
		return 0, 0
	}
	return s.answers.reserved()
}
