package kafkaapi

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/peer"

	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// conn is one client connection. A reader decodes requests and starts each
// in its own goroutine; a writer sends the answers strictly in the order the
// requests arrived (Kafka's rule: clients match answers to requests by
// order as well as correlation id), so pipelined requests run at once yet
// answer in order. The queue between them holds at most MaxInFlight
// requests: when it is full the reader stops reading. The answers built
// and not yet written are bounded in bytes too (MaxQueuedAnswerBytes): at
// the bound the reader stops reading and the next request waits to start,
// until the client reads. So are the requests read and not yet answered
// (MaxRequestBytes): at the bound the reader stops until one is answered.
type conn struct {
	s        *Server
	listener Listener
	nc       net.Conn
	// closer is what close closes: nc, the TLS connection once the
	// handshake made it. Server.Close closes from its own goroutine
	// while serve may be replacing nc.
	closer    atomic.Pointer[net.Conn]
	principal identity.Principal
	session   saslSession // SASL listeners: the login (reader goroutine only)
	queue     chan *pending
	inFlight  atomic.Int32
	// lastAnswer is when the last request stopped being in flight (its
	// answer written), in Unix nanoseconds: the idle time counts from it.
	lastAnswer atomic.Int64
	// lastTurn is released when the last request read may let the next
	// one start (readLoop only).
	lastTurn chan struct{}
	// closing is set once a request asked to close the connection
	// (reqCtx.closeConn), before it lets the next one start: a request
	// after it that has not started does not run.
	closing atomic.Bool

	backlogMu sync.Mutex
	backlog   int64 // bytes of answers built and not yet written or dropped
	// readAhead is the bytes of the requests read whose answers are not
	// yet written or dropped: their bodies are still held.
	readAhead int64
	drained   chan struct{} // closed (and replaced) when backlog or readAhead goes down

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// pending is one request's place in the answer order.
type pending struct {
	done  chan struct{}
	frame []byte // nil: no answer (acks=0)
	// held is the bytes of frame counted in the connection's backlog;
	// gone is set once the writer is done with it (both under backlogMu).
	held int64
	gone bool
	// body is the bytes of its request counted in the connection's
	// readAhead (under backlogMu).
	body int64
	// cost bounds what its decoding allocated (decodeCost), counted in
	// readAhead with its body: the decoded request lives as long.
	cost int64
	// flushed, when set, is closed once the writer is done with this
	// answer and every one before it (flushAnswers).
	flushed chan struct{}
	// closeConn: the writer closes the connection here, after the answers
	// before this one (reqCtx.closeConn).
	closeConn bool
}

// reqCtx is what a handler knows about its request beyond the body.
type reqCtx struct {
	header    requestHeader
	principal identity.Principal
	// listener names the listener the request arrived on: answers that
	// name brokers give their endpoints for it.
	listener string
	// after is released when the previous request of the connection lets
	// this one start; turn is this request's own, released by release.
	after, turn chan struct{}
	once        sync.Once
	// closeConn, set by the handler, closes the connection once the
	// answers to the requests before this one are written, with no answer
	// to it or to any request after it: what Kafka does where the client
	// must learn something an answer cannot tell it (an acks=0 write that
	// failed; a broker that cannot describe the cluster). Kafka reads a
	// connection's next request only once it is done with the last, so
	// nothing after it is answered, and the requests after it that have
	// not started do not run (an acks=0 produce lets the next start only
	// once it is done).
	closeConn atomic.Bool
}

// release lets the connection's next request start. A produce releases
// once its batches are appended (Kafka appends one connection's requests
// in order: a producer's pipelined batches must not overtake each other);
// a fetch once its answer is built, so one connection builds one fetch
// answer at a time and the backlog bound holds for fetches pipelined at
// once (as Kafka, which reads a connection's next request only once it
// has answered the last; consumers send one fetch per connection at a
// time); a Metadata once answered, as it may close the connection (a
// fenced broker), and then nothing after it may run; every other request
// at once.
func (rc *reqCtx) release() { rc.once.Do(func() { close(rc.turn) }) }

func (s *Server) newConn(nc net.Conn, l Listener) *conn {
	c := &conn{s: s, listener: l, nc: nc, principal: identity.Anon, queue: make(chan *pending, s.opts.Limits.MaxInFlight), lastTurn: make(chan struct{}),
		drained: make(chan struct{})}
	close(c.lastTurn)
	c.closer.Store(&nc)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

func (c *conn) close() {
	c.once.Do(func() {
		c.cancel()
		_ = (*c.closer.Load()).Close()
	})
}

func (c *conn) serve() {
	defer c.close()
	if c.listener.TLS != nil {
		tc := tls.Server(c.nc, c.listener.TLS)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.HandshakeContext(c.ctx); err != nil {
			c.s.log.Debug("kafka TLS handshake failed", "remote", c.nc.RemoteAddr().String(), "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
		cs := tc.ConnectionState()
		c.principal = identity.FromTLS(&cs)
		c.nc = tc
		var nc net.Conn = tc
		c.closer.Store(&nc)
	}
	if c.listener.SASL {
		if err := c.authenticate(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, errAuthLogged) {
				if n, ok := c.clientLine("close"); ok {
					c.s.log.Info("closing kafka connection", "remote", c.remote(), "err", err, "unlogged_since_last", n)
				}
			}
			return
		}
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoop()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, context.Canceled) && !errors.Is(err, errAuthLogged) {
		if n, ok := c.clientLine("close"); ok {
			c.s.log.Info("closing kafka connection", "remote", c.nc.RemoteAddr().String(), "principal", c.principal.String(), "err", err,
				"unlogged_since_last", n)
		}
	}
	// A client that left or broke the protocol gets no more answers: end
	// its parked requests (long polls, acks=all waits) now.
	c.close()
	close(c.queue)
	<-writerDone
}

// readLoop reads requests until the connection fails or a request is one
// Kafka would close the connection for (bad size, unknown API or version,
// undecodable body), or one too costly to decode (decodeCost).
func (c *conn) readLoop() error {
	limits := c.s.opts.Limits
	var size [4]byte
	for {
		// Muted while the client leaves its answers unread, or while the
		// requests read ahead hold socket.request.max.bytes.
		if err := c.waitReadable(); err != nil {
			return err
		}
		// The size may arrive in pieces: what was read before a deadline
		// passed (with requests in flight) is kept, not read again.
		deadline := time.Now().Add(limits.IdleTimeout)
		for got := 0; got < len(size); {
			_ = c.nc.SetReadDeadline(deadline)
			k, err := io.ReadFull(c.nc, size[got:])
			got += k
			if err == nil {
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && c.inFlight.Load() > 0 {
				deadline = time.Now().Add(limits.IdleTimeout)
				continue // waiting on its own answers is not idle
			}
			// Idle from the last answer on, as Kafka counts from the last
			// bytes sent: a request in flight past the deadline left the
			// client only what remained of it after its answer.
			if last := time.Unix(0, c.lastAnswer.Load()); errors.As(err, &ne) && ne.Timeout() && time.Since(last) < limits.IdleTimeout {
				deadline = last.Add(limits.IdleTimeout)
				continue
			}
			if errors.As(err, &ne) && ne.Timeout() {
				c.s.metrics.closed.WithLabelValues("idle").Inc()
				return fmt.Errorf("idle for %s (connections.max.idle.ms)", limits.IdleTimeout)
			}
			return err
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 10 || n > limits.MaxRequestBytes {
			c.s.metrics.closed.WithLabelValues("protocol").Inc()
			return fmt.Errorf("request size %d is outside [10, %d] (socket.request.max.bytes)", n, limits.MaxRequestBytes)
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(limits.IdleTimeout))
		body, err := readBody(c.nc, int(n))
		if err != nil {
			return err
		}
		reauthenticated, err := c.sessionGate(body)
		if err != nil {
			return err
		}
		if reauthenticated {
			continue
		}
		p, rc, req, err := c.decode(body)
		if err != nil {
			c.s.metrics.closed.WithLabelValues("protocol").Inc()
			return err
		}
		c.holdRequest(p, len(body)+int(p.cost))
		c.inFlight.Add(1)
		select {
		case c.queue <- p:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
		if p.frame != nil { // answered while decoding
			c.hold(p)
			close(p.done)
			continue
		}
		rc.after, rc.turn = c.lastTurn, make(chan struct{})
		c.lastTurn = rc.turn
		go c.run(p, rc, req)
	}
}

// firstBodyChunk is what a request's buffer starts at: most requests fit,
// and a larger one grows it as its bytes arrive.
const firstBodyChunk = 64 << 10

// readBody reads a frame's n bytes into a buffer that grows with the bytes
// read, at most doubling, not with the size the client claims: a size of
// socket.request.max.bytes and then nothing (or a disconnect) held that
// much memory per connection, 100 MiB for 14 bytes sent.
func readBody(r io.Reader, n int) ([]byte, error) {
	body := make([]byte, 0, min(n, firstBodyChunk))
	for len(body) < n {
		if len(body) == cap(body) {
			body = append(make([]byte, 0, min(n, 2*cap(body))), body...)
		}
		k, err := io.ReadFull(r, body[len(body):cap(body)])
		body = body[:len(body)+k]
		if errors.Is(err, io.EOF) && len(body) > 0 {
			err = io.ErrUnexpectedEOF // as one ReadFull of the frame says it
		}
		if err != nil {
			return nil, err
		}
	}
	return body, nil
}

// decode parses a request. An ApiVersions of a version this listener does
// not know is answered (v0, UNSUPPORTED_VERSION, the version list) so the
// client can downgrade; any other unknown API or version closes the
// connection, as Kafka does.
func (c *conn) decode(body []byte) (*pending, *reqCtx, kmsg.Request, error) {
	h, rest, err := parseHeaderStart(body)
	if err != nil {
		return nil, nil, nil, err
	}
	p := &pending{done: make(chan struct{})}
	a, ok := c.s.table[h.Key]
	if !ok {
		return nil, nil, nil, fmt.Errorf("api key %d is not served", h.Key)
	}
	if h.Version < a.versions.Min || h.Version > a.versions.Max {
		if h.Key == int16(kmsg.ApiVersions) && h.Version > a.versions.Max {
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.ErrorCode = int16(kerr.UnsupportedVersion)
			c.s.fillApiVersions(resp)
			p.frame = finishFrame(resp.AppendTo(appendResponseHeader(nil, h.CorrelationID, false)))
			return p, nil, nil, nil
		}
		return nil, nil, nil, fmt.Errorf("%s version %d is outside [%d, %d]", kmsg.NameForKey(h.Key), h.Version, a.versions.Min, a.versions.Max)
	}
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return nil, nil, nil, fmt.Errorf("%s header: %w", kmsg.NameForKey(h.Key), err)
		}
	}
	if p.cost, err = decodeCost(h.Key, h.Version, rest, c.s.opts.Limits.MaxRequestBytes); err != nil {
		return nil, nil, nil, err
	}
	if err := req.ReadFrom(rest); err != nil {
		return nil, nil, nil, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)
	}
	c.s.metrics.requests.WithLabelValues(kmsg.NameForKey(h.Key)).Inc()
	return p, &reqCtx{header: h, principal: c.principal, listener: c.listener.Name}, req, nil
}

// run answers one request. A handler that panics closes the connection
// (the client retries elsewhere) instead of the broker.
func (c *conn) run(p *pending, rc *reqCtx, req kmsg.Request) {
	defer close(p.done)
	defer rc.release()
	select {
	case <-rc.after:
	case <-c.ctx.Done():
		return
	}
	if c.closing.Load() {
		return // a request before this one closes the connection
	}
	// In request order: the next request waits on this one's release.
	if c.waitBacklog() != nil {
		return
	}
	switch rc.header.Key {
	case int16(kmsg.Produce): // once appended (the handler)
	case int16(kmsg.Fetch): // once answered (deferred)
	case int16(kmsg.Metadata): // once answered: it may close the connection
	default:
		rc.release()
	}
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("kafka handler panicked; closing the connection", "api", kmsg.NameForKey(rc.header.Key),
				"version", rc.header.Version, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			p.frame = nil
			c.close()
		}
	}()
	ctx := identity.With(c.ctx, rc.principal)
	// The client's address and id, as the group coordinator records them
	// for its members (gRPC callers carry the same in their peer).
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: c.nc.RemoteAddr()})
	ctx = context.WithValue(ctx, clientIDKey{}, rc.header.ClientID)
	ctx = WithListenerName(ctx, rc.listener)
	resp := c.s.table[rc.header.Key].handle(ctx, rc, req)
	if rc.closeConn.Load() {
		// Before the deferred release lets the next request start.
		c.s.metrics.closed.WithLabelValues("handler").Inc()
		c.closing.Store(true)
		p.frame, p.closeConn = nil, true
		return
	}
	if resp == nil {
		return
	}
	resp.SetVersion(rc.header.Version)
	flexible := resp.IsFlexible() && rc.header.Key != int16(kmsg.ApiVersions)
	p.frame = finishFrame(resp.AppendTo(appendResponseHeader(nil, rc.header.CorrelationID, flexible)))
	c.hold(p)
}

