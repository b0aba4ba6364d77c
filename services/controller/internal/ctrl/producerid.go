package ctrl

import (
	"context"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// AllocateProducerIds hands the broker a block of producer ids from etcd.
// Producer id 0 is never handed out: tidemark's producer ids start at 1.
func (a *Active) AllocateProducerIds(ctx context.Context, req *controlv1.AllocateProducerIdsRequest) (*controlv1.AllocateProducerIdsResponse, error) {
	if err := a.call(ctx, func() error { return a.checkBrokerEpoch(req.GetBrokerId(), req.GetBrokerEpoch()) }); err != nil {
		return nil, err
	}
	first, count, err := a.d.Store.AllocateProducerIDBlock(ctx)
	if err != nil {
		return nil, err
	}
	if first == 0 {
		first, count = 1, count-1
	}
	a.log.Debug("allocated producer ids", "broker_id", req.GetBrokerId(), "first", first, "count", count)
	return &controlv1.AllocateProducerIdsResponse{FirstProducerId: first, Count: int32(count)}, nil
}
