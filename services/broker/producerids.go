package broker

import (
	"context"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/platform/kerr"
)

// producerIDs hands out idempotent producer ids from blocks the controller
// allocates in etcd, so ids are unique across brokers and restarts. Id 0 is
// never handed out: tidemark producer ids start at 1.
type producerIDs struct {
	b    *Broker
	mu   lockorder.Mutex[lockorder.ProducerIDs]
	next int64
	end  int64 // exclusive
}

// Next returns a fresh producer id.
func (p *producerIDs) Next(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.next < p.end {
			id := p.next
			p.next++
			if id > 0 {
				return id, nil
			}
			continue
		}
		if err := p.refillLocked(ctx); err != nil {
			return 0, err
		}
	}
}

func (p *producerIDs) refillLocked(ctx context.Context) error {
	ctrl := p.b.meta.Controller()
	if ctrl == nil || ctrl.GetAddress() == "" {
		return kerr.New(kerr.NotController, "no active controller known to allocate producer ids")
	}
	conn, err := p.b.peers.Conn(ctrl.GetAddress())
	if err != nil {
		return err
	}
	resp, err := controlv1.NewControllerServiceClient(conn).AllocateProducerIds(ctx,
		&controlv1.AllocateProducerIdsRequest{BrokerId: p.b.cfg.ID, BrokerEpoch: p.b.epoch.Load()})
	if err != nil {
		return kerr.FromStatus(err)
	}
	if resp.GetCount() <= 0 {
		return kerr.New(kerr.UnknownServerError, "controller allocated an empty producer id block")
	}
	p.next, p.end = resp.GetFirstProducerId(), resp.GetFirstProducerId()+int64(resp.GetCount())
	return nil
}
