package grpcserver

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"tidemark.io/services/platform/wirecodec"
)

// Admit looks at a request's encoded bytes before they are decoded, so a
// request that would decode into far more memory than it occupies (millions
// of empty records) is refused first. msg is the empty message the bytes
// are for; a non-nil error (a *kerr.Error) refuses the call with it.
type Admit func(wire []byte, msg any) error

// admitCodec is the proto codec with Admit run before each Unmarshal. A
// codec error would reach the client as INTERNAL without our error details,
// so a refusal leaves the message empty and is parked until the admit
// interceptor, first in the chain, turns it into the call's error.
type admitCodec struct {
	admit   Admit
	proto   encoding.CodecV2
	refused *sync.Map     // message pointer -> error
	parked  *atomic.Int64 // entries in refused: most calls skip the map
}

func newAdmitCodec(a Admit) admitCodec {
	return admitCodec{admit: a, proto: wirecodec.Codec{}, refused: &sync.Map{}, parked: &atomic.Int64{}}
}

func (c admitCodec) Name() string { return "proto" }

func (c admitCodec) Marshal(v any) (mem.BufferSlice, error) { return marshalReply(c.proto, v) }

func (c admitCodec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(wirecodec.Pool) // filled completely by the copy
	defer buf.Free()
	if err := c.admit(buf.ReadOnlyData(), v); err != nil {
		c.parked.Add(1)
		c.refused.Store(v, err)
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return c.proto.Unmarshal(mem.BufferSlice{buf}, v)
	}
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// take returns and forgets the refusal of msg, if any.
func (c admitCodec) take(msg any) error {
	if c.parked.Load() == 0 {
		return nil
	}
	if err, ok := c.refused.LoadAndDelete(msg); ok {
		c.parked.Add(-1)
		return err.(error)
	}
	return nil
}

func (c admitCodec) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := c.take(req); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

func (c admitCodec) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, admitStream{ServerStream: ss, c: c})
	}
}

type admitStream struct {
	grpc.ServerStream
	c admitCodec
}

func (s admitStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.c.take(m)
}
