package broker

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/grpcserver"
)

// The isolation fault (fault injection only) cuts this broker off from
// etcd and from the controllers, not from its clients nor, unless asked,
// from the other brokers: its lease keepalives, watches and transactions,
// its controller session and AlterPartition calls stop flowing as on a cut
// network, and the controllers' requests to it, their health probes
// included, are lost. What follows is the broker's own doing: its lease
// runs out, it fences itself as leader, the controller elects other
// leaders, and once healed it registers again and follows (DESIGN.md,
// "Broker liveness"). The cut of its links to the other brokers, when
// asked, is the replication service's (replica.Faults, grpcapi).

// controlServicePrefix names the methods the controllers call on a broker.
var controlServicePrefix = "/" + controlv1.BrokerControlService_ServiceDesc.ServiceName + "/"

// fromController reports whether a call is one only a controller makes:
// its requests to the broker, and its fast-failover health probe, which
// asks for the broker's incarnation service (grpcserver.IncarnationService)
// where every other health check (a container's, an operator's) asks for
// the whole server or a named gRPC service.
func fromController(req any, info *grpc.UnaryServerInfo) bool {
	if strings.HasPrefix(info.FullMethod, controlServicePrefix) {
		return true
	}
	check, ok := req.(*healthpb.HealthCheckRequest)
	return ok && info.FullMethod == healthpb.Health_Check_FullMethodName &&
		strings.HasPrefix(check.GetService(), grpcserver.IncarnationServicePrefix)
}

// controllerRequestsLost loses the controllers' requests while f isolates
// the broker: a request waits, unanswered and unapplied, until its caller
// gives up or the isolation ends, and then fails as a request the network
// dropped (UNAVAILABLE), so the controller sends it again. A health probe
// fails the same way, so the controller finds the broker neither answering
// nor refusing, as across a real partition, and leaves it to its lease.
func controllerRequestsLost(f *replica.Faults) grpc.UnaryServerInterceptor {
	return controllerRequestsHeld(f, nil)
}

// controllerRequestsHeld is controllerRequestsLost calling held, when set,
// with a request's context as it starts waiting on the isolation (tests
// wait for it).
func controllerRequestsHeld(f *replica.Faults, held func(context.Context)) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !fromController(req, info) {
			return h(ctx, req)
		}
		isolated, changed := f.Isolation()
		if !isolated {
			return h(ctx, req)
		}
		if held != nil {
			held(ctx)
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
		return nil, status.Errorf(codes.Unavailable, "%s lost: the broker is cut off from the controllers (isolation fault)", info.FullMethod)
	}
}
