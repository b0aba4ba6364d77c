package grpcserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// answering serves /test.Answers/Get: an answer of as many bytes as asked,
// charged to the connection's answer budget as a fetch's is: at once if
// it fits, else cut to the room it waits for.
type answering struct{ started, handed atomic.Int64 }

func (a *answering) get(ctx context.Context, in *wrapperspb.UInt32Value) (*wrapperspb.BytesValue, error) {
	a.started.Add(1)
	out := &wrapperspb.BytesValue{Value: make([]byte, in.GetValue())}
	charge, ok := TryReserveAnswer(ctx, AnswerSize(out))
	if !ok {
		charge = ReserveAnswer(ctx, ctx, AnswerSize(out))
		if charge.Bytes() < AnswerSize(out) {
			out.Value = out.Value[:max(charge.Bytes()-16, 0)]
		}
	}
	charge.Queue(AnswerSize(out))
	a.handed.Add(1)
	return out, nil
}

func (a *answering) register(s grpc.ServiceRegistrar) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Answers",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := &wrapperspb.UInt32Value{}
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) { return a.get(ctx, req.(*wrapperspb.UInt32Value)) }
			return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/test.Answers/Get"}, h)
		}}},
	}, a)
}

func startAnswering(t testing.TB, budget int) (*Server, *answering, string) {
	t.Helper()
	s := New(Options{AnswerBytesPerConnection: budget})
	a := &answering{}
	a.register(s)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s, a, lis.Addr().String()
}

// rawClient speaks HTTP/2 by hand, so it can leave the server's answers
// unread: it grants no flow-control window until told to read.
type rawClient struct {
	conn net.Conn
	fr   *http2.Framer
	hbuf []byte
	enc  *hpack.Encoder
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return newRaw(t, conn)
}

