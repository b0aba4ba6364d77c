package client

import (
	"context"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// Whether a head batch is in the log.
//
// A head batch that may already be written (an earlier attempt went
// unanswered) and whose resend the leader refuses because it does not know
// the producer's sequence there (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER)
// is looked for in the leader's log before the partition restarts its
// sequence, since a resend under a new epoch could not be recognised as a
// duplicate. Kafka's rule comes first: a log start past the last offset
// acknowledged on the partition means retention removed the producer's
// writes, and its state with them, and the head is resent. Otherwise
// Kafka's client fails the batch; here the log tells which it is: the log
// from just after that offset up to the high watermark is read for the
// head's producer id, epoch and sequence: found, the head succeeded at that
// offset; not there, it was never written and is resent. A leader that has
// appended the head knows the producer until producer.id.expiration.ms has
// passed since, and a batch that old is below the high watermark or gone.
// If the log cannot be read the head fails with the leader's error, saying
// it may or may not have been written.

// headLookup is what the leader's log says about one head batch.
type headLookup struct {
	head     *batch
	done     bool
	logStart int64
	found    bool // the head is in the log at base
	base     int64
	epoch    int32 // the leader epoch it was written in
	err      error
}

// lostStateLocked says the head was refused because the leader does not
// know the producer's sequence where the head expects it, in time to resend.
func (pp *partitionProducer) lostStateLocked(head *batch, now time.Time) bool {
	return !head.expired && head.result != nil && head.result.err != nil && lostState(head.result.err.Code) &&
		now.Before(head.deadline)
}

// lookingUpHeadLocked starts or waits for the lookup the head batch needs
// before the partition restarts its sequence.
func (pp *partitionProducer) lookingUpHeadLocked(now time.Time) bool {
	head := pp.queue[0]
	if !head.maybeWritten || !pp.lostStateLocked(head, now) {
		return false
	}
	if pp.lookup != nil && pp.lookup.head == head {
		return !pp.lookup.done
	}
	l := &headLookup{head: head, logStart: -1, base: -1}
	pp.lookup = l
	id, seq, lastAcked := pp.id, head.baseSeq, pp.lastAcked
	timeout := min(pp.p.opts.RequestTimeout, time.Until(head.deadline))
	pp.p.wg.Go(func() { // Close waits for it, as for every producer goroutine
		ctx, cancel := context.WithTimeout(pp.p.ctx, timeout)
		logStart, found, err := pp.findInLog(ctx, id, seq, lastAcked)
		cancel()
		pp.mu.Lock()
		l.done, l.logStart, l.err = true, logStart, err
		if found != nil {
			l.found, l.base, l.epoch = true, found.BaseOffset(), found.PartitionLeaderEpoch()
		}
		pp.mu.Unlock()
		pp.poke()
	})
	return true
}

// lookupRunningLocked says a lookup's request has not returned yet.
func (pp *partitionProducer) lookupRunningLocked() bool { return pp.lookup != nil && !pp.lookup.done }

// findInLog returns the partition's log start offset and, unless it is past
// lastAcked, the batch of producer id with sequence seq after lastAcked and
// below the high watermark (nil when there is none).
func (pp *partitionProducer) findInLog(ctx context.Context, id identity, seq int32, lastAcked int64) (int64, recordbatch.Batch, error) {
	c := pp.p.c
	lo, err := c.ListOffsets(ctx, pp.topic, pp.partition, Earliest())
	if err != nil || lo.Offset > lastAcked {
		return lo.Offset, nil, err
	}
	for from := lastAcked + 1; ; {
		var resp *brokerv1.FetchResponse
		err := c.partitionCall(ctx, "fetch", pp.topic, pp.partition, func(ctx context.Context, r route, bc brokerv1.BrokerServiceClient) error {
			var err error
			resp, err = bc.Fetch(ctx, &brokerv1.FetchRequest{Topic: pp.topic, Partition: pp.partition, Offset: from,
				MaxBytes: DefaultFetchMaxBytes, CurrentLeaderEpoch: r.leaderEpoch, RawBatches: true})
			return err
		})
		if kerr.CodeOf(err) == kerr.OffsetOutOfRange {
			// Retention moved the log start past lastAcked meanwhile.
			return lastAcked + 1, nil, nil
		}
		if err != nil {
			return lo.Offset, nil, err
		}
		next := from
		for b, err := range recordbatch.All(resp.GetRecordBatches()) {
			if err != nil {
				return lo.Offset, nil, err
			}
			if b.ProducerID() == id.pid && b.ProducerEpoch() == id.epoch && b.BaseSequence() == seq {
				return lo.Offset, b, nil
			}
			next = b.NextOffset()
		}
		if next == from || next >= resp.GetHighWatermark() {
			return lo.Offset, nil, nil
		}
		from = next
	}
}

// resolveHeadLocked acts on the lookup of a head refused for lost producer
// state: it says whether the head may be resent under a new epoch, or
// completes it as written (found) or as failed (err).
func (pp *partitionProducer) resolveHeadLocked(head *batch) (resend bool, found *completion, err *kerr.Error) {
	if !head.maybeWritten {
		return true, nil, nil
	}
	l := pp.lookup
	switch {
	case l == nil || l.head != head || !l.done:
		return false, nil, pp.maybeWrittenErr(head, "not looked up")
	case l.logStart > pp.lastAcked:
		return true, nil, nil
	case l.err != nil:
		return false, nil, pp.maybeWrittenErr(head, l.err.Error())
	case l.found:
		c := completion{b: head, base: l.base, leaderEpoch: l.epoch}
		return false, &c, nil
	}
	return true, nil, nil
}

// maybeWrittenErr is the error of a head batch that may be in the log, that
// the leader no longer recognises and that the log could not be searched for.
func (pp *partitionProducer) maybeWrittenErr(head *batch, why string) *kerr.Error {
	return kerr.New(head.result.err.Code,
		"%s-%d: an earlier attempt of this batch went unanswered and the leader now refuses its resend (%s), "+
			"so it may or may not have been written, and looking for it in the log failed (%s); "+
			"it is not resent under a new producer epoch, which could write it twice",
		pp.topic, pp.partition, head.result.err.Message, why)
}
