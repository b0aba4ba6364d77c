package grpcserver

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// A unary handler's reply usually outlives the handler: gRPC encodes it
// after the handler returns. A handler whose reply aliases a pooled buffer
// (a fetch's records read from the log) registers the buffer's release with
// ReleaseAfterSend; the release interceptor then encodes the reply itself,
// runs the releases and hands gRPC the encoded bytes (encodedReply), which
// the server's codec sends as they are.

type releaseKey struct{}

type releaseList struct {
	mu  sync.Mutex
	fns []func()
}

// ReleaseAfterSend arranges for release to run once the reply of the unary
// call ctx belongs to has been encoded (or the call failed). It reports
// false when ctx is not such a call (a handler called in-process, or from
// another protocol's server): the caller then keeps its buffer, which the
// garbage collector reclaims.
func ReleaseAfterSend(ctx context.Context, release func()) bool {
	l, ok := ctx.Value(releaseKey{}).(*releaseList)
	if !ok {
		return false
	}
	l.mu.Lock()
	l.fns = append(l.fns, release)
	l.mu.Unlock()
	return true
}

// encodedReply is a reply already encoded by releaseUnary.
type encodedReply struct{ data mem.BufferSlice }

func releaseUnary(codec encoding.CodecV2) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		l := &releaseList{}
		resp, err := h(context.WithValue(ctx, releaseKey{}, l), req)
		l.mu.Lock()
		fns := l.fns
		l.fns = nil
		l.mu.Unlock()
		if len(fns) == 0 {
			return resp, err
		}
		defer func() {
			for _, f := range fns {
				f()
			}
		}()
		if err != nil {
			return resp, err
		}
		data, err := codec.Marshal(resp)
		if err != nil {
			return nil, err
		}
		return encodedReply{data: data}, nil
	}
}

// marshalReply is the proto codec's Marshal, sending a reply releaseUnary
// encoded as it is.
func marshalReply(codec encoding.CodecV2, v any) (mem.BufferSlice, error) {
	if e, ok := v.(encodedReply); ok {
		return e.data, nil
	}
	return codec.Marshal(v)
}

// replyCodec is the proto codec with marshalReply, for servers without an
// Admit hook (admitCodec does the same).
type replyCodec struct{ proto encoding.CodecV2 }

func (c replyCodec) Name() string                                { return "proto" }
func (c replyCodec) Marshal(v any) (mem.BufferSlice, error)      { return marshalReply(c.proto, v) }
func (c replyCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }
