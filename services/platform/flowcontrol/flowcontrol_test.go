package flowcontrol_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/grpcserver"
)

// tap records every byte written on a connection.
type tap struct {
	net.Conn
	mu  *sync.Mutex
	out *bytes.Buffer
}

func (t tap) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.out.Write(p)
	t.mu.Unlock()
	return t.Conn.Write(p)
}

// pings counts the PING frames (acks included) in one direction's bytes.
func pings(t *testing.T, raw []byte, preface bool) int {
	t.Helper()
	if preface {
		raw = bytes.TrimPrefix(raw, []byte(http2.ClientPreface))
	}
	fr := http2.NewFramer(io.Discard, bytes.NewReader(raw))
	n := 0
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n
		}
		if err != nil {
			t.Fatalf("parse frames: %v", err)
		}
		if _, ok := f.(*http2.PingFrame); ok {
			n++
		}
	}
}

// server starts a gRPC server with the Health service on lis.
type server func(t *testing.T, lis net.Listener)

// dialer makes a client connection to addr through dial.
type dialer func(t *testing.T, addr string, dial func(context.Context, string) (net.Conn, error)) *grpc.ClientConn

// exchange makes calls one after the other, each waiting for its answer,
// and returns the PING frames each side wrote.
func exchange(t *testing.T, serve server, connect dialer, calls int) (fromClient, fromServer int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var cOut, sOut bytes.Buffer
	serve(t, tapListener{lis, &mu, &sOut})
	cc := connect(t, lis.Addr().String(), func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return tap{c, &mu, &cOut}, nil
	})
	hc := healthpb.NewHealthClient(cc)
	for range calls {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	_ = cc.Close()
	mu.Lock()
	defer mu.Unlock()
	return pings(t, cOut.Bytes(), true), pings(t, sOut.Bytes(), false)
}

// grpc's defaults: a dynamic window on both ends.
func plainServer(t *testing.T, lis net.Listener) {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

func plainDial(t *testing.T, addr string, dial func(context.Context, string) (net.Conn, error)) *grpc.ClientConn {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// tidemark's: every server is a grpcserver, every data-path connection
// comes from a connpool.
func tidemarkServer(t *testing.T, lis net.Listener) {
	srv := grpcserver.New(grpcserver.Options{})
	srv.MarkAllServing()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(context.Background()) })
}

func tidemarkDial(t *testing.T, addr string, dial func(context.Context, string) (net.Conn, error)) *grpc.ClientConn {
	pool := connpool.New(grpc.WithContextDialer(dial))
	t.Cleanup(func() { _ = pool.Close() })
	cc, err := pool.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

type tapListener struct {
	net.Listener
	mu  *sync.Mutex
	out *bytes.Buffer
}

func (l tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tap{c, l.mu, l.out}, nil
}

// With the fixed windows, messages exchanged one at a time draw no PING
// frames; with gRPC's dynamic window they draw several per message (the
// control run shows the test can see them).
func TestStaticWindowsSendNoPings(t *testing.T) {
	const calls = 50
	c0, s0 := exchange(t, plainServer, plainDial, calls)
	if c0+s0 < calls {
		t.Fatalf("control: the dynamic window drew %d+%d PING frames over %d calls; the test no longer sees what it checks", c0, s0, calls)
	}
	c, s := exchange(t, tidemarkServer, tidemarkDial, calls)
	if c+s != 0 {
		t.Fatalf("grpcserver and connpool: %d PING frames from the client and %d from the server over %d calls, want none", c, s, calls)
	}
	t.Logf("over %d calls: dynamic window %d PING frames, tidemark's static windows none", calls, c0+s0)
}
