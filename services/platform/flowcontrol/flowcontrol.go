// Package flowcontrol fixes the HTTP/2 flow-control windows of every
// tidemark gRPC server (grpcserver) and pooled connection (connpool: client
// to broker, broker to broker).
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
	// StreamWindow is the bytes one stream may have unread: a replica
	// fetch response (replica.fetch.max.bytes, 1 MiB) fits.
	StreamWindow = 4 << 20
	// ConnWindow is the bytes all streams of a connection may have unread.
	ConnWindow = 16 << 20
)

// ServerOptions sets a server's receive windows.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.StaticStreamWindowSize(StreamWindow), grpc.StaticConnWindowSize(ConnWindow)}
}

// DialOptions sets a client connection's receive windows.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(StreamWindow), grpc.WithStaticConnWindowSize(ConnWindow)}
}
