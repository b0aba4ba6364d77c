package broker

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
)

// The isolation fault (fault injection only) cuts this broker off from
// etcd and from the controllers, not from its clients nor from the other
// brokers: its lease keepalives, watches and transactions, its controller
// session and AlterPartition calls stop flowing as on a cut network, and
// the controllers' requests to it are lost. What follows is the broker's
// own doing: its lease runs out, it fences itself as leader, the
// controller elects other leaders, and once healed it registers again and
// follows (DESIGN.md, "Broker liveness").

// controlServicePrefix names the methods the controllers call on a broker.
var controlServicePrefix = "/" + controlv1.BrokerControlService_ServiceDesc.ServiceName + "/"

// controllerRequestsLost loses the controllers' requests while f isolates
// the broker: a request waits, unanswered and unapplied, until its caller
// gives up or the isolation ends, and then fails as a request the network
// dropped (UNAVAILABLE), so the controller sends it again.
func controllerRequestsLost(f *replica.Faults) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !strings.HasPrefix(info.FullMethod, controlServicePrefix) {
			return h(ctx, req)
		}
		isolated, changed := f.Isolation()
		if !isolated {
			return h(ctx, req)
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
		return nil, status.Errorf(codes.Unavailable, "%s lost: the broker is cut off from the controllers (isolation fault)", info.FullMethod)
	}
}
