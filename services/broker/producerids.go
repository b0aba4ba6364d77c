package broker

import (
	"context"
	"time"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/platform/kerr"
)

// producerIDs hands out idempotent producer ids from blocks the controller
// allocates in etcd, so ids are unique across brokers and restarts. Id 0 is
// never handed out: tidemark producer ids start at 1.
//
// A block is fetched ahead (Kafka's KIP-730 does so at 90 % used): once a
// controller session opens and whenever fewer than a tenth of a block is
// left, so InitProducerId rarely waits for the controller and a broker
// holding a block serves new idempotent producers while etcd is out of
// reach for the whole cluster (its leaders' in-sync followers vouch for
// their acks=all writes then, see replica.Fence).
type producerIDs struct {
	b  *Broker
	mu lockorder.Mutex[lockorder.ProducerIDs]
	// [next, end) is the block ids are handed out from; [spare, spareEnd)
	// the one fetched ahead; block the size of the last one fetched.
	next, end       int64
	spare, spareEnd int64
	block           int64
	fetching        bool
	// heldEnd is the largest end of any block this process has held, told
	// to the controller with each request and session message: an etcd
	// restored from an older snapshot has a counter below it, and would
	// hand the block out again.
	// It is not kept across restarts (see DESIGN.md, "etcd going
	// backwards").
	heldEnd int64
	// kick asks the prefetcher (runPrefetch) to fetch ahead.
	kick chan struct{}
}

func newProducerIDs(b *Broker) *producerIDs {
	return &producerIDs{b: b, kick: make(chan struct{}, 1)}
}

// Next returns a fresh producer id.
func (p *producerIDs) Next(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.next >= p.end && p.spareEnd > p.spare {
			p.next, p.end, p.spare, p.spareEnd = p.spare, p.spareEnd, 0, 0
		}
		if p.next < p.end {
			id := p.next
			p.next++
			if p.lowLocked() {
				p.askPrefetch()
			}
			if id > 0 {
				return id, nil
			}
			continue
		}
		first, end, err := p.allocate(ctx, p.heldEnd)
		if err != nil {
			return 0, err
		}
		p.installLocked(first, end)
	}
}

// lowLocked reports whether the broker should fetch a block ahead: no
// spare, none on its way, and under a tenth of a block left.
func (p *producerIDs) lowLocked() bool {
	return !p.fetching && p.spareEnd <= p.spare && p.end-p.next < max(p.block/10, 1)
}

func (p *producerIDs) askPrefetch() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// installLocked takes a fetched block: at once when the current one is used
// up, else as the spare.
func (p *producerIDs) installLocked(first, end int64) {
	p.block = end - first
	p.heldEnd = max(p.heldEnd, end)
	if p.next >= p.end {
		p.next, p.end = first, end
		return
	}
	p.spare, p.spareEnd = first, end
}

// runPrefetch fetches blocks ahead when asked, until ctx ends.
func (p *producerIDs) runPrefetch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		p.prefetch(ctx)
	}
}

// prefetch fetches a block ahead if the broker is low, without holding mu
// over the controller round trip.
func (p *producerIDs) prefetch(ctx context.Context) {
	p.mu.Lock()
	if !p.lowLocked() {
		p.mu.Unlock()
		return
	}
	p.fetching = true
	heldEnd := p.heldEnd
	p.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	first, end, err := p.allocate(actx, heldEnd)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fetching = false
	if err != nil {
		p.b.log.Debug("could not fetch a producer id block ahead; the next InitProducerId that needs one asks again", "err", err)
		return
	}
	p.installLocked(first, end)
	p.b.log.Debug("fetched a producer id block ahead", "first", first, "count", end-first)
}

// allocate asks the active controller for a block, [first, end), starting
// no lower than heldEnd.
func (p *producerIDs) allocate(ctx context.Context, heldEnd int64) (first, end int64, err error) {
	ctrl := p.b.meta.Controller()
	if ctrl == nil || ctrl.GetAddress() == "" {
		return 0, 0, kerr.New(kerr.NotController, "no active controller known to allocate producer ids")
	}
	conn, err := p.b.peers.Controller(ctrl.GetAddress())
	if err != nil {
		return 0, 0, err
	}
	resp, err := controlv1.NewControllerServiceClient(conn).AllocateProducerIds(ctx,
		&controlv1.AllocateProducerIdsRequest{BrokerId: p.b.cfg.ID, BrokerEpoch: p.b.epoch.Load(), HeldBlockEnd: heldEnd})
	if err != nil {
		return 0, 0, kerr.FromStatus(err)
	}
	if resp.GetCount() <= 0 {
		return 0, 0, kerr.New(kerr.UnknownServerError, "controller allocated an empty producer id block")
	}
	return resp.GetFirstProducerId(), resp.GetFirstProducerId() + int64(resp.GetCount()), nil
}

// held is how many ids the broker can hand out without the controller.
func (p *producerIDs) held() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.end-p.next, 0) + max(p.spareEnd-p.spare, 0)
}

// heldBlockEnd is the largest end of any block this process has held (0 for
// none), reported in every controller session message.
func (p *producerIDs) heldBlockEnd() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldEnd
}
