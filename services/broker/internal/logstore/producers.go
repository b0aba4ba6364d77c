package logstore

import (
	"maps"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// batchesToRetain is how many recent batches per producer are remembered for
// duplicate detection: Kafka's limit of in-flight requests per connection.
const batchesToRetain = 5

// producerBatch is what is remembered of one idempotent batch.
type producerBatch struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	Timestamp               int64
}

// producerEntry is one producer's state: its epoch and last batches, oldest
// first. LastTimestamp, which expiry counts from, is the later of its last
// batch's timestamp and when this replica appended that batch.
type producerEntry struct {
	Epoch         int16
	Batches       []producerBatch
	LastTimestamp int64
}

func (e *producerEntry) clone() *producerEntry {
	c := *e
	c.Batches = append([]producerBatch(nil), e.Batches...)
	return &c
}

// below is e with only its batches that end before offset, or nil if none
// does. The batches share e's epoch (a new epoch starts them afresh).
func (e *producerEntry) below(offset int64) *producerEntry {
	n := 0
	for n < len(e.Batches) && e.Batches[n].LastOffset < offset {
		n++
	}
	if n == 0 {
		return nil
	}
	c := e.clone()
	c.Batches = c.Batches[:n]
	return c
}

func (e *producerEntry) lastOffset() int64 {
	if len(e.Batches) == 0 {
		return -1
	}
	return e.Batches[len(e.Batches)-1].LastOffset
}

// producerState is the idempotent-producer table of one log. It is owned by
// the Log's writer (its mutex).
type producerState struct {
	producers map[int64]*producerEntry
}

func newProducerState() *producerState {
	return &producerState{producers: map[int64]*producerEntry{}}
}

// producerTxn stages the updates of one append so that a batch later in the
// same append sees the earlier ones, and a failed append changes nothing.
type producerTxn struct {
	base *producerState
	// The producers the transaction changed: the first inline (an append
	// is almost always one producer's batch, on every write), the rest in
	// touched.
	firstPID int64
	first    *producerEntry
	touched  map[int64]*producerEntry
}

func (ps *producerState) begin() producerTxn {
	return producerTxn{base: ps}
}

func (t *producerTxn) changed(pid int64) (*producerEntry, bool) {
	if t.first != nil && t.firstPID == pid {
		return t.first, true
	}
	e, ok := t.touched[pid]
	return e, ok
}

func (t *producerTxn) get(pid int64) *producerEntry {
	if e, ok := t.changed(pid); ok {
		return e
	}
	return t.base.producers[pid]
}

func (t *producerTxn) getForUpdate(pid int64) *producerEntry {
	if e, ok := t.changed(pid); ok {
		return e
	}
	e := &producerEntry{Epoch: -1}
	if old, ok := t.base.producers[pid]; ok {
		e = old.clone()
	}
	switch {
	case t.first == nil:
		t.firstPID, t.first = pid, e
	default:
		if t.touched == nil {
			t.touched = map[int64]*producerEntry{}
		}
		t.touched[pid] = e
	}
	return e
}

// check applies the leader's idempotence rules to b (KIP-98). It returns the
// original batch when b is a retry of one of the producer's last batches.
func (t *producerTxn) check(b recordbatch.Batch) (*producerBatch, error) {
	if !b.HasProducerID() {
		return nil, nil
	}
	pid, epoch, seq := b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()
	e := t.get(pid)
	if e == nil {
		// An unknown producer: new, or its state expired
		// (producer.id.expiration.ms) or was truncated away; retention
		// keeps it. Its first batch must start at sequence 0. Kafka
		// since KIP-360 accepts any sequence here, and so did tidemark:
		// a pipelined batch then landed before an earlier one of the
		// same producer that had been refused (too large, before this
		// check) or had not arrived, and a retry of it could be written
		// twice. UNKNOWN_PRODUCER_ID (as Kafka answered before KIP-360)
		// makes the client bump its epoch and send again in order.
		if seq != 0 {
			return nil, kerr.New(kerr.UnknownProducerID, "producer %d is not known here (new, or its state expired after producer.id.expiration.ms); its first batch must start at sequence 0, got %d", pid, seq)
		}
		return nil, nil
	}
	switch {
	case epoch < e.Epoch:
		return nil, kerr.New(kerr.InvalidProducerEpoch, "producer %d epoch %d is older than the current epoch %d", pid, epoch, e.Epoch)
	case epoch > e.Epoch:
		if seq != 0 {
			return nil, kerr.New(kerr.OutOfOrderSequenceNumber, "producer %d new epoch %d must start at sequence 0, got %d", pid, epoch, seq)
		}
		return nil, nil
	}
	last := b.LastSequence()
	for i := range e.Batches {
		if pb := &e.Batches[i]; pb.FirstSeq == seq && pb.LastSeq == last {
			dup := *pb
			return &dup, nil
		}
	}
	if n := len(e.Batches); n > 0 {
		if want := recordbatch.AddSequence(e.Batches[n-1].LastSeq, 1); seq != want {
			return nil, kerr.New(kerr.OutOfOrderSequenceNumber, "producer %d epoch %d: sequence %d, expected %d", pid, epoch, seq, want)
		}
	}
	return nil, nil
}

// update records b, whose offsets are final, appended at nowMs. It applies
// no checks: followers and recovery replay what the leader accepted.
//
// Expiry counts from nowMs when the batch's timestamp is older: a record
// may carry any CreateTime (one replayed from yesterday), and counted from
// that, the producer was forgotten at the next expiry pass, so the resend
// of a batch whose answer was lost (a leader change, a broken connection)
// was answered UNKNOWN_PRODUCER_ID and written again under a new epoch.
func (t *producerTxn) update(b recordbatch.Batch, nowMs int64) {
	if !b.HasProducerID() {
		return
	}
	e := t.getForUpdate(b.ProducerID())
	e.apply(b)
	e.LastTimestamp = max(e.LastTimestamp, nowMs)
}

func (e *producerEntry) apply(b recordbatch.Batch) {
	if b.ProducerEpoch() != e.Epoch {
		e.Epoch = b.ProducerEpoch()
		e.Batches = e.Batches[:0]
	}
	if len(e.Batches) == batchesToRetain {
		e.Batches = append(e.Batches[:0], e.Batches[1:]...)
	}
	e.Batches = append(e.Batches, producerBatch{
		FirstSeq: b.BaseSequence(), LastSeq: b.LastSequence(),
		FirstOffset: b.BaseOffset(), LastOffset: b.LastOffset(),
		Timestamp: b.MaxTimestamp(),
	})
	e.LastTimestamp = b.MaxTimestamp()
}

func (t *producerTxn) commit() {
	if t.first != nil {
		t.base.producers[t.firstPID] = t.first
	}
	maps.Copy(t.base.producers, t.touched)
}

// apply records b directly (replay during loading).
func (ps *producerState) apply(b recordbatch.Batch) {
	if !b.HasProducerID() {
		return
	}
	e, ok := ps.producers[b.ProducerID()]
	if !ok {
		e = &producerEntry{Epoch: -1}
		ps.producers[b.ProducerID()] = e
	}
	e.apply(b)
}

// expire forgets producers whose last batch is older than cutoff (ms).
func (ps *producerState) expire(cutoffMs int64) int {
	n := len(ps.producers)
	maps.DeleteFunc(ps.producers, func(_ int64, e *producerEntry) bool { return e.LastTimestamp < cutoffMs })
	return n - len(ps.producers)
}