func newRaw(t *testing.T, conn net.Conn) *rawClient {
	t.Helper()
	t.Cleanup(func() { conn.Close() })
	c := &rawClient{conn: conn, fr: http2.NewFramer(conn, conn)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(writerFunc(func(p []byte) (int, error) { c.hbuf = append(c.hbuf, p...); return len(p), nil }))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// call opens stream id calling method with req, without waiting.
func (c *rawClient) call(t *testing.T, id uint32, method string, req proto.Message) {
	t.Helper()
	c.hbuf = c.hbuf[:0]
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "tidemark"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	msg, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	data := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	if err := c.fr.WriteData(id, true, append(data, msg...)); err != nil {
		t.Fatal(err)
	}
}

// readAll grants the streams all the window they need and reads until
// every one of them has ended, returning each stream's DATA bytes and
// grpc-status.
func (c *rawClient) readAll(t *testing.T, ids []uint32) (data map[uint32]int, statuses map[uint32]string) {
	t.Helper()
	_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := c.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := c.fr.WriteWindowUpdate(id, 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	data, statuses = map[uint32]int{}, map[uint32]string{}
	for len(statuses) < len(ids) {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading answers (%d of %d ended): %v", len(statuses), len(ids), err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = c.fr.WritePing(true, f.Data)
			}
		case *http2.DataFrame:
			data[f.StreamID] += len(f.Data())
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				statuses[f.StreamID] = "none"
				for _, hf := range f.Fields {
					if hf.Name == "grpc-status" {
						statuses[f.StreamID] = hf.Value
					}
				}
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset: %v", f.StreamID, f.ErrCode)
		}
	}
	return data, statuses
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAnswersAClientDoesNotReadAreBoundedByItsBudget(t *testing.T) {
	const budget, size, calls = 1 << 20, 200 << 10, 32
	s, a, addr := startAnswering(t, budget)
	c := dialRaw(t, addr)
	var ids []uint32
	for i := range calls {
		id := uint32(2*i + 1)
		ids = append(ids, id)
		c.call(t, id, "/test.Answers/Get", wrapperspb.UInt32(size))
	}
	// Nothing is read: no answer can leave, so the budget admits as many
	// as it holds (5 of 200 KiB in 1 MiB) and the others wait for room.
	waitUntil(t, "every call is in its handler", func() bool { return a.started.Load() == calls })
	fits := int64(budget / AnswerSize(&wrapperspb.BytesValue{Value: make([]byte, size)}))
	waitUntil(t, "the answers that fit are handed to gRPC", func() bool { return a.handed.Load() >= fits })
	if n := a.handed.Load(); n != fits {
		t.Fatalf("%d answers of %d bytes handed to gRPC for a client that reads nothing; the budget of %d holds %d", n, size, budget, fits)
	}
	if total, largest := s.AnswerBytesReserved(); largest > budget || total != largest {
		t.Fatalf("reserved %d on the connection (%d in all), budget %d", largest, total, budget)
	}

	// Once the client reads, every call is answered in full, and the
	// budget is whole again.
	data, statuses := c.readAll(t, ids)
	for _, id := range ids {
		if statuses[id] != "0" || data[id] != AnswerSize(&wrapperspb.BytesValue{Value: make([]byte, size)}) {
			t.Fatalf("stream %d: %d bytes, grpc-status %q; want the whole answer and OK", id, data[id], statuses[id])
		}
	}
	waitUntil(t, "the budget is free again", func() bool { total, _ := s.AnswerBytesReserved(); return total == 0 })
}

func TestAnAnswerItsClientResetFreesItsBudget(t *testing.T) {
	const budget, size, calls = 1 << 20, 300 << 10, 8
	s, a, addr := startAnswering(t, budget)
	c := dialRaw(t, addr)
	for i := range calls {
		c.call(t, uint32(2*i+1), "/test.Answers/Get", wrapperspb.UInt32(size))
	}
	waitUntil(t, "every call is in its handler", func() bool { return a.started.Load() == calls })
	waitUntil(t, "3 answers are handed to gRPC", func() bool { return a.handed.Load() == 3 })
	// The client gives up on the three answered calls, unread: gRPC drops
	// their answers, and the calls waiting for room get it.
	for _, id := range []uint32{1, 3, 5} {
		if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "3 more answers are handed to gRPC", func() bool { return a.handed.Load() == 6 })
	for i := range calls {
		if err := c.fr.WriteRSTStream(uint32(2*i+1), http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "every call is over and the budget free", func() bool {
		total, _ := s.AnswerBytesReserved()
		return a.handed.Load() == calls && total == 0
	})
}

func TestClosingAConnectionFreesItsBudget(t *testing.T) {
	const budget, size, calls = 1 << 20, 300 << 10, 4
	s, a, addr := startAnswering(t, budget)
	c := dialRaw(t, addr)
	for i := range calls {
		c.call(t, uint32(2*i+1), "/test.Answers/Get", wrapperspb.UInt32(size))
	}
	waitUntil(t, "3 answers are handed to gRPC", func() bool { return a.handed.Load() == 3 && a.started.Load() == calls })
	c.conn.Close()
	waitUntil(t, "the connection's budget is gone", func() bool {
		total, _ := s.AnswerBytesReserved()
		return a.handed.Load() == calls && total == 0
	})
}

// The frames and messages are found whatever pieces the bytes come in.
func TestFramesAreFollowedAcrossAnyWrites(t *testing.T) {
	var wire []byte
	frame := func(typ, flags byte, stream uint32, payload []byte) {
		wire = append(wire, byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload)), typ, flags)
		wire = binary.BigEndian.AppendUint32(wire, stream)
		wire = append(wire, payload...)
	}
	message := func(n int) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(n)), make([]byte, n)...)
	}
	two := append(message(3), message(0)...)
	frame(0x4, 0, 0, nil)                  // SETTINGS
	frame(frameHeaders, 0x4, 1, []byte{1}) // response headers
	frame(frameData, 0, 1, two[:4])
	frame(frameData, 0, 1, two[4:])
	messagesEnd := len(wire)
	frame(frameHeaders, 0x5, 1, []byte{1}) // trailers
	frame(frameRSTStream, 0, 3, []byte{0, 0, 0, 8})
	for piece := 1; piece <= len(wire); piece++ {
		b := newAnswerBudget(100, &atomic.Int64{})
		b.clientOpened(1)
		b.clientOpened(3)
		for _, id := range []uint32{1, 1, 3} {
			if !b.tryTake(10) {
				t.Fatal("no room")
			}
			b.queue(id, 10, 10)
		}
		var f frameScanner
		h := serverFrames{b}
		scan := func(from, to int) {
			for i := from; i < to; i += piece {
				f.scan(wire[i:min(i+piece, to)], h)
			}
		}
		scan(0, messagesEnd-1)
		if b.held() != 20 {
			t.Fatalf("pieces of %d: %d held with one of stream 1's messages written, want 20", piece, b.held())
		}
		scan(messagesEnd-1, messagesEnd)
		if b.held() != 10 {
			t.Fatalf("pieces of %d: %d held with stream 1's messages written, want stream 3's 10", piece, b.held())
		}
		scan(messagesEnd, len(wire))
		if b.held() != 0 || len(b.streams) != 0 {
			t.Fatalf("pieces of %d: %d held and %d streams left, want none", piece, b.held(), len(b.streams))
		}
	}
}

