package ctrl

import (
	"context"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// AllocateProducerIds hands the broker a block of producer ids from etcd.
// Producer id 0 is never handed out: tidemark's producer ids start at 1.
// No block starts below the end of the newest block the broker says it has
// held, nor below producerIDFloor: an etcd restored from an older snapshot
// has a counter behind the blocks running brokers hand ids from, and would
// hand them out again.
func (a *Active) AllocateProducerIds(ctx context.Context, req *controlv1.AllocateProducerIdsRequest) (*controlv1.AllocateProducerIdsResponse, error) {
	if err := a.call(ctx, func() error { return a.checkBrokerEpoch(req.GetBrokerId(), req.GetBrokerEpoch()) }); err != nil {
		return nil, err
	}
	floor := max(req.GetHeldBlockEnd(), a.producerIDFloor.Load())
	first, count, err := a.d.Store.AllocateProducerIDBlockFrom(ctx, floor)
	if err != nil {
		return nil, err
	}
	a.raiseProducerIDFloor(first + count)
	if first == 0 {
		first, count = 1, count-1
	}
	a.log.Debug("allocated producer ids", "broker_id", req.GetBrokerId(), "first", first, "count", count, "floor", floor)
	return &controlv1.AllocateProducerIdsResponse{FirstProducerId: first, Count: int32(count)}, nil
}

// raiseProducerIDFloor moves producerIDFloor up to end (never down).
func (a *Active) raiseProducerIDFloor(end int64) {
	for {
		cur := a.producerIDFloor.Load()
		if end <= cur || a.producerIDFloor.CompareAndSwap(cur, end) {
			return
		}
	}
}
