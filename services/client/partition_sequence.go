package client

import (
	"context"
	"time"

	"tidemark.io/services/recordbatch"
)

// identityLocked starts an InitProducerId request when the partition needs
// an identity and has something to send (or soon will: it starts while the
// first batch lingers).
func (pp *partitionProducer) identityLocked(now time.Time) {
	if !pp.needID || pp.idBusy || (len(pp.queue) == 0 && pp.open == nil) || now.Before(pp.idRetryAt) || pp.resetting {
		return
	}
	pp.idBusy = true
	old := pp.id
	// Started from the partition's goroutine, so the producer's count of
	// goroutines is above zero: Close waits for this one too.
	pp.p.wg.Go(func() {
		ctx, cancel := context.WithTimeout(pp.p.ctx, pp.p.opts.RequestTimeout)
		id, err := pp.p.ids.next(ctx, old)
		cancel()
		pp.mu.Lock()
		pp.idBusy = false
		if err == nil {
			pp.id, pp.needID, pp.nextSeq, pp.confirmed = id, false, 0, false
			pp.idFails, pp.idErr = 0, nil
		} else {
			pp.idFails++
			pp.idErr, pp.idErrAt = err, time.Now()
			pp.idRetryAt = time.Now().Add(backoff(pp.p.c.opts.RetryBackoff, pp.p.c.opts.RetryBackoffMax, pp.idFails))
		}
		pp.mu.Unlock()
		pp.poke()
	})
}

// sequenceLocked moves batches into the window of at most MaxInFlight
// sequenced batches, writing their headers.
func (pp *partitionProducer) sequenceLocked() {
	if pp.p.idem && (pp.needID || pp.idBusy || pp.resetting) {
		return
	}
	n := 0
	for _, b := range pp.queue {
		if b.sequenced {
			n++
			continue
		}
		if n >= pp.p.opts.MaxInFlight {
			return
		}
		if pp.p.idem {
			b.build(pp.id.pid, pp.id.epoch, pp.nextSeq)
			pp.nextSeq = recordbatch.AddSequence(pp.nextSeq, int32(len(b.recs)))
		} else {
			b.build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
		}
		n++
	}
}
