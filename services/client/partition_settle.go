package client

import (
	"fmt"
	"slices"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// Settling the answers of one partition.
//
// Retriable failures anywhere in the window are scheduled for a resend
// (sendLocked resends in sequence order). Successes and final failures are
// completed from the head only, so callbacks run in order.
//
// With idempotence, the broker appends a batch only if its base sequence
// follows the last one it has from the producer, and answers a resend of
// one of the last five with the original offsets (F27). So a resend never
// duplicates and never overtakes: a batch that arrives early is refused with
// OUT_OF_ORDER_SEQUENCE_NUMBER and simply resent once the earlier ones are
// through. That refusal is a reordering, not an error, when the batch went
// out while an earlier batch was unacknowledged (Kafka's client tells the
// two cases apart the same way, by whether the batch was the next expected
// one). For the head batch it means the broker lost the producer's state:
// as Kafka's client does, the partition restarts its sequences under a
// bumped epoch and resends.
//
// That resend is safe only if the head is certainly not in the log; when
// an earlier attempt of it went unanswered, the log is looked at first
// (partition_written.go).
//
// A final failure of a sequenced batch (not retriable, out of retries, or
// past delivery.timeout.ms) leaves a hole in the sequence, so the partition
// also restarts under a new epoch: it waits for its in-flight requests, fails
// the batch, and resends the later batches with new sequences, except those
// that may already be in the log (their resend under a new epoch could not
// be recognised as a duplicate); those fail too. Nothing is ever resent
// under a new epoch if it may have been written, so nothing is duplicated.

// completion is the outcome of a whole batch, delivered outside the lock.
type completion struct {
	b           *batch
	base        int64 // -1 when unknown
	leaderEpoch int32
	err         *kerr.Error
}

func (b *batch) succeeded() bool {
	r := b.result
	return r != nil && (r.err == nil || r.err.Code == kerr.DuplicateSequenceNumber)
}

func success(b *batch) completion {
	c := completion{b: b, base: -1, leaderEpoch: -1}
	if r := b.result.resp; r != nil && b.result.err == nil {
		c.base, c.leaderEpoch = r.GetBaseOffset(), r.GetLeaderEpoch()
	}
	return c
}

func failure(b *batch, err *kerr.Error) completion {
	return completion{b: b, base: -1, leaderEpoch: -1, err: err}
}

// notWritten lists the answers after which the batch is certainly not in
// the log: the leader refused it before appending. This stays here rather
// than in the kerr table: it is what the produce path proves about one
// batch (it decides whether the idempotent sequence may be reused), not a
// property of the code wherever it appears.
func notWritten(c kerr.Code) bool {
	switch c {
	case kerr.OutOfOrderSequenceNumber, kerr.NotEnoughReplicas, kerr.MessageTooLarge,
		kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidRequiredAcks,
		kerr.InvalidTimestamp, kerr.InvalidProducerEpoch, kerr.UnknownProducerID,
		kerr.UnknownTopicOrPartition, kerr.LeaderNotAvailable, kerr.InvalidRequest:
		return true
	}
	return false
}

// lostState says the leader does not know the producer's sequence where the
// batch expects it: restart the sequence rather than fail.
func lostState(c kerr.Code) bool {
	return c == kerr.OutOfOrderSequenceNumber || c == kerr.UnknownProducerID
}

// judgeLocked looks at a batch's last answer: retriable failures are turned
// into a scheduled resend; successes and final failures stay for settling.
func (pp *partitionProducer) judgeLocked(b *batch, now time.Time) {
	r := b.result
	if r.err == nil {
		return
	}
	e := r.err
	b.lastErr = e
	if r.sent && !notWritten(e.Code) {
		b.maybeWritten = true
	}
	idem := pp.p.idem
	switch {
	case e.Code == kerr.DuplicateSequenceNumber:
		// Kafka treats this as success without offsets.
	case idem && e.Code == kerr.OutOfOrderSequenceNumber && b.sentWithGap:
		// Overtook an earlier batch; resend in order, no backoff, no retry charged.
		b.result, b.retryAt = nil, now
	case idem && lostState(e.Code):
		// Final here; settled at the head by restarting the sequence.
	case e.Code.Retriable() && b.retries < pp.p.opts.Retries && now.Before(b.deadline):
		b.retries++
		b.result = nil
		b.retryAt = now.Add(backoff(pp.p.c.opts.RetryBackoff, pp.p.c.opts.RetryBackoffMax, b.retries))
		pp.p.c.log.Debug("produce retry", "topic", pp.topic, "partition", pp.partition, "retry", b.retries, "err", e)
	}
}

// settleLocked acts on the answers that came back.
func (pp *partitionProducer) settleLocked(now time.Time, out []completion) []completion {
	for _, b := range pp.queue {
		if !b.sequenced {
			break
		}
		if !b.inFlight && b.result != nil {
			pp.judgeLocked(b, now)
		}
	}
	for len(pp.queue) > 0 && !pp.resetting {
		b := pp.queue[0]
		if !b.sequenced || b.inFlight {
			break
		}
		if b.result == nil {
			if now.Before(b.deadline) {
				break // waiting for its resend
			}
			b.expired = true
		}
		if b.succeeded() {
			out = append(out, pp.successLocked(b))
			pp.popLocked()
			pp.confirmed = true
			continue
		}
		if !pp.p.idem {
			if pp.splitHeadLocked(now) {
				continue
			}
			out = append(out, failure(b, pp.finalErr(b, now)))
			pp.popLocked()
			continue
		}
		pp.resetting = true
	}
	if pp.resetting && pp.inflight == 0 && !pp.lookingUpHeadLocked(now) {
		out = pp.resetLocked(now, out)
	}
	return out
}

// successLocked completes an acknowledged batch, noting its last offset.
func (pp *partitionProducer) successLocked(b *batch) completion {
	if r := b.result.resp; r != nil && b.result.err == nil {
		pp.lastAcked = max(pp.lastAcked, r.GetLastOffset())
	}
	return success(b)
}

func (pp *partitionProducer) popLocked() {
	pp.queue[0] = nil
	pp.queue = pp.queue[1:]
}

// finalErr is the error a batch fails with.
func (pp *partitionProducer) finalErr(b *batch, now time.Time) *kerr.Error {
	if b.expired || !now.Before(b.deadline) || b.lastErr == nil {
		return pp.timeoutErr(b)
	}
	if b.lastErr.Code.Retriable() {
		return kerr.New(b.lastErr.Code, "%s (after %d retries)", b.lastErr.Message, b.retries)
	}
	return b.lastErr
}

// resetLocked restarts the partition's sequence after its head batch could
// not be delivered under the current identity. No request is in flight.
func (pp *partitionProducer) resetLocked(now time.Time, out []completion) []completion {
	head := pp.queue[0]
	split := pp.splitHeadLocked(now)
	if split {
		head = pp.queue[0]
	}
	keepHead, headErr := split, (*kerr.Error)(nil)
	if !split && pp.lostStateLocked(head, now) {
		var found *completion
		keepHead, found, headErr = pp.resolveHeadLocked(head)
		if found != nil {
			// Written after all: complete it and settle the next batch
			// on its own answer.
			pp.lastAcked = max(pp.lastAcked, found.base+int64(len(head.recs))-1)
			pp.popLocked()
			pp.resetting, pp.lookup = false, nil
			pp.poke()
			return append(out, *found)
		}
	}
	// If the head is certainly not in the log, no later batch can be either:
	// the leader appends strictly in sequence.
	headUnwritten := keepHead || !head.maybeWritten
	if !keepHead && headErr == nil {
		headErr = pp.finalErr(head, now)
	}
	keep := make([]*batch, 0, len(pp.queue))
	for i, b := range pp.queue {
		switch {
		case !b.sequenced:
			keep = append(keep, b)
		case i == 0 && keepHead, i == 1 && split:
			b.unsequence()
			keep = append(keep, b)
		case i == 0:
			out = append(out, failure(b, headErr))
		case b.succeeded():
			out = append(out, pp.successLocked(b))
		case !now.Before(b.deadline):
			out = append(out, failure(b, pp.timeoutErr(b)))
		case b.maybeWritten && !headUnwritten:
			out = append(out, failure(b, kerr.New(headErr.Code,
				"%s-%d: an earlier batch failed (%v) and this one may already be written, so it is not resent under a new producer epoch",
				pp.topic, pp.partition, headErr)))
		default:
			b.unsequence()
			keep = append(keep, b)
		}
	}
	pp.queue = keep
	pp.resetting, pp.confirmed, pp.needID, pp.lookup = false, false, true, nil
	pp.p.c.log.Debug("producer sequence reset", "topic", pp.topic, "partition", pp.partition, "pid", pp.id.pid, "epoch", pp.id.epoch)
	return out
}

// splitHeadLocked replaces the head batch by its two halves when the leader
// refused it as too large and it holds more than one record. The halves are
// built without a producer id for a plain producer; an idempotent one
// sequences them afresh under a new epoch (resetLocked), since the batches
// sent behind the refused one now carry the wrong sequences. Halving again
// on each refusal finds a size the leader takes in log2(records) rounds.
func (pp *partitionProducer) splitHeadLocked(now time.Time) bool {
	head := pp.queue[0]
	if head.expired || head.result == nil || !now.Before(head.deadline) || !head.splittable(head.result.err) {
		return false
	}
	first, second := head.split()
	pp.p.c.log.Info("produce batch too large for the leader: splitting it", "topic", pp.topic, "partition", pp.partition,
		"records", len(head.recs), "bytes", head.b.Len(), "err", head.result.err)
	if !pp.p.idem {
		first.build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
		second.build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
	}
	pp.queue = slices.Insert(pp.queue[1:], 0, first, second)
	return true
}

// unsequence returns a batch to the unsent state, to be sequenced again
// under a new identity.
func (b *batch) unsequence() {
	b.sequenced, b.data, b.result, b.sends = false, nil, nil, 0
	b.retryAt, b.sentWithGap, b.maybeWritten = time.Time{}, false, false
}

// deliver runs the callbacks of completed batches, in order, without locks.
// Buffer memory is returned first so that a callback that produces again
// does not wait for its own batch.
func (pp *partitionProducer) deliver(out []completion) {
	for _, c := range out {
		pp.p.mem.release(c.b.size)
		code := kerr.None
		var err error
		if c.err != nil {
			code = c.err.Code
			err = fmt.Errorf("produce to %s-%d: %w", pp.topic, pp.partition, c.err)
		}
		for i, rec := range c.b.recs {
			off := int64(-1)
			if c.base >= 0 {
				off = c.base + int64(i)
			}
			rec.cb(Result{
				Topic: pp.topic, Partition: pp.partition, Offset: off, Timestamp: rec.ts,
				LeaderEpoch: c.leaderEpoch, Code: code,
			}, err)
		}
		close(c.b.done)
		pp.p.recycle(c.b)
	}
}
