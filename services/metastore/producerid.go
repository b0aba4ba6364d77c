package metastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"tidemark.io/services/platform/retry"
)

// ProducerIDBlockSize is how many producer ids one allocation hands out.
const ProducerIDBlockSize = 1000

// maxAllocAttempts bounds the compare-and-set retries of one allocation.
const maxAllocAttempts = 100

// allocBackoff spaces an allocation's retries after lost compare-and-sets.
var allocBackoff = retry.Backoff{Base: time.Millisecond, Max: 20 * time.Millisecond}

// AllocateProducerIDBlock reserves the next ProducerIDBlockSize producer ids
// and returns the first and the count. It is a compare-and-set on the block
// key's ModRevision (or its absence), retried with jitter under contention,
// so concurrent callers never receive overlapping blocks. It is not fenced:
// any broker may allocate.
func (s *Store) AllocateProducerIDBlock(ctx context.Context) (first, count int64, err error) {
	return s.AllocateProducerIDBlockFrom(ctx, 0)
}

// AllocateProducerIDBlockFrom is AllocateProducerIDBlock handing out no id
// below floor: a broker names the end of the newest block it has held, so
// an etcd restored from an older snapshot (its counter behind blocks the
// brokers still hand ids from) never hands such a block out again.
func (s *Store) AllocateProducerIDBlockFrom(ctx context.Context, floor int64) (first, count int64, err error) {
	key := s.k.producerIDBlock()
	for attempt := range maxAllocAttempts {
		resp, err := s.cli.Get(ctx, key)
		if err != nil {
			return 0, 0, fmt.Errorf("metastore: read %s: %w", key, err)
		}
		var next int64
		cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(resp.Kvs) > 0 {
			cur, err := decode[producerIDBlock](key, resp.Kvs[0].Value)
			if err != nil {
				return 0, 0, err
			}
			next = cur.Next
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)
		}
		next = max(next, floor)
		if next < 0 || next > (1<<63-1)-ProducerIDBlockSize {
			return 0, 0, errors.New("metastore: producer ids exhausted")
		}
		txn, err := s.cli.Txn(ctx).If(cmp).
			Then(clientv3.OpPut(key, encode(producerIDBlock{Next: next + ProducerIDBlockSize}))).
			Commit()
		if err != nil {
			return 0, 0, fmt.Errorf("metastore: allocate producer ids: %w", err)
		}
		if txn.Succeeded {
			return next, ProducerIDBlockSize, nil
		}
		// Lost the race: back off a little, more after each loss.
		if !retry.Sleep(ctx, allocBackoff.Delay(attempt+1)) {
			return 0, 0, ctx.Err()
		}
	}
	return 0, 0, fmt.Errorf("metastore: allocate producer ids: gave up after %d conflicts", maxAllocAttempts)
}
