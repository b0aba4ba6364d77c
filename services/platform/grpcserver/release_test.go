package grpcserver

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// releaseService is one unary method whose reply aliases a buffer the
// handler gives back with ReleaseAfterSend; the release scribbles over it.
func releaseService(payload []byte, fail bool, released *atomic.Int32, registered *atomic.Bool) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "tidemark.test.Release",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Get",
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, _ any) (any, error) {
					buf := bytes.Clone(payload) // stands in for a pooled read buffer
					registered.Store(ReleaseAfterSend(ctx, func() {
						clear(buf) // what reuse by the next request would do
						released.Add(1)
					}))
					if fail {
						return nil, status.Error(codes.Unavailable, "refused after reading")
					}
					return &wrapperspb.BytesValue{Value: buf}, nil
				}
				return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/tidemark.test.Release/Get"}, h)
			},
		}},
	}
}

// A reply aliasing a pooled buffer reaches the client whole although the
// buffer is released (and overwritten) as soon as the call is over: the
// reply was encoded first. The release runs exactly once, also when the
// handler fails; outside a gRPC call ReleaseAfterSend declines.
func TestReleaseAfterSendRunsOnceTheReplyIsEncoded(t *testing.T) {
	payload := bytes.Repeat([]byte("record"), 10_000)
	for _, admit := range []bool{false, true} {
		for _, fail := range []bool{false, true} {
			var released atomic.Int32
			var registered atomic.Bool
			o := Options{}
			if admit {
				o.Admit = func([]byte, any) error { return nil }
			}
			s := New(o)
			s.RegisterService(releaseService(payload, fail, &released, &registered), struct{}{})
			s.MarkAllServing()
			addr := serveOn(t, s)
			conn := dial(t, addr)
			out := new(wrapperspb.BytesValue)
			err := conn.Invoke(context.Background(), "/tidemark.test.Release/Get", wrapperspb.String("x"), out)
			switch {
			case !registered.Load():
				t.Fatalf("admit=%v fail=%v: ReleaseAfterSend declined inside a gRPC call", admit, fail)
			case fail && status.Code(err) != codes.Unavailable:
				t.Fatalf("admit=%v: the handler's error became %v", admit, err)
			case !fail && err != nil:
				t.Fatalf("admit=%v: %v", admit, err)
			case !fail && !bytes.Equal(out.GetValue(), payload):
				t.Fatalf("admit=%v: the reply was encoded after its buffer was released (%d bytes differ in length or content)", admit, len(out.GetValue()))
			case released.Load() != 1:
				t.Fatalf("admit=%v fail=%v: released %d times, want once", admit, fail, released.Load())
			}
		}
	}
	if ReleaseAfterSend(context.Background(), func() { t.Fatal("released outside a call") }) {
		t.Fatal("ReleaseAfterSend accepted a context that is no gRPC call")
	}
}

func serveOn(t *testing.T, s *Server) string {
	t.Helper()
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
	return lis.Addr().String()
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