// writeLoop sends answers in request order. Nothing is written once the
// connection is closing, though its socket may not be closed yet: an
// answer done by then belongs to a request after the one that closed it,
// or to a client that is gone (the select below takes either of two
// ready cases, so it is checked after).
func (c *conn) writeLoop() {
	for p := range c.queue {
		select {
		case <-p.done:
		case <-c.ctx.Done():
		}
		if c.ctx.Err() == nil { // so p is done
			c.send(p)
		}
		// Written, then no longer in flight: the reader never sees both
		// no request in flight and an older last answer.
		c.lastAnswer.Store(time.Now().UnixNano())
		c.inFlight.Add(-1)
		c.unhold(p)
		c.flushed(p)
	}
}

// send writes p's answer, if any, then closes the connection if its
// request asked to.
func (c *conn) send(p *pending) {
	if p.frame != nil {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.Limits.IdleTimeout))
		if _, err := c.nc.Write(p.frame); err != nil {
			c.close()
			return
		}
	}
	if p.closeConn {
		c.close()
	}
}

// flushed tells a reader waiting on p (flushAnswers) that the writer is
// past it.
func (c *conn) flushed(p *pending) {
	if p.flushed != nil {
		close(p.flushed)
	}
}

// hold counts p's answer in the connection's backlog until the writer is
// done with it; an answer the writer gave up on (the connection closed)
// is not counted.
func (c *conn) hold(p *pending) {
	c.backlogMu.Lock()
	defer c.backlogMu.Unlock()
	if p.gone || len(p.frame) == 0 {
		return
	}
	p.held = int64(len(p.frame))
	c.backlog += p.held
	c.s.metrics.queued.Add(float64(p.held))
}

