package console

import (
	"errors"

	"google.golang.org/grpc"

	"tidemark.io/services/platform/connpool"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
)

var errClosed = errors.New("console is closed")

// connSet holds one connection per address for the two services the Go
// client does not cover: the brokers' FaultInjectionService and the dev
// launcher's DevClusterService.
type connSet struct{ pool *connpool.Pool }

// newConnSet dials with opts (TLS credentials, the user forwarding of
// restauth.ForwardUser).
func newConnSet(opts ...grpc.DialOption) *connSet { return &connSet{pool: connpool.New(opts...)} }

// get returns the connection to addr (dialed lazily on first use).
func (s *connSet) get(addr string) (*grpc.ClientConn, error) {
	cc, err := s.pool.Get(addr)
	if errors.Is(err, connpool.ErrClosed) {
		return nil, errClosed
	}
	return cc, err
}

func (s *connSet) close() { _ = s.pool.Close() }

func (c *Console) devClient() (devclusterv1.DevClusterServiceClient, error) {
	cc, err := c.conns.get(c.opts.DevControl)
	if err != nil {
		return nil, err
	}
	return devclusterv1.NewDevClusterServiceClient(cc), nil
}

func (c *Console) faultClient(addr string) (faultv1.FaultInjectionServiceClient, error) {
	cc, err := c.conns.get(addr)
	if err != nil {
		return nil, err
	}
	return faultv1.NewFaultInjectionServiceClient(cc), nil
}
