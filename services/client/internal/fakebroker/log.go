package fakebroker

import (
	"slices"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// partition is one partition's log and leadership. Every replica serves the
// same log, and it is committed as soon as it is appended unless the high
// watermark is frozen.
type partition struct {
	leader   int32
	epoch    int32
	replicas []int32

	batches   []recordbatch.Batch // owned copies, offsets and epoch stamped
	leo       int64
	hw        int64
	logStart  int64
	hwFrozen  bool
	producers map[int64]*producerState
	changed   chan struct{} // closed and replaced on every change

	inflight    int // produce calls being handled
	maxInflight int
}

// producerState is the idempotence table entry of one producer (F27).
type producerState struct {
	epoch   int16
	batches []seqBatch // the last five, oldest first
}

type seqBatch struct {
	first, last         int32
	baseOffset, lastOff int64
	epoch               int32
}

func newPartition(leader int32, replicas []int32) *partition {
	return &partition{leader: leader, replicas: replicas, producers: map[int64]*producerState{}, changed: make(chan struct{})}
}

func (p *partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// checkProducer applies the leader's idempotence rules to b: it returns the
// original batch for a retry of one of the producer's last five, an error
// for a sequence gap or a stale epoch, and nil for a batch to append.
func (p *partition) checkProducer(b recordbatch.Batch) (*seqBatch, error) {
	if !b.HasProducerID() {
		return nil, nil
	}
	st, ok := p.producers[b.ProducerID()]
	if !ok {
		// An unknown producer starts at sequence 0, as on a broker.
		if b.BaseSequence() != 0 {
			return nil, kerr.New(kerr.UnknownProducerID, "producer %d is not known; its first batch must start at sequence 0, got %d", b.ProducerID(), b.BaseSequence())
		}
		return nil, nil
	}
	epoch, seq := b.ProducerEpoch(), b.BaseSequence()
	switch {
	case epoch < st.epoch:
		return nil, kerr.New(kerr.InvalidProducerEpoch, "producer %d epoch %d is older than %d", b.ProducerID(), epoch, st.epoch)
	case epoch > st.epoch:
		if seq != 0 {
			return nil, kerr.New(kerr.OutOfOrderSequenceNumber, "producer %d new epoch %d must start at sequence 0, got %d", b.ProducerID(), epoch, seq)
		}
		return nil, nil
	}
	for i := range st.batches {
		if sb := st.batches[i]; sb.first == seq && sb.last == b.LastSequence() {
			return &sb, nil
		}
	}
	if n := len(st.batches); n > 0 {
		if want := recordbatch.AddSequence(st.batches[n-1].last, 1); seq != want {
			return nil, kerr.New(kerr.OutOfOrderSequenceNumber, "producer %d epoch %d: sequence %d, expected %d", b.ProducerID(), epoch, seq, want)
		}
	}
	return nil, nil
}

// appendLocked copies data into the log at the end, stamping the base
// offset and leader epoch, and returns the stored batch.
func (p *partition) appendLocked(data []byte) recordbatch.Batch {
	b := recordbatch.Batch(slices.Clone(data))
	b.SetBaseOffset(p.leo)
	b.SetPartitionLeaderEpoch(p.epoch)
	p.batches = append(p.batches, b)
	p.leo = b.NextOffset()
	if !p.hwFrozen {
		p.hw = p.leo
	}
	if b.HasProducerID() {
		st, ok := p.producers[b.ProducerID()]
		if !ok || st.epoch != b.ProducerEpoch() {
			st = &producerState{epoch: b.ProducerEpoch()}
			p.producers[b.ProducerID()] = st
		}
		if len(st.batches) == 5 {
			st.batches = st.batches[1:]
		}
		st.batches = append(st.batches, seqBatch{
			first: b.BaseSequence(), last: b.LastSequence(),
			baseOffset: b.BaseOffset(), lastOff: b.LastOffset(), epoch: p.epoch,
		})
	}
	p.notifyLocked()
	return b
}

// readLocked returns whole batches from the one holding offset up to the
// high watermark, at most maxBytes after the first.
func (p *partition) readLocked(offset int64, maxBytes int) []byte {
	var out []byte
	for _, b := range p.batches {
		if b.NextOffset() <= offset {
			continue
		}
		if b.LastOffset() >= p.hw {
			break
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	return out
}

// offsetForTime is the first offset whose record timestamp is at or after ts.
func (p *partition) offsetForTime(ts int64) (int64, int64) {
	for _, b := range p.batches {
		if b.LastOffset() >= p.hw {
			break
		}
		if b.MaxTimestamp() < ts {
			continue
		}
		for r, err := range b.Records() {
			if err == nil && r.Timestamp >= ts {
				return r.Offset, r.Timestamp
			}
		}
	}
	return -1, -1
}

// Append writes records to topic-partition as one batch from a producer
// without idempotence, and returns its base offset.
func (c *Cluster) Append(topicName string, partition int32, recs ...recordbatch.Record) int64 {
	var bld recordbatch.Builder
	now := time.Now().UnixMilli()
	for _, r := range recs {
		if r.Timestamp == 0 {
			r.Timestamp = now
		}
		bld.Append(r)
	}
	data := bld.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mustPart(topicName, partition).appendLocked(data).BaseOffset()
}

// FreezeHW stops (or resumes) the high watermark of topic-partition; on
// resume it jumps to the log end.
func (c *Cluster) FreezeHW(topicName string, partition int32, frozen bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mustPart(topicName, partition)
	p.hwFrozen = frozen
	if !frozen {
		p.hw = p.leo
		p.notifyLocked()
	}
}

// DeleteBefore drops the batches wholly below offset and moves the log
// start there, as retention does.
func (c *Cluster) DeleteBefore(topicName string, partition int32, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mustPart(topicName, partition)
	p.batches = slices.DeleteFunc(p.batches, func(b recordbatch.Batch) bool { return b.NextOffset() <= offset })
	p.logStart = offset
}

// UncleanElection replaces the log of topic-partition from offset on, as
// an out-of-sync replica elected leader does: the batches at and above
// offset are gone (offset must be a batch boundary) and the leader epoch
// is bumped, so what is appended next is written under the new one.
func (c *Cluster) UncleanElection(topicName string, partition int32, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mustPart(topicName, partition)
	p.batches = slices.DeleteFunc(p.batches, func(b recordbatch.Batch) bool { return b.BaseOffset() >= offset })
	p.leo, p.hw = offset, offset
	p.epoch++
	p.notifyLocked()
}

// divergingLocked is KIP-320's check of a fetch at offset whose reader
// last read leader epoch last: the newest epoch in the log at or below it
// and where that epoch ends (where the next one starts, else the log end),
// when that is not the epoch read or ends before offset; nil when the log
// still holds what the reader read.
func (p *partition) divergingLocked(offset int64, last int32) *brokerv1.DivergingEpoch {
	epoch, end := int32(-1), p.leo
	for _, b := range p.batches {
		if b.PartitionLeaderEpoch() > last {
			if epoch >= 0 {
				end = b.BaseOffset()
			}
			break
		}
		epoch = b.PartitionLeaderEpoch()
	}
	if epoch < 0 || (epoch == last && end >= offset) {
		return nil
	}
	return &brokerv1.DivergingEpoch{Epoch: epoch, EndOffset: end}
}

// Records returns copies of the committed records of topic-partition.
func (c *Cluster) Records(topicName string, partition int32) []recordbatch.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mustPart(topicName, partition)
	var out []recordbatch.Record
	for _, b := range p.batches {
		for r, err := range b.Records() {
			if err != nil {
				panic(err)
			}
			r.Key, r.Value = slices.Clone(r.Key), slices.Clone(r.Value)
			out = append(out, r)
		}
	}
	return out
}

// BatchCount is the number of batches in the log of topic-partition.
func (c *Cluster) BatchCount(topicName string, partition int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mustPart(topicName, partition).batches)
}

// MaxInFlight is the most produce calls for topic-partition handled at once.
func (c *Cluster) MaxInFlight(topicName string, partition int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mustPart(topicName, partition).maxInflight
}

// Identity is the producer id and epoch a batch was written under.
type Identity struct {
	PID   int64
	Epoch int16
}

// BatchIdentities lists the producer id and epoch of each batch in the log
// of topic-partition, oldest first.
func (c *Cluster) BatchIdentities(topicName string, partition int32) []Identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Identity
	for _, b := range c.mustPart(topicName, partition).batches {
		out = append(out, Identity{PID: b.ProducerID(), Epoch: b.ProducerEpoch()})
	}
	return out
}
