package gateway

import (
	"context"
	"errors"

	"google.golang.org/grpc"

	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/connpool"
	"tidemark.io/services/platform/kerr"
)

// faultService is the FaultInjectionServiceClient behind
// /v1/brokers/{broker_id}/faults: each call goes to the broker it names,
// found in the cluster's metadata, as the REST user.
type faultService struct {
	gate demoGate
	r    *router
	// admin finds a broker the brokers' metadata no longer lists: one
	// whose registration lapsed while isolated (the controller still
	// knows its address).
	admin *client.Admin
	conns *connpool.Pool
	obs   devObserver
}

var _ faultv1.FaultInjectionServiceClient = faultService{}

// on returns a client on broker id.
func (f faultService) on(ctx context.Context, id int32) (faultv1.FaultInjectionServiceClient, error) {
	if err := f.gate.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.r.requestTimeout)
	defer cancel()
	md, err := f.r.cl.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	addr := ""
	for _, b := range md.GetBrokers() {
		if b.GetId() == id {
			addr = b.GetAddress()
		}
	}
	if addr == "" && f.admin != nil {
		if cl, err := f.admin.DescribeCluster(ctx); err == nil {
			for _, b := range cl.GetBrokers() {
				if b.GetNode().GetId() == id {
					addr = b.GetNode().GetAddress()
				}
			}
		}
	}
	if addr == "" {
		return nil, kerr.BadField(kerr.BrokerNotAvailable, "broker_id", "broker %d is not a live broker of the cluster", id)
	}
	cc, err := f.conns.Get(addr)
	if errors.Is(err, connpool.ErrClosed) {
		return nil, errStopped
	}
	if err != nil {
		return nil, err
	}
	return faultv1.NewFaultInjectionServiceClient(cc), nil
}

func (f faultService) SetFetchFault(ctx context.Context, req *faultv1.SetFetchFaultRequest, opts ...grpc.CallOption) (*faultv1.SetFetchFaultResponse, error) {
	fc, err := f.on(ctx, req.GetBrokerId())
	if err != nil {
		return nil, err
	}
	resp, err := fc.SetFetchFault(ctx, req, opts...)
	f.obs.Refresh()
	return resp, unreachable(req.GetBrokerId(), err)
}

func (f faultService) ClearFaults(ctx context.Context, req *faultv1.ClearFaultsRequest, opts ...grpc.CallOption) (*faultv1.ClearFaultsResponse, error) {
	fc, err := f.on(ctx, req.GetBrokerId())
	if err != nil {
		return nil, err
	}
	resp, err := fc.ClearFaults(ctx, req, opts...)
	f.obs.Refresh()
	return resp, unreachable(req.GetBrokerId(), err)
}

func (f faultService) ListFaults(ctx context.Context, req *faultv1.ListFaultsRequest, opts ...grpc.CallOption) (*faultv1.ListFaultsResponse, error) {
	fc, err := f.on(ctx, req.GetBrokerId())
	if err != nil {
		return nil, err
	}
	resp, err := fc.ListFaults(ctx, req, opts...)
	return resp, unreachable(req.GetBrokerId(), err)
}

func (f faultService) CutLink(ctx context.Context, req *faultv1.CutLinkRequest, opts ...grpc.CallOption) (*faultv1.CutLinkResponse, error) {
	fc, err := f.on(ctx, req.GetBrokerId())
	if err != nil {
		return nil, err
	}
	resp, err := fc.CutLink(ctx, req, opts...)
	f.obs.Refresh()
	return resp, unreachable(req.GetBrokerId(), err)
}

func (f faultService) HealLink(ctx context.Context, req *faultv1.HealLinkRequest, opts ...grpc.CallOption) (*faultv1.HealLinkResponse, error) {
	fc, err := f.on(ctx, req.GetBrokerId())
	if err != nil {
		return nil, err
	}
	resp, err := fc.HealLink(ctx, req, opts...)
	f.obs.Refresh()
	return resp, unreachable(req.GetBrokerId(), err)
}

func (f faultService) Isolate(ctx context.Context, req *faultv1.IsolateRequest, opts ...grpc.CallOption) (*faultv1.IsolateResponse, error) {
	fc, err := f.on(ctx, req.GetBrokerId())
	if err != nil {
		return nil, err
	}
	resp, err := fc.Isolate(ctx, req, opts...)
	f.obs.Refresh()
	return resp, unreachable(req.GetBrokerId(), err)
}

func (f faultService) HealIsolation(ctx context.Context, req *faultv1.HealIsolationRequest, opts ...grpc.CallOption) (*faultv1.HealIsolationResponse, error) {
	fc, err := f.on(ctx, req.GetBrokerId())
	if err != nil {
		return nil, err
	}
	resp, err := fc.HealIsolation(ctx, req, opts...)
	f.obs.Refresh()
	return resp, unreachable(req.GetBrokerId(), err)
}

// unreachable names a broker that did not answer as not available: the
// metadata may still list a broker that has just died, and a bare
// connection error did not say which broker was meant.
func unreachable(id int32, err error) error {
	if err == nil {
		return nil
	}
	if ke := kerr.FromStatus(err); ke.Code == kerr.NetworkException {
		return kerr.BadField(kerr.BrokerNotAvailable, "broker_id", "broker %d did not answer: %s", id, ke.Message)
	}
	return err
}