// Over TLS the budget follows the frames in the clear, after the
// handshake, and finds the connection by the same addresses.
func TestAnswersOverTLSAreBoundedToo(t *testing.T) {
	const budget, size, calls = 1 << 20, 200 << 10, 16
	ca, err := pki.NewCA("answers-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{Name: "server"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	answers := newAnswerBudgets(budget)
	gs := grpc.NewServer(grpc.Creds(answerCreds{TransportCredentials: tlsconf.Credentials(&tls.Config{Certificates: []tls.Certificate{cert}}), budgets: answers}),
		grpc.ChainUnaryInterceptor(answers.unary()))
	a := &answering{}
	a.register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{RootCAs: certPool(t, ca), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	c := newRaw(t, conn)
	var ids []uint32
	for i := range calls {
		ids = append(ids, uint32(2*i+1))
		c.call(t, ids[i], "/test.Answers/Get", wrapperspb.UInt32(size))
	}
	fits := int64(budget / AnswerSize(&wrapperspb.BytesValue{Value: make([]byte, size)}))
	waitUntil(t, "the answers that fit are handed to gRPC", func() bool { return a.started.Load() == calls && a.handed.Load() >= fits })
	if n := a.handed.Load(); n != fits {
		t.Fatalf("%d answers handed to gRPC over TLS for a client that reads nothing; the budget holds %d", n, fits)
	}
	data, statuses := c.readAll(t, ids)
	for _, id := range ids {
		if statuses[id] != "0" || data[id] != AnswerSize(&wrapperspb.BytesValue{Value: make([]byte, size)}) {
			t.Fatalf("stream %d: %d bytes, grpc-status %q; want the whole answer and OK", id, data[id], statuses[id])
		}
	}
	waitUntil(t, "the budget is free again", func() bool { total, _ := answers.reserved(); return total == 0 })
}

func certPool(t *testing.T, ca *pki.CA) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM) {
		t.Fatal("CA PEM")
	}
	return pool
}

// A call's stream id is read without allocating (it is read for every
// answer charged), and is the id the client opened the stream with.
func TestStreamIDIsReadWithoutAllocating(t *testing.T) {
	s := New(Options{AnswerBytesPerConnection: 1 << 20})
	type seen struct {
		id     uint32
		ok     bool
		allocs float64
	}
	got := make(chan seen, 1)
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Ids",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := &wrapperspb.UInt32Value{}
			if err := dec(in); err != nil {
				return nil, err
			}
			id, ok := streamIDOf(ctx)
			got <- seen{id: id, ok: ok, allocs: testing.AllocsPerRun(100, func() { streamIDOf(ctx) })}
			return &wrapperspb.BytesValue{}, nil
		}}},
	}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	c := dialRaw(t, lis.Addr().String())
	c.call(t, 7, "/test.Ids/Get", wrapperspb.UInt32(0))
	select {
	case g := <-got:
		if !g.ok || g.id != 7 {
			t.Fatalf("stream id read as %d (found %v), want 7", g.id, g.ok)
		}
		if g.allocs != 0 {
			t.Fatalf("reading the stream id allocated %.0f times per call", g.allocs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached its handler")
	}
}
