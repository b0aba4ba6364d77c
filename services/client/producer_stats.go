package client

import (
	"sync/atomic"
	"time"
)

// ProducerStats are a producer's counters since it was created; they say
// whether records waited in the producer rather than in the cluster.
type ProducerStats struct {
	// Batches counts batches sent for the first time (retries not counted).
	Batches int64
	// SlotWaits counts those that were ready to go while their partition
	// already had max.in.flight requests outstanding: the pipeline
	// (max.in.flight batches per round trip to the leader) was full, and
	// the batch waited for an answer to free a slot.
	SlotWaits int64
	// QueueTime sums the time from each batch's creation to its first send
	// (linger, and any wait for a slot or a producer id); QueueTimeMax is
	// the longest since the previous Stats call. Kafka's producer metrics
	// record-queue-time-avg and record-queue-time-max.
	QueueTime    time.Duration
	QueueTimeMax time.Duration
}

// producerCounters are ProducerStats as the partition goroutines update them.
type producerCounters struct {
	batches, slotWaits, queueTime, queueTimeMax atomic.Int64
}

// sent counts a batch's first send, queued for waited after its creation.
func (c *producerCounters) sent(waited time.Duration, slotWait bool) {
	waited = max(waited, 0) // the clock read before the batch was created
	c.batches.Add(1)
	if slotWait {
		c.slotWaits.Add(1)
	}
	c.queueTime.Add(int64(waited))
	for {
		cur := c.queueTimeMax.Load()
		if int64(waited) <= cur || c.queueTimeMax.CompareAndSwap(cur, int64(waited)) {
			return
		}
	}
}

// Stats returns the producer's counters and starts a new QueueTimeMax.
func (p *Producer) Stats() ProducerStats {
	return ProducerStats{
		Batches:      p.counters.batches.Load(),
		SlotWaits:    p.counters.slotWaits.Load(),
		QueueTime:    time.Duration(p.counters.queueTime.Load()),
		QueueTimeMax: time.Duration(p.counters.queueTimeMax.Swap(0)),
	}
}
