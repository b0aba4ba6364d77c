package grpcapi

import (
	"context"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// A client that sends and never reads its answers fills the stream's
// windows with them; the broker must then stop reading the stream, not
// start a worker per request that parks on the blocked Send.
func TestAStalledProduceStreamHoldsABoundedNumberOfGoroutines(t *testing.T) {
	var received, sent atomic.Int64
	client := startCountingBroker(t, &received, &sent)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := client.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// One exchange first: the stream, its handler and a worker are up.
	if err := stream.Send(&brokerv1.ProduceStreamRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()

	// Empty requests, each answered at once with its error: enough answers
	// to fill the client's stream window and the server's write quota
	// (64 KiB each) twice over, then 300 more.
	answer := proto.Size(&brokerv1.ProduceStreamResponse{CorrelationId: 1 << 20,
		Error: errorDetail(kerr.BadField(kerr.InvalidRequest, "request", "is missing"))})
	n := 4*64<<10/(answer+5) + 300
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		for id := 1; id <= n; id++ {
			if stream.Send(&brokerv1.ProduceStreamRequest{CorrelationId: uint64(id)}) != nil {
				return // the test ended
			}
		}
	}()

	unsent := func() int64 { return received.Load() - sent.Load() }
	waitUntil(t, "the broker holds more answers than it can send", func() bool {
		return unsent() > maxUnsentProduceAnswers
	})
	// Watch the stalled stream a while: it must neither read on nor grow.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if grown := runtime.NumGoroutine() - before; grown >= 50 {
			t.Fatalf("a stalled produce stream grew the server by %d goroutines (%d requests read, %d answers sent)",
				grown, received.Load(), sent.Load())
		}
	}
	if got := unsent(); got > maxUnsentProduceAnswers+1 {
		t.Fatalf("the broker read on to %d answers not sent; want at most %d", got, maxUnsentProduceAnswers+1)
	}

	// The client reads again: every request is answered.
	answered := make(map[uint64]bool, n)
	for len(answered) < n {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d answers: %v", len(answered), err)
		}
		if resp.GetError() == nil || answered[resp.GetCorrelationId()] {
			t.Fatalf("unexpected answer %v", resp)
		}
		answered[resp.GetCorrelationId()] = true
	}
	<-sending
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the last answer: %v, want the stream's end", err)
	}
}

// startCountingBroker serves a Broker with no replicas over loopback TCP and
// counts the stream messages it reads and sends. The client's windows are
// static (64 KiB): an unread stream fills them, as one of a client that
// stopped reading does.
func startCountingBroker(t *testing.T, received, sent *atomic.Int64) brokerv1.BrokerServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &countingStream{ServerStream: ss, received: received, sent: sent})
	}))
	brokerv1.RegisterBrokerServiceServer(srv, &Broker{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return brokerv1.NewBrokerServiceClient(conn)
}

type countingStream struct {
	grpc.ServerStream
	received, sent *atomic.Int64
}

func (c *countingStream) RecvMsg(m any) error {
	err := c.ServerStream.RecvMsg(m)
	if err == nil {
		c.received.Add(1)
	}
	return err
}

func (c *countingStream) SendMsg(m any) error {
	err := c.ServerStream.SendMsg(m)
	if err == nil {
		c.sent.Add(1)
	}
	return err
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}
