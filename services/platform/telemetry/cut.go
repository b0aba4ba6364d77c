package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	"tidemark.io/services/platform/conntrack"
)

// connCutter cuts the exporter's connections when an export's deadline
// passes with no answer, so that the next export dials the collector anew
// (its name resolved again). gRPC calls a connection whose packets vanish
// (the collector's container moved to another address, a NAT or firewall
// forgot the flow) ready until TCP gives up, about 15 minutes, and every
// export on it timed out meanwhile. gRPC keepalive is no way out: a
// collector's server answers pings more frequent than every 5 minutes
// (its default) with GOAWAY too_many_pings. A refused connection or an
// error the collector answered cuts nothing.
type connCutter struct {
	conns    *conntrack.Conns
	endpoint string
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex
	unlogged int       // cuts since the last log line
	logged   time.Time // zero before the first
}

func newConnCutter(endpoint string, log *slog.Logger) *connCutter {
	return &connCutter{conns: conntrack.NewConns(), endpoint: endpoint, log: log, now: time.Now}
}

// dialOptions record the exporter's connections and watch its exports.
func (c *connCutter) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithContextDialer(c.conns.Dialer(nil)), grpc.WithChainUnaryInterceptor(c.intercept)}
}

func (c *connCutter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	// The call's own deadline, not an answer from the collector.
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.cut()
	}
	return err
}

// cut closes the recorded connections and says so, the first time and
// then at most once every exportWarnEvery.
func (c *connCutter) cut() {
	closed := c.conns.Close()
	if closed == 0 { // still dialling: nothing established to distrust
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unlogged++
	now := c.now()
	if !c.logged.IsZero() && now.Sub(c.logged) < exportWarnEvery {
		return
	}
	c.log.Warn("the trace collector did not answer an export in time; its connection is closed and the next export dials anew",
		"otlp_endpoint", c.endpoint, "cuts", c.unlogged)
	c.unlogged, c.logged = 0, now
}
