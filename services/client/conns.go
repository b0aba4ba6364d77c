package client

import (
	"errors"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"

	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/tlsconf"
)

// connPool is the client's connections: one per broker or controller
// address, traced, with the client's message size limits and dialer.
type connPool struct{ *connpool.Pool }

func newConnPool(o Options) connPool {
	// A produce stream lives for many writes; the client traces each write
	// itself (produce_link.go) instead of one span for the stream.
	handlerOpts := []otelgrpc.Option{otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
		return info.FullMethodName != brokerv1.BrokerService_ProduceStream_FullMethodName
	})}
	if o.TracerProvider != nil {
		handlerOpts = append(handlerOpts, otelgrpc.WithTracerProvider(o.TracerProvider))
	}
	opts := []grpc.DialOption{
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(handlerOpts...)),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(o.MaxMessageBytes),
			grpc.MaxCallSendMsgSize(o.MaxMessageBytes),
		),
	}
	if o.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(o.Dialer))
	}
	if o.TLS != nil {
		opts = append(opts, grpc.WithTransportCredentials(tlsconf.Credentials(o.TLS)))
	}
	return connPool{connpool.New(append(opts, o.DialOptions...)...)}
}

// get returns the connection to addr; after Close, ErrClosed.
func (p connPool) get(addr string) (*grpc.ClientConn, error) {
	cc, err := p.Get(addr)
	if errors.Is(err, connpool.ErrClosed) {
		return nil, ErrClosed
	}
	return cc, err
}

func (p connPool) close() error { return p.Close() }
