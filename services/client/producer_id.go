package client

import (
	"context"
	"math"
	"sync"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// identity is a producer id and epoch; pid -1 means none yet.
type identity struct {
	pid   int64
	epoch int16
}

var noIdentity = identity{pid: -1, epoch: -1}

// producerIDs holds the producer's id and epoch, shared by its partitions.
// Idempotence state lives per (producer id, partition) on the brokers, so a
// partition that must restart its sequences takes a bumped epoch and the
// others move to it only when they restart theirs.
//
// Brokers only hand out fresh ids at epoch 0, as Kafka's do for a producer
// without a transactional id; the epoch is bumped here, as Kafka's
// idempotent producer does (KIP-360): a leader takes a newer epoch of a
// producer id it knows when it starts at sequence 0, and from then on
// refuses the older epoch's batches still in flight (INVALID_PRODUCER_EPOCH).
// Only an exhausted epoch costs a new id.
type producerIDs struct {
	c *Client

	mu   sync.Mutex // guards cur and call
	cur  identity
	call *idCall
}

type idCall struct {
	done chan struct{}
	err  error
}

func newProducerIDs(c *Client) *producerIDs { return &producerIDs{c: c, cur: noIdentity} }

// next returns the identity a partition should use, given the one it used
// (noIdentity at first). When the current identity is the one the partition
// is done with, its epoch is bumped, or a fresh id is asked for when there
// is none yet or the epoch is exhausted; concurrent callers share one
// request. One attempt: the caller retries.
func (p *producerIDs) next(ctx context.Context, old identity) (identity, error) {
	for {
		p.mu.Lock()
		if p.cur.pid >= 0 && p.cur != old {
			id := p.cur
			p.mu.Unlock()
			return id, nil
		}
		if p.cur.pid >= 0 && p.cur.epoch < math.MaxInt16 {
			p.cur.epoch++
			id := p.cur
			p.mu.Unlock()
			p.c.log.Debug("producer epoch bumped", "pid", id.pid, "epoch", id.epoch)
			return id, nil
		}
		call := p.call
		if call == nil {
			call = &idCall{done: make(chan struct{})}
			p.call = call
			p.mu.Unlock()
			id, err := p.ask(ctx)
			p.mu.Lock()
			if err == nil {
				p.cur = id
			}
			p.call = nil
			p.mu.Unlock()
			call.err = err
			close(call.done)
			if err != nil {
				return noIdentity, err
			}
			continue
		}
		p.mu.Unlock()
		select {
		case <-call.done:
			if call.err != nil {
				return noIdentity, call.err
			}
		case <-ctx.Done():
			return noIdentity, toKerr(ctx.Err())
		}
	}
}

// ask asks any broker for a fresh producer id (epoch 0).
func (p *producerIDs) ask(ctx context.Context) (identity, error) {
	p.c.meta.mu.Lock()
	addrs := p.c.meta.candidatesLocked()
	p.c.meta.mu.Unlock()
	var last error = kerr.New(kerr.NetworkException, "no broker to ask for a producer id")
	for _, addr := range addrs {
		var out identity
		err := p.c.brokerCall(ctx, addr, func(ctx context.Context, bc brokerv1.BrokerServiceClient) error {
			resp, err := bc.InitProducerId(ctx, &brokerv1.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1})
			if err != nil {
				return err
			}
			out = identity{pid: resp.GetProducerId(), epoch: int16(resp.GetProducerEpoch())}
			return nil
		})
		if err == nil {
			p.c.log.Debug("producer id", "pid", out.pid, "epoch", out.epoch)
			return out, nil
		}
		last = err
		if ke := toKerr(err); ke.Code != kerr.NetworkException || ctx.Err() != nil {
			break
		}
	}
	return noIdentity, wrap(last, "init producer id")
}
