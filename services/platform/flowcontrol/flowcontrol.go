// Package flowcontrol fixes the HTTP/2 flow-control windows and the write
// buffer of every tidemark gRPC server (grpcserver) and pooled connection
// (connpool: client to broker, broker to broker).
//
// gRPC's default is a dynamic window sized by bandwidth-delay estimation,
// and the estimator samples by sending a PING with the first data frame
// after each PING ACK. On a link that alternates one message each way (a
// synchronous produce, a replica's fetch parked until the next append),
// every message then draws a PING and a PING ACK: two more frames, write
// syscalls and wake-ups on the path of an acks=all write, whose wait is
// the sum of such hops. A static window has no estimator. On loopback or a
// LAN the windows below are far above the bandwidth-delay product, and they
// bound what a peer may send before its reader catches up, as the dynamic
// window (up to 16 MiB) did.
package flowcontrol

import "google.golang.org/grpc"

const (
	// WriteBuffer is how many bytes of frames the transport gathers before
	// writing to the connection (gRPC's default is 32 KiB): a 64 KiB
	// produce request or a follower's fetch answer leaves in one write
	// (with tlsconf.Credentials, one syscall) instead of several. The
	// buffer is shared: taken from a pool for a write and given back, so
	// an idle connection holds none.
	WriteBuffer = 128 << 10
	// StreamWindow is the bytes one stream may have unread: a replica
	// fetch response (replica.fetch.max.bytes, 1 MiB) fits.
	StreamWindow = 4 << 20
	// ConnWindow is the bytes all streams of a connection may have unread.
	ConnWindow = 16 << 20
)

// ServerOptions sets a server's receive windows and write buffer.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.StaticStreamWindowSize(StreamWindow), grpc.StaticConnWindowSize(ConnWindow),
		grpc.WriteBufferSize(WriteBuffer), grpc.SharedWriteBuffer(true)}
}

// DialOptions sets a client connection's receive windows and write buffer.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(StreamWindow), grpc.WithStaticConnWindowSize(ConnWindow),
		grpc.WithWriteBufferSize(WriteBuffer), grpc.WithSharedWriteBuffer(true)}
}