// holdRequest counts p's request, size bytes, in the connection's
// readAhead until the writer is done with its answer.
func (c *conn) holdRequest(p *pending, size int) {
	c.backlogMu.Lock()
	defer c.backlogMu.Unlock()
	p.body = int64(size)
	c.readAhead += p.body
}

// unhold ends p's place in the backlog and its request's in readAhead,
// written or dropped.
func (c *conn) unhold(p *pending) {
	c.backlogMu.Lock()
	defer c.backlogMu.Unlock()
	p.gone = true
	if p.held == 0 && p.body == 0 {
		return
	}
	c.backlog -= p.held
	c.s.metrics.queued.Sub(float64(p.held))
	c.readAhead -= p.body
	p.held, p.body = 0, 0
	close(c.drained)
	c.drained = make(chan struct{})
}

// waitBacklog waits while the connection's unwritten answers are at
// MaxQueuedAnswerBytes: the client is not reading them, and reading or
// starting more requests would only pile more up.
func (c *conn) waitBacklog() error {
	return c.waitUntil(func() bool { return c.backlog < c.s.opts.Limits.MaxQueuedAnswerBytes })
}

// waitReadable is waitBacklog for the reader, which also waits while the
// requests read ahead of their answers hold MaxRequestBytes: a client
// pipelining requests that wait (their turn, a quota, a long poll) held
// MaxInFlight bodies of up to MaxRequestBytes each (32 × 100 MiB by
// default), where Kafka holds one request.
func (c *conn) waitReadable() error {
	return c.waitUntil(func() bool {
		return c.backlog < c.s.opts.Limits.MaxQueuedAnswerBytes && c.readAhead < int64(c.s.opts.Limits.MaxRequestBytes)
	})
}

// waitUntil waits until ready, called under backlogMu, holds.
func (c *conn) waitUntil(ready func() bool) error {
	for {
		c.backlogMu.Lock()
		if ready() {
			c.backlogMu.Unlock()
			return nil
		}
		drained := c.drained
		c.backlogMu.Unlock()
		select {
		case <-drained:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
}

type clientIDKey struct{}

// ClientID is the client.id of the Kafka request ctx answers, or "".
func ClientID(ctx context.Context) string {
	id, _ := ctx.Value(clientIDKey{}).(string)
	return id
}
